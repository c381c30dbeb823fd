"""PDF pages as parts (``{"page": k}``). First version: pypdf's text of each page."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pipeline.parsing.parsed import ParsedFile, ParseLimits, ParseRefused, Part


def parse(path: Path, limits: ParseLimits, progress: Callable[[int, int], None], pages: range | None) -> ParsedFile:
    from pypdf import PdfReader

    reader = PdfReader(path)
    total = len(reader.pages)
    if total > limits.max_pages:
        raise ParseRefused(f"the PDF has more than {limits.max_pages} pages")
    window = pages or range(total)
    parts = []
    for number in window:
        if number >= total:
            break
        text = (reader.pages[number].extract_text() or "").replace("\x00", "").strip()
        if text:
            parts.append(Part(text, {"page": number + 1}))
        progress(number + 1, total)
    title = reader.metadata.title if reader.metadata else None
    return ParsedFile(title=str(title) if title else None, parts=parts, pages=total)
