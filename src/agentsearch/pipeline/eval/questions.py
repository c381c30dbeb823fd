"""Questions made from a collection's own documents, each with the answer span it was made from.

Two ways, both keeping the document, the span's place in its text and the span itself:

- **cloze** (offline, the stated method): the document's most salient sentence (the highest sum of its content
  words' rarity in the collection, 6 to 60 words) loses its rarest span (a number, a capitalised name or the rarest
  term, whichever is rarest), which becomes the answer. The question is a reader's recollection of the line, in one
  of two shapes:

  - ``line`` (the default): the six words either side of the gap;
  - ``near``: the words nearest the gap, taken alternately outwards, until four of the passage's content words are
    held, never a word of the answer, stop words between them kept (people's questions share about four of their
    words with the passage; measured, it widens keyword search's lead over dense and hybrid search: see
    docs/quality.md);
  - ``recall``: ``near`` without the document's five rarest terms either (measured too; it also drops the codes and
    names a catalogue's questions need).

  A span still found in the title or the rest of the sentence is never chosen, so the question's words alone never
  hold its answer.
- **llm**: the model writes a question in its own words (not the passage's phrasing) and copies its answer out of a
  window of sentences around the salient one;
  the question is kept only when the offline check finds the answer verbatim in that window (and not in the
  question), else the passage's cloze question stands in.

Usage::

    rarity = Rarity.of([d.text for d in docs])
    made = cloze_question("doc-1", "Leave policy", text, rarity)                # the line shape
    made.question, made.answer, text[made.start:made.end] == made.answer
    cloze_question("doc-1", "Leave policy", text, rarity, shape="near")         # four passage words near the gap
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from agentsearch.pipeline.text import STOPWORDS, content_terms, sentence_gaps, words

GAP = "___"
MIN_WORDS, MAX_WORDS = 6, 60
CONTEXT_WORDS = 6  # the line shape: words kept either side of the gap
# The near shape: the passage's content words a question keeps; the recall shape: the document's rarest terms it never
# holds.
NEAR_TERMS = 4
RARE_TERMS = 5
SHAPES = ("line", "near", "recall")
# A number (with its decimals, thousands, percent), a run of capitalised words, or a single word.
_NUMBER = re.compile(r"(?<![\w.])\d[\d,.]*\d%?|(?<![\w.])\d%?")
_NAME = re.compile(r"\b[A-Z][\w-]*(?:\s+[A-Z][\w-]*){0,3}")
_WORD = re.compile(r"[^\W_]+(?:[-'][^\W_]+)*")
LLM_WINDOW_SENTENCES = 3
LLM_TIMEOUT_S = 30.0
# The reply's shape, which a grammar holds the model to where the endpoint can, and its length: a question and a
# short span need far fewer tokens, and a small model left free writes on.
QUESTION_SCHEMA = {"type": "object", "properties": {"question": {"type": "string"}, "answer": {"type": "string"}},
                   "required": ["question", "answer"]}
LLM_MAX_TOKENS = 160
MAX_ANSWER_CHARS = 120


@dataclass(frozen=True)
class Rarity:
    """Document frequencies of a collection's words: how rare a word is (its inverse document frequency)."""

    frequencies: dict[str, int]
    documents: int

    @classmethod
    def of(cls, texts: list[str]) -> Rarity:
        counts: Counter[str] = Counter()
        for text in texts:
            counts.update(set(words(text)))
        return cls(dict(counts), max(len(texts), 1))

    def idf(self, word: str) -> float:
        return math.log((self.documents + 1) / (self.frequencies.get(word, 0) + 0.5))

    def of_span(self, span: str) -> float:
        """A span's rarity: its rarest word's."""
        return max((self.idf(w) for w in words(span)), default=0.0)


