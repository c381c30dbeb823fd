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
3. **An offline quote joins only when it adds what the model's sentences leave out.** A quote of the offline
   answer joins, after the model's sentences and in the offline answer's order, when it is not covered and it
   answers a part of the question they leave out:
   - it is covered when a ``supported`` sentence of the model is supported by a span of the same source that lies
     within the quote's sentence (the model said that sentence in its own words), or when the supported sentences
     already hold ``REPEATED`` of its terms (it would say again what they say);
   - it answers a part of the question they leave out when it holds a term or a number of the question that no
     supported sentence holds, or the kind of thing asked for (a number, a time, a name) when none of them does.

   A ``partial`` sentence covers nothing: the quote that says it fully joins.

   So the delivered answer is the model's answer, with a quote only for what the question asks and the model did
   not say, and it never says one thing twice.

Usage::

    answer = deliver(verdicts, extractive_answer(query, documents), documents, query=query)
    answer.text, answer.info["rule"], answer.info["quotes_added"], answer.info["quotes_covered"]
"""

from __future__ import annotations

from agentsearch.pipeline.documents import Citation, Document
from agentsearch.pipeline.job.answer.citations import Claim, cited_sentences, numbers_in, verify_offline
from agentsearch.pipeline.job.answer.extractive import _analyzer
from agentsearch.pipeline.job.answer.grounding import SentenceVerdict, written
from agentsearch.pipeline.job.answer.question_kind import holds_kind, question_kind
from agentsearch.pipeline.job.answer.result import Answer
from agentsearch.pipeline.text import words
from agentsearch.pipeline.text.spans import find_loose
from agentsearch.pipeline.text.typography import fold_typography

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


def lead_first(kept: list[SentenceVerdict], query: str | None, language: str = "english") -> list[SentenceVerdict]:
    """``kept`` with the sentence that addresses ``query`` best first (the module's rule 2), the rest in order."""
    if not query or len(kept) < 2:
        return kept
    question = _Question(query, language)
    scores = [len(question.held(v.text)) + question.holds_kind(v.text) for v in kept]
    best = max(range(len(kept)), key=lambda i: (scores[i], -i))
    return [kept[best], *kept[:best], *kept[best + 1:]]


def covered(quote: Claim, delivered: list[SentenceVerdict], documents: list[Document], query: str | None = None,
            language: str = "english") -> str | None:
    """Why an offline quote adds nothing to the ``delivered`` sentences (the module's rule 3), or None when it
    joins them."""
    supported = [v for v in delivered if v.status == "supported"]  # a partly supported sentence covers nothing
    for n in quote.sources:
        where = find_loose(documents[n - 1].text, quote.text.rstrip(".!?"))
        said = [c.span for v in supported for c in v.citations if c.source == n and c.status == "supported"]
        if where is not None and any(span and where[0] <= span[0] and span[1] <= where[1] for span in said):
            return "a supported sentence of the model says it"
    question = _Question(query, language)
    terms = set(question.analyzer.terms(fold_typography(quote.text)))
    said_terms: set[str] = set()
    for v in supported:
        said_terms |= set(question.analyzer.terms(fold_typography(v.text)))
    if terms and len(terms & said_terms) >= REPEATED * len(terms):
        return "the delivered sentences already say it"
    if query is None:
        return None
    answered = set().union(*(question.held(v.text) for v in supported))
    if question.held(quote.text) - answered:
        return None
    if question.holds_kind(quote.text) and not any(question.holds_kind(v.text) for v in supported):
        return None
    return "it answers no part of the question the delivered sentences leave out"


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
    parts = [written(v) for v in ordered]
    citations: list[Citation] = []
    for v, text in zip(ordered, parts, strict=True):
        citations.extend(c.model_copy(update={"sentence": text}) for c in v.citations)
    quotes = cited_sentences(extractive.text, len(documents))
    added = [q for q in quotes if covered(q, ordered, documents, query, language) is None]
    if added:
        extra, _ = verify_offline(added, documents, language=language)
        parts.extend(q.sentence for q in added)
        citations.extend(extra)
    info = {"sentences": sentences_info, "llm_sentences": counts, "quotes_added": len(added),
            "quotes_covered": len(quotes) - len(added), "lead_moved": ordered[0] is not kept[0],
            "rule": "llm sentences supported" + (" + extractive quotes they leave out" if added else "")}
    return Answer(" ".join(parts), extractive.sources, method="llm", info=info, citations=citations)
