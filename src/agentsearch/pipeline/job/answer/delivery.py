"""The answer the user receives from an LLM's judged draft: the model's answer kept whole, with its citations, and
the offline answer's quotes only where the model's sentences leave out what the offline answer found.

The rule (``deliver``; docs/answers.md, "A model's answer kept"):

1. **The model's checked sentences**, each cited to the sources that say it: its ``supported`` sentences, its
   ``partial`` ones marked ``PARTIAL_MARK``, its ``unsupported`` ones left out (listed in
   ``metadata.answer.sentences`` with the reason). When none is ``supported``, the offline answer alone is
   delivered and ``fallback_reason`` says why.
2. **The sentence that answers first.** The kept sentence that holds the most of the question's terms and numbers
   ("five" is 5; one more when it also holds the kind of thing asked for: a number for "how many", a name for
   "who") goes first, the model's first on a tie; the
   others keep the model's order. A supported sentence about something the question does not ask ("another
   player's sacks and fumbles") is not the answer's first words.
3. **An offline quote joins only for what the model's sentences leave out.** A quote of the offline answer joins,
   after the model's sentences, when it answers a part of the question their supported sentences leave out:
   - it holds a term or a number of the question that none of them holds, or
   - it is the offline answer's lead (its quote holding the most of the question's terms and numbers) and holds
     an answer of the kind asked (a number for "how many" and "when", a name for "who" and "where") that none of
     them holds, unless a supported sentence that itself gives an answer of that kind restates the
     quote's sentence (is supported by a span lying within it): the model answered from that sentence.

   Any other quote is left out (``quotes_covered``). A partly supported sentence covers nothing.
4. **Nothing twice.** A joining quote that says all a model sentence says (the sentence is supported by a span
   lying within the quote's sentence) takes that sentence's place instead of following it (``replaced_by_quote``).

Usage::

    answer = deliver(verdicts, extractive_answer(query, documents), documents, query=query)
    answer.text, answer.info["rule"], answer.info["quotes_added"], answer.info["quotes_covered"]
"""

from __future__ import annotations

import re

from agentsearch.pipeline.documents import Citation, Document
from agentsearch.pipeline.job.answer.citations import Claim, cited_sentences, numbers_in, verify_offline
from agentsearch.pipeline.job.answer.extractive import _analyzer
from agentsearch.pipeline.job.answer.grounding import SentenceVerdict, written
from agentsearch.pipeline.job.answer.question_kind import holds_kind, question_kind
from agentsearch.pipeline.job.answer.result import Answer
from agentsearch.pipeline.text import STOPWORDS, words
from agentsearch.pipeline.text.spans import find_loose
from agentsearch.pipeline.text.typography import fold_typography

_NAME = re.compile(r"(?<=\s)[A-Z][\w]*")
_RANK = {"supported": 2, "partial": 1, "unsupported": 0}
# A quote whose terms the delivered sentences hold at this share says nothing they do not (the share a
# supported sentence holds of its source span, citations.SUPPORTED_COVERAGE).
REPEATED = 0.8


class _Question:
    """What the delivered sentences are measured against: the question's terms (numbers apart), its numbers and the
    kind of thing it asks for."""

    def __init__(self, query: str | None, language: str) -> None:
        self.analyzer = _analyzer(language)
        question = fold_typography(query or "")
        # Numbers are compared as numbers ("five" is "5"), the other terms as the keyword search stems them.
        self.terms = {t for t in self.analyzer.terms(question) if not any(ch.isdigit() for ch in t)}
        self.numbers = numbers_in(question) if query else set()
        self.kind, self.words = question_kind(query or ""), set(words(query or ""))

    def held(self, text: str) -> set[str]:
        """The question's terms and numbers ``text`` holds."""
        folded = fold_typography(text)
        return (self.terms & set(self.analyzer.terms(folded))) | (self.numbers & numbers_in(folded))

    def holds_kind(self, text: str) -> bool:
        return bool(self.held(text)) and holds_kind(text, self.kind, self.words)

    def items(self, text: str) -> set[str]:
        """What ``text`` holds of the kind asked for, beyond the question: its numbers for "how many" and "when", its
        names (capitalised words after the first, folded) for "who" and "where"; nothing for another question."""
        if self.kind in ("number", "time"):
            return numbers_in(fold_typography(text)) - self.numbers
        if self.kind == "name":
            return {w.casefold() for w in _NAME.findall(text)} - self.words - STOPWORDS
        return set()


def lead_first(kept: list[SentenceVerdict], query: str | None, language: str = "english") -> list[SentenceVerdict]:
    """``kept`` with the sentence that addresses ``query`` best first (the module's rule 2), the rest in order."""
    if not query or len(kept) < 2:
        return kept
    question = _Question(query, language)
    scores = [len(question.held(v.text)) + question.holds_kind(v.text) for v in kept]
    best = max(range(len(kept)), key=lambda i: (scores[i], -i))
    return [kept[best], *kept[:best], *kept[best + 1:]]