@dataclass(frozen=True)
class MadeQuestion:
    question: str
    answer: str
    document_id: str
    start: int  # the answer's [start, end) in the document's text
    end: int
    origin: str  # cloze | llm

    def as_json(self) -> dict[str, Any]:
        return {"question": self.question, "answer": self.answer, "document_id": self.document_id,
                "start": self.start, "end": self.end, "origin": self.origin}


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """Each sentence's ``[start, end)`` in ``text``, blanks trimmed."""
    spans, cursor = [], 0
    for gap_start, gap_end in [*sentence_gaps(text), (len(text), len(text))]:
        piece = text[cursor:gap_start]
        lead = len(piece) - len(piece.lstrip())
        if piece.strip():
            spans.append((cursor + lead, cursor + len(piece.rstrip())))
        cursor = gap_end
    return spans


def salient_sentences(text: str, rarity: Rarity) -> list[tuple[int, int]]:
    """The document's sentences of 6 to 60 words, most salient first (the sum of their content words' rarity)."""
    scored = []
    for start, end in sentence_spans(text):
        sentence = text[start:end]
        if MIN_WORDS <= len(words(sentence)) <= MAX_WORDS:
            scored.append((sum(rarity.idf(w) for w in content_terms(sentence)), start, end))
    return [(start, end) for _, start, end in sorted(scored, key=lambda t: (-t[0], t[1]))]


def answer_candidates(sentence: str) -> list[tuple[int, int]]:
    """Spans of the sentence that could be an answer: numbers, capitalised names (not the sentence's first word
    alone), and content words of four letters or more."""
    found = [(m.start(), m.end()) for m in _NUMBER.finditer(sentence)]
    for m in _NAME.finditer(sentence):
        if m.start() == 0 and " " not in m.group(0):
            continue  # a sentence's first word is capitalised anyway
        found.append((m.start(), m.end()))
    found += [(m.start(), m.end()) for m in _WORD.finditer(sentence)
              if len(m.group(0)) >= 4 and m.group(0).lower() not in STOPWORDS and not m.group(0).isdigit()]
    return found


def _shown(text: str) -> str:
    return " ".join(text.split())


def rarest_terms(text: str, rarity: Rarity, count: int = RARE_TERMS) -> set[str]:
    """The document's ``count`` rarest content terms in the collection (ties: alphabetical)."""
    return set(sorted(content_terms(text), key=lambda w: (-rarity.idf(w), w))[:count])


def near_words(before: str, after: str, left_out: set[str], terms: int = NEAR_TERMS) -> tuple[list[str], list[str]]:
    """The words of ``before`` and ``after`` the gap nearest to it, taken alternately outwards (left first at equal
    distance) until ``terms`` content terms are held; a word in ``left_out`` is passed over, and stop words between
    the kept ones stay (a question, not a bag of words)."""
    left, right = [m.group(0) for m in _WORD.finditer(before)][::-1], [m.group(0) for m in _WORD.finditer(after)]
    order = sorted([(i, 0, w) for i, w in enumerate(left)] + [(i, 1, w) for i, w in enumerate(right)])
    kept: tuple[list[str], list[str]] = ([], [])
    held = 0
    for _, side, word in order:
        if held >= terms:
            break
        if set(words(word)) & left_out:
            continue
        kept[side].append(word)
        held += bool(content_terms(word))
    return kept[0][::-1], kept[1]


def cloze_in_sentence(document_id: str, title: str, text: str, start: int, end: int, rarity: Rarity,
                      shape: str = "line") -> MadeQuestion | None:
    """The sentence ``text[start:end]``'s cloze question in ``shape`` (``near``, ``recall`` or ``line``), or None
    when no span of it is left unanswered by the rest."""
    if shape not in SHAPES:
        raise ValueError(f"unknown question shape {shape!r}; known: {', '.join(SHAPES)}")
    sentence = text[start:end]
    best: tuple[float, int, int] | None = None
    for a, b in answer_candidates(sentence):
        span = sentence[a:b].strip(" ,.;:")
        if not span or not words(span):
            continue
        rest = f"{title} {sentence[:a]} {sentence[b:]}".casefold()
        if span.casefold() in rest:
            continue  # the question would hold its own answer
        score = rarity.of_span(span)
        if best is None or score > best[0]:
            best = (score, a, a + len(span))
    if best is None:
        return None
    _, a, b = best
    before, after = sentence[:a], sentence[b:]
    if shape in ("recall", "near"):
        # What a reader recalls of the line: a few of its words near the gap, never a word of the answer, and in the
        # recall shape not the document's rarest terms either.
        left_out = set(words(sentence[a:b])) | (rarest_terms(text, rarity) if shape == "recall" else set())
        left_words, right_words = near_words(before, after, left_out)
        question = " ".join([*left_words, GAP, *right_words])
        return MadeQuestion(question, sentence[a:b], document_id, start + a, start + b, "cloze")
    # A reader's recollection, not the document's line: the words either side of the gap, without the title (a
    # title and a whole sentence copied find their document by any search, so such a set tells no setting apart).
    left, right = " ".join(before.split()[-CONTEXT_WORDS:]), " ".join(after.split()[:CONTEXT_WORDS])
    question = _shown(f"{left}{' ' if before[-1:].isspace() else ''}{GAP}{' ' if after[:1].isspace() else ''}{right}")
    return MadeQuestion(question, sentence[a:b], document_id, start + a, start + b, "cloze")


