"""Documents cut into sentence-aligned chunks that follow the file's parts (a page, a slide, a section, a sheet's
rows), each chunk with its place and the heading it is read under.

Usage::

    pieces = chunk_text("long text ...", max_chars=1000, overlap_chars=200)
    chunk_parts(stored.text, stored.parts)                  # [("Q4 revenue ...", {"slide": 2}), ...]
    heading_of("Handbook", {"section": "Leave > Parental"})  # "Handbook > Leave > Parental"
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentsearch.pipeline.text import _NOT_AN_END, sentence_gaps
from agentsearch.pipeline.text.titles import is_title


def chunk_text(text: str, max_chars: int = 1000, overlap_chars: int = 200) -> list[str]:
    """Pack whole sentences into chunks of at most ``max_chars``; each chunk repeats up to ``overlap_chars`` of the
    previous chunk's last sentences, so a fact spanning a boundary is whole in one of them. A sentence longer than
    ``max_chars`` becomes its own chunk. Sentences keep the break between them: a blank line between paragraphs, a
    line break after a title line, else a space; so a heading stays on its own line in the chunk, where the answer
    reads it as a title rather than as the start of the next sentence (``agentsearch.pipeline.text.titles``)."""
    sentences = _sentences_with_breaks(text) or [("", text.strip())]
    chunks: list[str] = []
    current: list[tuple[str, str]] = []
    for sentence in sentences:
        if current and len(_joined([*current, sentence])) > max_chars:
            # A title never ends a chunk: it goes on with the sentences it is the title of.
            title = [current.pop()] if len(current) > 1 and is_title(current[-1][1]) else []
            chunks.append(_joined(current))
            carry: list[tuple[str, str]] = []
            for previous in reversed(current):
                if len(_joined([previous, *carry])) > overlap_chars:
                    break
                carry.insert(0, previous)
            current = carry if len(_joined([*carry, *title, sentence])) <= max_chars else []
            current.extend(title)
        current.append(sentence)
    if current:
        chunks.append(_joined(current))
    return chunks


def _sentences_with_breaks(text: str) -> list[tuple[str, str]]:
    """``(break before, sentence)`` of each of ``text``'s sentences (``whole_sentences``'s), the break as "\\n\\n",
    "\\n" or " " after what the text had there."""
    body = text.strip()
    found: list[tuple[str, str]] = []
    cursor, gap = 0, ""
    for gap_start, gap_end in [*sentence_gaps(body), (len(body), len(body))]:
        piece = body[cursor:gap_start].strip()
        if piece and found and _NOT_AN_END.search(found[-1][1]):  # "3." + "Approvals", "John C." + "Messenger"
            found[-1] = (found[-1][0], f"{found[-1][1]}{gap}{piece}")
        elif piece:
            found.append((gap, piece))
        lines = body[gap_start:gap_end].count("\n")
        gap = "\n\n" if lines >= 2 else "\n" if lines == 1 else " "
        cursor = gap_end
    return found


def _joined(sentences: list[tuple[str, str]]) -> str:
    """The chunk's text: its sentences with the breaks between them (none before the first)."""
    return "".join(piece if i == 0 else f"{gap}{piece}" for i, (gap, piece) in enumerate(sentences))


@dataclass
class ChunkingConfig:
    max_chars: int = 1000
    overlap_chars: int = 200
    # Large groups: the model sorts a call's texts by length, so bigger calls waste less on padding.
    embed_batch: int = 512
    # Each chunk's sentences embedded too and stored with it (agentsearch.pipeline.retrieval.sentence_vectors):
    # ingestion does about twice the model's work so that a job's reranker and answer need none of it.
    sentence_vectors: bool = True


def chunk_parts(text: str, parts: list[dict[str, Any]] | None, max_chars: int = 1000,
                overlap_chars: int = 200) -> list[tuple[str, dict[str, Any]]]:
    """``(chunk, location)`` pairs of a document. Without parts (a document sent as text) the whole text is cut by
    ``chunk_text``. With parts (``FileDocument.parts``) a chunk never runs across two of them (a page, a slide, a
    section), so every chunk has one place; only the rows of one sheet are packed together, up to ``max_chars``,
    a chunk of several rows saying ``"rows": [first, last]``."""
    if not parts:
        return [(piece, {}) for piece in chunk_text(text, max_chars, overlap_chars)]
    chunks: list[tuple[str, dict[str, Any]]] = []
    rows: list[tuple[str, dict[str, Any]]] = []
    for part in parts:
        piece, location = text[part["start"]:part["end"]], part.get("location") or {}
        if "row" in location:
            if rows and rows[0][1].get("sheet") != location.get("sheet"):
                chunks.extend(_pack_rows(rows, max_chars, overlap_chars))
                rows = []
            rows.append((piece, location))
            continue
        chunks.extend(_pack_rows(rows, max_chars, overlap_chars))
        rows = []
        chunks.extend((p, location) for p in chunk_text(piece, max_chars, overlap_chars))
    chunks.extend(_pack_rows(rows, max_chars, overlap_chars))
    return chunks


def _pack_rows(rows: list[tuple[str, dict[str, Any]]], max_chars: int,
               overlap_chars: int) -> list[tuple[str, dict[str, Any]]]:
    """Consecutive rows of one sheet, one per line, as few chunks as fit; a row longer than a chunk is cut alone."""
    packed: list[tuple[str, dict[str, Any]]] = []
    current: list[tuple[str, dict[str, Any]]] = []

    def close() -> None:
        if not current:
            return
        first, last = current[0][1], current[-1][1]
        where = dict(first) if len(current) == 1 else {"sheet": first.get("sheet"), "rows": [first["row"], last["row"]]}
        packed.append(("\n".join(text for text, _ in current), where))
        current.clear()

    for text, location in rows:
        if len(text) > max_chars:
            close()
            packed.extend((p, location) for p in chunk_text(text, max_chars, overlap_chars))
            continue
        if current and sum(len(t) + 1 for t, _ in current) + len(text) > max_chars:
            close()
        current.append((text, location))
    close()
    return packed


def heading_of(title: str, location: dict[str, Any]) -> str:
    """What a chunk is about when read alone: its document's title and, for a section, its heading path. The
    chunk's vector and keywords are made of it and the chunk's text."""
    section = location.get("section")
    return f"{title} > {section}" if title and section else (section or title)
