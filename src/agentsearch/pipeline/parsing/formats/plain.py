"""Plain text in any encoding (``agentsearch.pipeline.parsing.text_encoding.decode_text``), as one part (``{}``).

Control characters are left out of the text (NUL and the rest of C0 and C1 but the tab and the line break; Windows
and old Mac line ends become ``\\n``), so a text file with binary debris reads as its text. ``clean_text`` and
``too_long`` serve the other text readers too (Markdown, HTML, e-mail).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from agentsearch.pipeline.parsing.parsed import ParsedFile, ParseLimits, ParseRefused, Part
from agentsearch.pipeline.parsing.text_encoding import decode_text

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_LINE_END = re.compile(r"\r\n?")
# No encoding takes more than 4 bytes for a character: a file larger than this is past the limit before it is read.
_MAX_BYTES_PER_CHAR = 4


def parse(path: Path, limits: ParseLimits, progress: Callable[[int, int], None], pages: range | None) -> ParsedFile:
    if path.stat().st_size > _MAX_BYTES_PER_CHAR * limits.max_chars:
        raise too_long(limits)
    text = clean_text(decode_text(path.read_bytes())).strip()
    if not text:
        raise ParseRefused("the file has no text")
    if len(text) > limits.max_chars:
        raise too_long(limits)
    return ParsedFile(title=None, parts=[Part(text, {})])


def clean_text(text: str) -> str:
    """``text`` with ``\\n`` line ends and no control characters but the tab and the line break."""
    return _CONTROL.sub("", _LINE_END.sub("\n", text))


def too_long(limits: ParseLimits) -> ParseRefused:
    """The refusal of a file whose text is past ``limits.max_chars``."""
    return ParseRefused(f"the text is longer than {limits.max_chars:,} characters; split it into smaller files")
