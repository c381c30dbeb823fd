"""What a command that loads the models prints besides its own lines: errors, and nothing else from the libraries.

Without an API URL, ``ingest``, ``sync``, ``search``, ``demo`` and ``eval`` load the embedding model (transformers,
sentence-transformers, torch, ONNX Runtime) in this process, and those libraries print as they load: a "Loading
weights" bar, advice, warnings about their own internals. A library that logs with ``logging.warning`` on the root
logger (ONNX Runtime's quantisation does) gives the root logger a handler when it has none, and from then on every
library's records were printed, the embedded Milvus Lite server's tracebacks among them. ``quiet_libraries`` runs
before any of them is imported:

- their own switches, as environment defaults (a variable already set wins: ``TRANSFORMERS_VERBOSITY=info`` still
  shows transformers' lines): no library progress bars, transformers' own handler at errors only;
- one handler on the root logger, on stderr: every logger's errors, agentsearch's own warnings, nothing else;
- Python's warnings go to logging (logger ``py.warnings``, level WARNING), so a library's are not shown either.

gRPC core's own lines (``GRPC_VERBOSITY``) are left as they are: the GOAWAY "too_many_pings" lines it printed had a
cause, fixed where the Milvus client is made (``GRPC_OPTIONS`` in ``agentsearch.pipeline.retrieval.vector_store``).

Usage::

    quiet_libraries()          # src/agentsearch/cli/__init__.py, before a command of QUIET_COMMANDS runs; once is
    enough
"""

from __future__ import annotations

import logging
import os
import sys

# The commands that may load the models in this process. The services (api, worker, beat, flower) and mcp configure
# logging themselves (agentsearch.pipeline.observability.logs); the others load no library that prints.
QUIET_COMMANDS = ("ingest", "sync", "search", "demo", "eval", "reindex", "restore")
LIBRARY_SWITCHES = {
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",  # huggingface_hub's bars, and transformers' ("Loading weights")
    "TQDM_DISABLE": "1",                  # any other library's tqdm bar; the commands' own bars are click's
    "TRANSFORMERS_VERBOSITY": "error",    # transformers logs through a handler of its own, not the root logger's
}
_MARK = "_agentsearch_cli_handler"


class _Stderr(logging.StreamHandler):
    """Writes to ``sys.stderr`` as it is when a record comes, as ``logging.lastResort`` does: a test's captured
    stream may be closed by then."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:
        pass


def shown(record: logging.LogRecord) -> bool:
    """Whether the command prints ``record``: an error of any logger, or a warning of agentsearch's own."""
    if _unimplemented_in_milvus_lite(record):
        return False
    if record.levelno >= logging.ERROR:
        return True
    return record.levelno >= logging.WARNING and record.name.startswith("agentsearch")


def _unimplemented_in_milvus_lite(record: logging.LogRecord) -> bool:
    # Embedded, Milvus Lite serves gRPC from this process. pymilvus asks for AllocTimestamp after creating an index and
    # does without it when a server lacks it (ignore_unimplemented); Milvus Lite lacks it, and grpc logs the answer
    # as an application error with a traceback on every collection made. Any other error of that server is shown.
    return (record.name == "grpc._server" and record.exc_info is not None
            and isinstance(record.exc_info[1], NotImplementedError))


def quiet_libraries() -> None:
    for name, value in LIBRARY_SWITCHES.items():
        os.environ.setdefault(name, value)
    root = logging.getLogger()
    if not any(getattr(h, _MARK, False) for h in root.handlers):
        handler = _Stderr()
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        handler.addFilter(shown)
        setattr(handler, _MARK, True)
        root.addHandler(handler)
    logging.captureWarnings(True)