def _restated_by(quote: Claim, sentences: list[SentenceVerdict], documents: list[Document]) -> list[int]:
    """The indexes of the ``sentences`` supported by a span lying within the quote's sentence: the model said (part
    of) that sentence in its own words."""
    found: list[int] = []
    for n in quote.sources:
        text = documents[n - 1].text
        where = find_loose(text, quote.text.rstrip(".!?"))
        if where is None:
            continue
        if where[1] < len(text) and text[where[1]] in ".!?。":
            where = (where[0], where[1] + 1)  # the sentence's end mark is the quote's too
        for i, v in enumerate(sentences):
            if v.status == "supported" and i not in found and any(
                    c.source == n and c.status == "supported" and c.span and where[0] <= c.span[0]
                    and c.span[1] <= where[1] for c in v.citations):
                found.append(i)
    return found


def covered(quote: Claim, delivered: list[SentenceVerdict], documents: list[Document], query: str | None = None,
            language: str = "english", lead: bool = True) -> str | None:
    """Why an offline quote adds nothing to the ``delivered`` sentences (the module's rule 3), or None when it
    joins them. ``lead``: the quote is the offline answer's lead (the one holding the most of the question)."""
    supported = [v for v in delivered if v.status == "supported"]  # a partly supported sentence covers nothing
    restating = [supported[i] for i in _restated_by(quote, supported, documents)]
    question = _Question(query, language)
    if query is None:  # no question to measure against: a quote joins unless the model restated it
        return "a supported sentence of the model says it" if restating else None
    answered = set().union(*(question.held(v.text) for v in supported))
    if question.held(quote.text) - answered:
        return None  # it holds a term or a number of the question the model's sentences leave out
    found = set().union(*(question.items(v.text) for v in supported))
    if lead and question.items(quote.text) - found and not any(question.items(v.text) for v in restating):
        return None  # it holds an answer of the kind asked that they do not, and no answer of the model restates it
    return ("a supported sentence of the model says it" if restating
            else "it answers no part of the question the model's sentences leave out")


def deliver(verdicts: list[SentenceVerdict], extractive: Answer, documents: list[Document],
            language: str = "english", query: str | None = None) -> Answer:
    """The answer the user receives, by the rule of the module docstring. ``extractive`` is the offline answer for
    the same question and documents; the result's ``citations`` hold every delivered sentence's verdict."""
    kept = [v for v in verdicts if v.status != "unsupported"]
    usable = any(v.status == "supported" for v in kept)
    sentences_info = [v.as_dict(delivered=v.status != "unsupported" and usable) for v in verdicts]
    counts = {s: sum(v.status == s for v in verdicts) for s in _RANK}
    if not usable:
        why = ("the LLM's answer held no sentence" if not verdicts else
               f"no sentence of the LLM's answer is supported by the sources ({counts['unsupported']} unsupported, "
               f"{counts['partial']} partly supported)")
        extractive.fallback_reason = why
        extractive.info = {**extractive.info, "sentences": sentences_info, "llm_sentences": counts,
                           "rule": "extractive: no supported LLM sentence"}
        return extractive
    ordered = lead_first(kept, query, language)
    slots: list[tuple[str, list[Citation]] | None] = []
    for v in ordered:
        text = written(v)
        slots.append((text, [c.model_copy(update={"sentence": text}) for c in v.citations]))
    quotes = cited_sentences(extractive.text, len(documents))
    question = _Question(query, language)
    held = [len(question.held(q.text)) for q in quotes]
    lead = max(range(len(quotes)), key=lambda k: (held[k], -k)) if quotes else -1
    added = [q for k, q in enumerate(quotes) if covered(q, ordered, documents, query, language, k == lead) is None]
    replaced: set[int] = set()
    tail: list[tuple[str, list[Citation]]] = []
    if added:
        extra, _ = verify_offline(added, documents, language=language)
        for q in added:
            slot = (q.sentence, [c for c in extra if c.sentence == q.sentence])
            # A joining quote that says all a model sentence says takes its place: nothing is said twice.
            instead = [i for i in _restated_by(q, ordered, documents) if i not in replaced]
            if instead:
                slots[instead[0]] = slot
                for i in instead[1:]:
                    slots[i] = None
                replaced.update(instead)
            else:
                tail.append(slot)
    for i in replaced:
        at = next(k for k, v in enumerate(verdicts) if v is ordered[i])
        sentences_info[at].update(delivered=False, replaced_by_quote=True)
    final = [slot for slot in slots if slot is not None] + tail
    info = {"sentences": sentences_info, "llm_sentences": counts, "quotes_added": len(added),
            "quotes_covered": len(quotes) - len(added), "replaced_by_quote": len(replaced),
            "lead_moved": ordered[0] is not kept[0],
            "rule": "llm sentences supported" + (" + extractive quotes they leave out" if added else "")}
    return Answer(" ".join(text for text, _ in final), extractive.sources, method="llm", info=info,
                  citations=[c for _, cited in final for c in cited])
