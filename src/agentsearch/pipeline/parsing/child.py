"""The child process that reads one untrusted file (started by ``agentsearch.pipeline.parsing.sandbox.read_file``).

It sets its own limits first, then imports the one reader its format needs (``agentsearch.pipeline.parsing.formats``),
and writes JSON lines to standard output: progress as it goes, then the parsed file or the reason it was refused.

Usage (what ``read_file`` runs)::

    python -P -m agentsearch.pipeline.parsing.child FILE FORMAT LIMITS_JSON WINDOW_JSON
"""

from __future__ import annotations

import importlib
import json
import resource
import sys
from pathlib import Path

from agentsearch.pipeline.parsing.parsed import ParseLimits, ParseRefused


def _cap(kind: int, soft: int, hard: int) -> None:
    _, current_hard = resource.getrlimit(kind)
    if current_hard != resource.RLIM_INFINITY:
        soft, hard = min(soft, current_hard), min(hard, current_hard)
    resource.setrlimit(kind, (soft, hard))


def _say(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main(path: str, file_format: str, limits: ParseLimits, window: list[int] | None) -> None:
    _cap(resource.RLIMIT_CORE, 0, 0)  # a child stopped at its CPU limit leaves no core file behind
    _cap(resource.RLIMIT_CPU, limits.time_s, limits.time_s + 1)
    _cap(resource.RLIMIT_AS, limits.memory_mb * 2**20, limits.memory_mb * 2**20)
    from agentsearch.pipeline.parsing.formats import READERS

    try:
        reader = importlib.import_module(READERS[file_format])
        pages = range(*window) if window else None
        parsed = reader.parse(Path(path), limits, lambda done, total: _say({"progress": [done, total]}), pages)
        # Built within the limits too: a long text is memory as well.
        _say({"parsed": parsed.to_json()})
    except ParseRefused as exc:
        _say({"refused": str(exc)})
    except MemoryError:
        _say({"refused": f"reading the file needed more than {limits.memory_mb} MB"})
    except RecursionError:
        _say({"refused": "the file is nested too deeply to read"})
    except Exception as exc:  # noqa: BLE001 - a malformed file can break a reader anywhere; the parent says so
        _say({"refused": f"the file is damaged or not what its format says ({type(exc).__name__}: {exc})"[:500]})


if __name__ == "__main__":
    file_arg, format_arg, limits_arg, window_arg = sys.argv[1:]
    main(file_arg, format_arg, ParseLimits(**json.loads(limits_arg)), json.loads(window_arg))
