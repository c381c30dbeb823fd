"""PDF text read in a child process with limits on pages, CPU time and memory: an uploaded file is untrusted input.

A few kilobytes of PDF can cost minutes of parsing (pages sharing one content stream of millions of operators, each
parsed again for every page) or gigabytes of memory (streams that inflate to pypdf's 75 MB cap, one per page).
Python cannot stop a thread, so the parse runs in a process of its own that the kernel stops: ``RLIMIT_CPU`` ends it
past its CPU seconds, ``RLIMIT_AS`` fails its allocations past its memory, and the caller kills it past a wall-clock
backstop. The process is a fresh interpreter started with ``subprocess`` (fork and exec, no Python code in between):
safe from a server's many threads, where forking the interpreter itself is not, and from a Celery prefork child. Its
environment is empty, so neither the server's settings nor its secrets reach the code that reads the file, and ``-P``
keeps this file's directory off its path (``pipeline/platform`` would hide the standard library's ``platform``).

This module is that child's script too: it imports nothing but the standard library at the top, and pypdf in the child.

Usage::

    pdf = read_pdf(Path("report.pdf"), PdfLimits(max_pages=2000, time_s=30, memory_mb=1024))
    pdf.pages, pdf.title                           # each page's text; the title of the document information, or None
    # PdfRefused("the PDF took longer than 30 s to read" / "the PDF has more than 2000 pages" / ...) otherwise
"""

from __future__ import annotations

import json
import resource
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The CPU limit decides; the wall clock only ends a child that gets no CPU at all. A machine busy enough to give the
# child a third of a core, after a slow interpreter start, still reaches the CPU limit first.
WALL_CLOCK_FACTOR = 3
WALL_CLOCK_START_S = 5


@dataclass(frozen=True)
class PdfLimits:
    max_pages: int = 2000
    time_s: int = 30
    memory_mb: int = 1024

    @classmethod
    def from_settings(cls, settings: Any) -> PdfLimits:
        """The limits of ``pipeline.platform.settings.Settings`` (``pdf_max_pages``, ``pdf_read_time_s``,
        ``pdf_read_memory_mb``)."""
        return cls(settings.pdf_max_pages, settings.pdf_read_time_s, settings.pdf_read_memory_mb)


@dataclass(frozen=True)
class PdfText:
    pages: list[str]
    title: str | None


class PdfRefused(ValueError):
    """The file is not read: its message says why, without the file's name (the caller knows what it calls it)."""


def read_pdf(path: Path, limits: PdfLimits) -> PdfText:
    """Each page's text and the title of the PDF at ``path``, read in a child process within ``limits``."""
    command = [sys.executable, "-P", str(Path(__file__).resolve()), str(path.resolve()), str(limits.max_pages),
               str(limits.time_s), str(limits.memory_mb)]
    too_slow = PdfRefused(f"the PDF took longer than {limits.time_s} s to read")
    try:
        done = subprocess.run(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              env={}, timeout=WALL_CLOCK_FACTOR * limits.time_s + WALL_CLOCK_START_S)
    except subprocess.TimeoutExpired:
        raise too_slow from None  # subprocess.run killed the child
    # SIGXCPU at the soft CPU limit; SIGKILL at the hard one, a second later, if the first was not the end of it.
    if done.returncode in (-signal.SIGXCPU, -signal.SIGKILL):
        raise too_slow
    try:
        answer = json.loads(done.stdout)
    except ValueError:
        raise PdfRefused(f"not a readable PDF (the reader ended with status {done.returncode})") from None
    if answer.get("refused") == "pages":
        raise PdfRefused(f"the PDF has more than {limits.max_pages} pages")
    if answer.get("refused") == "memory":
        raise PdfRefused(f"the PDF needed more than {limits.memory_mb} MB to read")
    if "unreadable" in answer:
        raise PdfRefused(f"not a readable PDF ({answer['unreadable']})")
    return PdfText(pages=answer["pages"], title=answer["title"])


# -- the child -------------------------------------------------------------------------------------------------------


def _extract(path: str, max_pages: int) -> dict:
    from pypdf import PdfReader

    reader = PdfReader(path)
    pages = []
    # Counted while reading, not from the page tree's /Count: a file may claim any number there.
    for page in reader.pages:
        if len(pages) == max_pages:
            return {"refused": "pages"}
        pages.append(page.extract_text() or "")
    title = reader.metadata.title if reader.metadata else None
    return {"pages": pages, "title": str(title) if title else None}


def _cap(kind: int, soft: int, hard: int) -> None:
    _, current_hard = resource.getrlimit(kind)
    if current_hard != resource.RLIM_INFINITY:
        soft, hard = min(soft, current_hard), min(hard, current_hard)
    resource.setrlimit(kind, (soft, hard))


def _child(path: str, max_pages: int, time_s: int, memory_mb: int) -> str:
    """The answer the parent reads, as JSON: built within the limits too, a long text being memory as well."""
    _cap(resource.RLIMIT_CORE, 0, 0)  # a child stopped at its CPU limit leaves no core file behind
    _cap(resource.RLIMIT_CPU, time_s, time_s + 1)
    _cap(resource.RLIMIT_AS, memory_mb * 2**20, memory_mb * 2**20)
    try:
        return json.dumps(_extract(path, max_pages))
    except MemoryError:
        return json.dumps({"refused": "memory"})
    except Exception as exc:  # noqa: BLE001 - a malformed file can break the parser anywhere; the caller says so
        from pypdf.errors import PyPdfError

        return json.dumps({"unreadable": str(exc) if isinstance(exc, (PyPdfError, OSError)) else type(exc).__name__})


if __name__ == "__main__":
    path_arg, max_pages_arg, time_s_arg, memory_mb_arg = sys.argv[1:]
    sys.stdout.write(_child(path_arg, int(max_pages_arg), int(time_s_arg), int(memory_mb_arg)))