def cloze_question(document_id: str, title: str, text: str, rarity: Rarity, rank: int = 0, shape: str = "line"
                   ) -> MadeQuestion | None:
    """The cloze question of the document's ``rank``-th most salient sentence that yields one (0: the most)."""
    made = [q for start, end in salient_sentences(text, rarity)
            if (q := cloze_in_sentence(document_id, title, text, start, end, rarity, shape)) is not None]
    return made[rank] if rank < len(made) else None


def window_around(text: str, start: int, end: int, sentences: int = LLM_WINDOW_SENTENCES) -> tuple[int, int]:
    """The ``[start, end)`` of up to ``sentences`` sentences of ``text`` centred on the one at ``[start, end)``."""
    spans = sentence_spans(text)
    at = next((i for i, (a, b) in enumerate(spans) if a <= start < b), 0)
    low = max(0, at - (sentences - 1) // 2)
    chosen = spans[low:low + sentences] or [(start, end)]
    return chosen[0][0], chosen[-1][1]


def checked_llm_question(reply: Any, document_id: str, text: str, window: tuple[int, int]) -> MadeQuestion | None:
    """The model's ``{"question", "answer"}`` kept when its answer is found verbatim (case aside) in the window it
    was shown and not in the question itself; None otherwise (the offline check)."""
    if not isinstance(reply, dict):
        return None
    question, answer = str(reply.get("question") or "").strip(), str(reply.get("answer") or "").strip(" .")
    if not question or not answer or len(answer) > MAX_ANSWER_CHARS or answer.casefold() in question.casefold():
        return None
    at = text.casefold().find(answer.casefold(), window[0], window[1])
    if at < 0:
        return None
    return MadeQuestion(_shown(question), text[at:at + len(answer)], document_id, at, at + len(answer), "llm")


def llm_question(llm: Any, document_id: str, title: str, text: str, rarity: Rarity, rank: int = 0,
                 timeout_s: float = LLM_TIMEOUT_S, shape: str = "line") -> MadeQuestion | None:
    """A question the LLM writes about the passage around the document's ``rank``-th salient sentence, checked;
    the cloze question of that sentence when the model fails or its answer is not in the passage."""
    salient = salient_sentences(text, rarity)
    if rank >= len(salient):
        return None
    window = window_around(text, *salient[rank])
    passage = text[window[0]:window[1]]
    messages = [
        # In its own words: a question in the passage's words is found by any keyword search, and people's are not.
        {"role": "system", "content": "You write one question a reader might ask about a passage, in your own words: "
                                      "do not copy the passage's phrasing. The answer must be a short span (a few "
                                      "words) copied exactly from the passage. Reply with JSON only: "
                                      '{"question": "...", "answer": "..."}'},
        {"role": "user", "content": f"Title: {title}\nPassage: {passage}"},
    ]
    try:
        reply = llm.complete_json(messages, timeout_s=timeout_s, max_tokens=LLM_MAX_TOKENS, json_schema=QUESTION_SCHEMA)
        made = checked_llm_question(reply, document_id, text, window)
    except Exception:  # noqa: BLE001 - any failure of the model's leaves the passage its offline question
        made = None
    return made or cloze_in_sentence(document_id, title, text, *salient[rank], rarity, shape)
