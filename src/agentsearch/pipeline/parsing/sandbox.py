"""Every untrusted file is read in a child process held to limits on CPU time and memory (``read_file``).

A few kilobytes of PDF can cost minutes of parsing (pages sharing one content stream of millions of operators) or
gigabytes of memory (streams that inflate to the reader's cap, one per page); a ZIP of a few kilobytes can unpack to
gigabytes. Python cannot stop a thread, so the parse runs in a process of its own that the kernel stops:
``RLIMIT_CPU`` ends it past its CPU seconds, ``RLIMIT_AS`` fails its allocations past its memory, and the caller kills
it past a wall-clock backstop (which also covers the OCR engine, a process of the child's own). The child is a fresh
interpreter started with ``subprocess`` (fork and exec, no Python code in between): safe from a server's many
threads, where forking the interpreter itself is not, and from a Celery prefork child. Its environment holds only
the path to this package and the OCR engine's, so neither the server's settings nor its secrets reach the code that
reads the file.

The child (``agentsearch.pipeline.parsing.child``) writes JSON lines: ``{"progress": [done, total]}`` as it reads pages,
then one ``{"parsed": ...}`` or ``{"refused": "..."}``.

Usage::

    parsed = read_file(Path("scan.pdf"), "pdf", ParseLimits(), on_progress=lambda done, total: ...)
    parsed = read_file(Path("scan.pdf"), "pdf", ParseLimits(), pages=range(20, 40))   # a window of a long file
    # ParseRefused("reading the file took longer than 30 s") / ("the PDF has more than 2000 pages") / ...
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from agentsearch.pipeline.parsing.parsed import ParsedFile, ParseLimits, ParseRefused

# The CPU limit decides; the wall clock only ends a child that gets no CPU at all (or waits on its OCR engine). A
# machine busy enough to give the child a third of a core, after a slow interpreter start, still reaches the CPU
# limit first.
WALL_CLOCK_FACTOR = 3
WALL_CLOCK_START_S = 5
# The folder that holds the ``pipeline`` package: the child imports its readers from there and from nowhere else.
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[3])
# The child's whole environment. Its imports read the bytecode compiled at install (make install, the Dockerfile):
# where it may not write a cache, nothing it imports is compiled again at each start.
CHILD_ENVIRONMENT = {"PYTHONPATH": _PACKAGE_ROOT, "PATH": "/usr/local/bin:/usr/bin:/bin", "OMP_THREAD_LIMIT": "1",
                     "LANG": "C.UTF-8"}

Progress = Callable[[int, int], None]


def read_file(path: Path, file_format: str, limits: ParseLimits, on_progress: Progress | None = None,
              pages: range | None = None) -> ParsedFile:
    """The parts of the file at ``path`` read as ``file_format`` (``agentsearch.pipeline.parsing.sniff``), within
    ``limits``; for a paged format, only ``pages`` (0-based) when given. ``on_progress(done, total)`` is called as pages
    are read.
    """
    window = [pages.start, pages.stop] if pages is not None else None
    command = [sys.executable, "-P", "-m", "agentsearch.pipeline.parsing.child", str(path.resolve()), file_format,
               json.dumps(asdict(limits)), json.dumps(window)]
    too_slow = ParseRefused(f"reading the file took longer than {limits.time_s} s")
    child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             env=dict(CHILD_ENVIRONMENT), start_new_session=True)
    # The backstop kills the child's whole process group: its OCR engine too.
    timer = threading.Timer(WALL_CLOCK_FACTOR * limits.time_s + WALL_CLOCK_START_S, _kill_group, (child.pid,))
    timer.start()
    answer: dict = {}
    try:
        assert child.stdout is not None
        for line in child.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if "progress" in message and on_progress is not None:
                on_progress(*message["progress"])
            elif "progress" not in message:
                answer = message
        status = child.wait()
    finally:
        timer.cancel()
        if child.poll() is None:
            _kill_group(child.pid)
            child.wait()
    # SIGXCPU at the soft CPU limit; SIGKILL at the hard one a second later, or from the backstop.
    if status in (-signal.SIGXCPU, -signal.SIGKILL) and not answer:
        raise too_slow
    # pdfium aborts when an allocation fails, where Python code would raise MemoryError.
    if status == -signal.SIGABRT and not answer:
        raise ParseRefused(f"reading the file needed more than {limits.memory_mb} MB")
    if "refused" in answer:
        raise ParseRefused(answer["refused"])
    if "parsed" not in answer:
        raise ParseRefused(f"the file could not be read (the reader ended with status {status})")
    return ParsedFile.from_json(answer["parsed"])


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
