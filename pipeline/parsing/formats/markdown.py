"""Markdown, sections by heading. First version: the text as one part."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pipeline.parsing.parsed import ParsedFile, ParseLimits, Part


def parse(path: Path, limits: ParseLimits, progress: Callable[[int, int], None], pages: range | None) -> ParsedFile:
    text = path.read_bytes().decode("utf-8", "replace").strip()
    return ParsedFile(title=None, parts=[Part(text, {})] if text else [])
