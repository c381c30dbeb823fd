"""Where a text's sentences and quotes lie in it: character offsets into the original string.

``whole_sentences`` gives a text's sentences as strings; a citation's span has to point into the source's own
text, so ``sentence_spans`` gives the same sentences with their offsets (the text of each is exactly what
``whole_sentences`` gives, which is also what ingestion stored a vector for). ``find_loose`` finds a quote in a
text when only case, spacing and typography differ ("20-18" for "20–18", ``agentsearch.pipeline.text.typography``),
since a model copying a passage rarely keeps its line breaks or its dashes.

Usage::

    sentence_spans("John C. Messenger wrote it.  It sold.")
    # [Sentence(start=0, end=27, text="John C. Messenger wrote it."), Sentence(29, 37, "It sold.")]
    find_loose("The Broncos  WON 24–10.", "broncos won")      # (4, 16)
"""

from __future__ import annotations

import re
from typing import NamedTuple

from agentsearch.pipeline.text import _NOT_AN_END, sentence_gaps
from agentsearch.pipeline.text.typography import fold_char


class Sentence(NamedTuple):
    start: int
    end: int
    text: str


def sentence_spans(text: str) -> list[Sentence]:
    """The sentences of ``whole_sentences(text)``, each with its ``[start, end)`` in ``text``."""
    pieces: list[tuple[int, int]] = []
    lead = len(text) - len(text.lstrip())
    body_end = len(text.rstrip())
    cursor = lead
    for gap_start, gap_end in sentence_gaps(text, lead, body_end):
        pieces.append((cursor, gap_start))
        cursor = gap_end
    pieces.append((cursor, body_end))
    merged: list[Sentence] = []
    for start, end in pieces:
        raw = text[start:end]
        # Each piece stripped, as split_sentences strips it.
        start += len(raw) - len(raw.lstrip())
        end -= len(raw) - len(raw.rstrip())
        if start >= end:
            continue
        piece = text[start:end]
        if merged and _NOT_AN_END.search(merged[-1].text):
            last = merged[-1]
            merged[-1] = Sentence(last.start, end, f"{last.text} {piece}")
        else:
            merged.append(Sentence(start, end, piece))
    return merged


def _folded(text: str) -> tuple[str, list[int]]:
    """``text`` lower-cased in one typographic form ("–" is "-", "½" is ".5") with every run of white space as one
    space, and each folded character's offset in ``text``."""
    out: list[str] = []
    where: list[int] = []
    space = False
    for i in range(len(text)):
        # One typographic form (a dash, a quote, a fraction as the other text may write it): see ``typography``.
        for char in fold_char(text, i):
            if char.isspace():
                if not space and out:
                    out.append(" ")
                    where.append(i)
                space = True
                continue
            space = False
            for low in char.lower():  # "İ".lower() is two characters: both map back to it
                out.append(low)
                where.append(i)
    return "".join(out), where


def find_loose(text: str, quote: str, start: int = 0) -> tuple[int, int] | None:
    """``[start, end)`` of ``quote`` in ``text`` (at or after ``start``), ignoring case, differences in white
    space and typography (``_folded``); None when it is not there."""
    needle, _ = _folded(quote.strip())
    if not needle:
        return None
    hay, where = _folded(text)
    at = next((i for i, w in enumerate(where) if w >= start), len(hay))
    found = hay.find(needle, at)
    if found < 0:
        return None
    return where[found], where[found + len(needle) - 1] + 1


_SPACES = re.compile(r"\s+")


def squeeze(text: str) -> str:
    """``text`` with every run of white space as one space, trimmed."""
    return _SPACES.sub(" ", text).strip()
