"""Small text helpers shared by answer generation and agents."""

from __future__ import annotations

import re

# Where one sentence ends and the next begins, by script:
# - a cased script (Latin, Greek, Cyrillic): after . ! ? and space, before a capital or a digit ("e.g. solar" goes on);
# - a script without capitals (Hebrew, Arabic, the Indic scripts): after . ! ? ؟ । ॥ and space, before its letter;
# - Chinese and Japanese: right after 。！？ (and a closing quote), with or without space;
# - in every script, at a blank line: a paragraph ends its sentence, and a heading or a table row is one.
_SENTENCE_END = re.compile(
    r"\n[ \t]*\n\s*"
    r"|(?<=[.!?])\s+(?=[\"'(\[«„]?[A-Z0-9À-ÖØ-ÞΆ-ΏΑ-ΩЀ-Я])"
    r"|(?<=[.!?؟।॥])\s+(?=[\"'(«]?[0-9\u0590-\u08ff\u0900-\u0dff])"
    r"|(?<=[。！？])(?![」』”’）])\s*"
    r"|(?<=[。！？][」』”’）])\s*"
)
_WORD = re.compile(r"[^\W_]+(?:[-'][^\W_]+)*", re.UNICODE)
_CITATION_MARK = re.compile(r"\s*\[\d+\]")
# How a partly supported sentence is marked in the delivered text (``agentsearch.pipeline.job.answer.grounding``): the
# mark travels with the text into every place an answer is shown (the console, the PDF report, the email draft, an API
# client that reads only ``answer``).
PARTIAL_MARK = "(partly supported)"

STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being below between
    both but by can could did do does doing down during each few for from further had has have having he her here
    hers him his how i if in into is it its itself just me more most my no nor not now of off on once only or other
    our ours out over own same she should so some such than that the their them then there these they this those
    through to too under until up very was we were what when where which while who whom why will with would you
    your""".split()
)


def sentence_gaps(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """Where ``text[start:end]``'s sentences end: the ``[start, end)`` of each gap between two, the splitter's marks
    and the line breaks after a title line (``agentsearch.pipeline.text.titles``: a PDF's heading ends its line
    only), in order and not overlapping."""
    from agentsearch.pipeline.text.titles import title_line_ends

    end = len(text) if end is None else end
    found = sorted([(m.start(), m.end()) for m in _SENTENCE_END.finditer(text, start, end)]
                   + title_line_ends(text, start, end))
    gaps: list[tuple[int, int]] = []
    for gap_start, gap_end in found:
        if gaps and gap_start <= gaps[-1][1]:
            gaps[-1] = (gaps[-1][0], max(gaps[-1][1], gap_end))
        else:
            gaps.append((gap_start, gap_end))
    return gaps


def split_sentences(text: str) -> list[str]:
    body = text.strip()
    pieces, cursor = [], 0
    for gap_start, gap_end in sentence_gaps(body):
        pieces.append(body[cursor:gap_start])
        cursor = gap_end
    pieces.append(body[cursor:])
    return [s.strip() for s in pieces if s.strip()]


# A sentence split after one of these is no sentence end: "John C. Messenger", "Dr. Ruth", "e.g. solar".
_NOT_AN_END = re.compile(
    r"(?:\b(?:[A-Z][a-z]+\s+[A-HJ-UWYZ]|Mr|Mrs|Ms|Dr|St|Jr|Sr|Prof|Gen|Col|Lt|Sgt|Capt|Rev|Mt|Ft|No|Nos|Vol|vs|ca|"
    r"approx|Fig|e\.g|i\.e|cf)\.)$"
    # a list number alone ("3." of "3. Approvals"): the heading's number, not a sentence
    r"|^(?:\d{1,3}(?:\.\d{1,3})*|[IVXivx]{1,5})\.$"
)


def whole_sentences(text: str) -> list[str]:
    """``split_sentences``, with the pieces split after an initial or a title abbreviation joined again: the
    sentences an answer cites and the reranker's passages are made of, and whose vectors ingestion stores.

    Usage::

        whole_sentences("John C. Messenger wrote it. It sold.")   # ["John C. Messenger wrote it.", "It sold."]
    """
    merged: list[str] = []
    for piece in split_sentences(text):
        if merged and _NOT_AN_END.search(merged[-1]):
            merged[-1] = f"{merged[-1]} {piece}"
        else:
            merged.append(piece)
    return merged


def without_citation_marks(text: str) -> str:
    """``text`` with its ``[n]`` marks and the space before each taken out: "in January [3]." -> "in January."."""
    return _CITATION_MARK.sub("", text)


def words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def content_terms(text: str) -> set[str]:
    return {w for w in words(text) if w not in STOPWORDS and (len(w) > 2 or w.isdigit() or any(c.isdigit() for c in w))}
