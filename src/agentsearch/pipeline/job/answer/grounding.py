"""Grounded answers: every sentence an LLM wrote gets a verdict against the sources, and one stated rule picks the
answer the user receives. A weak LLM may add nothing to the offline answer; it can never take anything away.

A sentence's verdict (``judge_sentences``):

0. **A fragment** ("118.", "Kawann Short.") is ``unsupported``: its meaning lies in the question, so a source that
   holds its words does not support it.
1. **Its numbers and names.** Each number it states, and each name (a word written with a capital inside the
   sentence, or with digits among its letters: "Northwind", "Q4"), must stand in some source. A sentence stating
   one that no source holds is ``unsupported``, whatever else it says: this is how an invented figure is caught.
2. **The sources that say it.** It is checked against every source (``citations.verify_offline``: the weighted
   terms a span of the source holds, its numbers, negation, and the embedding cosine where vectors are given). It
   is then cited to the sources that support it, preferring those the model cited; a sentence the model left
   uncited, or cited to the wrong source, is cited where it is said.
3. **The LLM's own check** (``entailment``, where an LLM judge is given) can only lower a verdict: a weak judge
   cannot pass off what the offline check refused. A sentence that stands word for word in its source is not
   asked about: nothing could lower it.

The delivery rule (``deliver``):

1. The LLM's ``supported`` sentences, in the model's order, each cited to the sources that say it; its
   ``partial`` sentences among them, marked ``PARTIAL_MARK``; its ``unsupported`` sentences left out (listed in
   ``metadata.answer.sentences`` with the reason).
2. Then the sentences of the extractive answer that the kept sentences do not already quote: the offline answer's
   quotes stay in every answer, so the delivered answer holds whatever the offline one held.
3. When none of the LLM's sentences is ``supported``, the extractive answer alone, and ``fallback_reason`` says why.

Usage::

    verdicts = judge_sentences(sentences, documents, embed=embed, language="english")
    answer = deliver(verdicts, extractive_answer(query, documents), documents)
    answer.text, answer.method, answer.info["sentences"], answer.citations
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from agentsearch.pipeline.documents import Citation, Document
from agentsearch.pipeline.job.answer.citations import Claim, cited_sentences, numbers_in, verify_offline
from agentsearch.pipeline.job.answer.result import Answer, Embed
from agentsearch.pipeline.text import PARTIAL_MARK, without_citation_marks
from agentsearch.pipeline.text.spans import find_loose

SupportStatus = str  # supported | partial | unsupported
MIN_WORDS = 3
MIN_UNSPACED_CHARS = 6
_UNSPACED = re.compile(r"[\u0E00-\u0EFF\u1780-\u17FF\u3040-\u30FF\u3400-\u9FFF]")
_RANK = {"supported": 2, "partial": 1, "unsupported": 0}
# A word: letters and digits. An apostrophe or a hyphen ends it, so "Poland's" is the name "Poland" and
# "COVID-19" the name "COVID" and the number 19.
_WORD = re.compile(r"[^\W_]+")


@dataclass
class LLMSentence:
    """One sentence of the LLM's answer, as the model wrote it: its text without citation marks, the numbers it
    cited (possibly none, possibly wrong)."""

    text: str
    cited: list[int] = field(default_factory=list)


@dataclass
class SentenceVerdict:
    """What the check found for one sentence of the LLM's answer."""

    text: str
    cited: list[int]
    status: SupportStatus
    sources: list[int]  # the sources that say it (the ones it is cited to when delivered); empty when unsupported
    citations: list[Citation]  # one per source in ``sources`` (or the best attempt when unsupported)
    reason: str | None = None
    verbatim: bool = False  # the sentence stands word for word in a source it is cited to

    def as_dict(self, delivered: bool) -> dict[str, Any]:
        return {"text": self.text, "status": self.status, "cited": self.cited, "sources": self.sources,
                "reason": self.reason, "delivered": delivered}


def names_in(sentence: str) -> list[str]:
    """The words of ``sentence`` that read as names: capitalised after its first word, or letters mixed with
    digits. The first word is left out (every sentence starts with a capital); a name there is caught only when
    it mixes letters and digits."""
    found = []
    for k, m in enumerate(_WORD.finditer(sentence)):
        token = m.group(0)
        has_digit = any(ch.isdigit() for ch in token)
        if (has_digit and any(ch.isalpha() for ch in token)) or (k > 0 and not has_digit and token[0].isupper()):
            found.append(token)
    return found


def unstated(sentence: str, documents: list[Document]) -> list[str]:
    """The numbers and names of ``sentence`` that no source's text (or title) holds (its citation marks aside)."""
    sentence = without_citation_marks(sentence)
    numbers = numbers_in(sentence)
    names = names_in(sentence)
    if not numbers and not names:
        return []
    held_numbers: set[str] = set()
    held_words: set[str] = set()
    for doc in documents:
        text = f"{doc.title or ''}\n{doc.text}"
        held_numbers |= numbers_in(text)
        held_words |= {w.casefold() for w in _WORD.findall(text)}
    missing = sorted(numbers - held_numbers)
    missing += [n for n in dict.fromkeys(names) if n.casefold() not in held_words]
    return missing


def fragment(sentence: str) -> bool:
    """Too short to state anything on its own ("118.", "Kawann Short."): its meaning lies in the question, which the
    check does not see, so a source holding the same words says nothing about it. Fewer than ``MIN_WORDS`` words;
    in a script written without spaces (Chinese, Japanese, Thai), where a sentence is one long word, fewer than
    ``MIN_UNSPACED_CHARS`` letters and digits."""
    plain = without_citation_marks(sentence)
    if _UNSPACED.search(plain):
        return sum(ch.isalnum() for ch in plain) < MIN_UNSPACED_CHARS
    return len(_WORD.findall(plain)) < MIN_WORDS


def _better(a: Citation, b: Citation) -> bool:
    return (_RANK[a.status], a.score) > (_RANK[b.status], b.score)


def judge_sentences(sentences: list[LLMSentence], documents: list[Document], embed: Embed | None = None,
                    language: str = "english") -> tuple[list[SentenceVerdict], dict[str, Any]]:
    """A verdict per sentence, offline (see the module docstring). Also returns the check's info (its signals)."""
    verdicts: list[SentenceVerdict | None] = [None] * len(sentences)
    claims: list[Claim] = []
    claim_of: list[int] = []
    every = list(range(1, len(documents) + 1))
    for i, s in enumerate(sentences):
        if fragment(s.text):
            verdicts[i] = SentenceVerdict(s.text, s.cited, "unsupported", [], [],
                                          "a fragment: it states nothing a source could support")
            continue
        missing = unstated(s.text, documents)
        if missing or not documents:
            verdicts[i] = SentenceVerdict(s.text, s.cited, "unsupported", [], [],
                                          f"no source holds {', '.join(missing)}" if missing else "no sources")
            continue
        claims.append(Claim(sentence=s.text, text=s.text, sources=every))
        claim_of.append(i)
    info: dict[str, Any] = {"signals": "none"}
    if claims:
        pairs, info = verify_offline(claims, documents, embed=embed, language=language)
        per_claim = len(documents)
        for k, i in enumerate(claim_of):
            verdicts[i] = _verdict(sentences[i], pairs[k * per_claim:(k + 1) * per_claim], documents)
    return [v for v in verdicts if v is not None], info


def _verdict(sentence: LLMSentence, pairs: list[Citation], documents: list[Document]) -> SentenceVerdict:
    """The sentence's verdict from its pairs with every source (in source order)."""
    best = pairs[0]
    for c in pairs[1:]:
        if _better(c, best):
            best = c
    status = best.status
    if status == "unsupported":
        return SentenceVerdict(sentence.text, sentence.cited, status, [], [best],
                               best.reason or "no span of any source says it")
    # The sources at the best level, the model's own choices first; the best-scoring other one otherwise.
    level = [c for c in pairs if c.status == status]
    own = [c for c in level if c.source in sentence.cited]
    chosen = own or [max(level, key=lambda c: c.score)]
    reason = None if status == "supported" else chosen[0].reason
    verbatim = status == "supported" and any(find_loose(documents[c.source - 1].text, sentence.text.rstrip(".!?"))
                                             for c in chosen)
    if not own and sentence.cited:
        moved = f"cited {_marks(sentence.cited)}, said by {_marks([chosen[0].source])}"
        reason = "; ".join(filter(None, [reason, moved]))
    elif not sentence.cited:
        reason = "; ".join(filter(None, [reason, "cited by the check: the model gave no source"]))
    return SentenceVerdict(sentence.text, sentence.cited, status, [c.source for c in chosen], chosen, reason,
                           verbatim)


def _marks(numbers: list[int]) -> str:
    return "".join(f"[{n}]" for n in numbers)


def lower_by_judge(verdicts: list[SentenceVerdict], judged: dict[int, tuple[str, str | None]]) -> int:
    """Apply an LLM judge's verdicts (``{verdict index: (status, reason)}``): each can only lower the offline one.
    Returns how many it lowered."""
    lowered = 0
    for i, (status, reason) in judged.items():
        v = verdicts[i]
        if _RANK[status] < _RANK[v.status]:
            lowered += 1
            v.status = status
            v.reason = reason or f"the LLM judged it {status}"
            if status == "unsupported":
                v.sources = []
            v.citations = [c.model_copy(update={"status": status, "reason": v.reason,
                                                "span": None if status == "unsupported" else c.span,
                                                "score": min(c.score, 0.5 if status == "partial" else 0.0)})
                           for c in v.citations]
    return lowered


def written(verdict: SentenceVerdict) -> str:
    """The sentence as delivered: its citation marks before its end mark, and the partial mark when due."""
    body = verdict.text.rstrip()
    end = body[-1] if body and body[-1] in ".!?。" else "."
    body = body[:-1].rstrip() if body and body[-1] in ".!?。" else body
    mark = f" {PARTIAL_MARK}" if verdict.status == "partial" else ""
    return f"{body} {_marks(verdict.sources)}{mark}{end}"


def deliver(verdicts: list[SentenceVerdict], extractive: Answer, documents: list[Document],
            language: str = "english") -> Answer:
    """The answer the user receives, by the rule of the module docstring. ``extractive`` is the offline answer for
    the same question and documents; the result's ``citations`` hold every delivered sentence's verdict."""
    kept = [v for v in verdicts if v.status != "unsupported"]
    sentences_info = [v.as_dict(delivered=v.status != "unsupported" and any(k.status == "supported" for k in kept))
                      for v in verdicts]
    counts = {s: sum(v.status == s for v in verdicts) for s in _RANK}
    if not any(v.status == "supported" for v in kept):
        why = ("the LLM's answer held no sentence" if not verdicts else
               f"no sentence of the LLM's answer is supported by the sources ({counts['unsupported']} unsupported, "
               f"{counts['partial']} partly supported)")
        extractive.fallback_reason = why
        extractive.info = {**extractive.info, "sentences": sentences_info, "llm_sentences": counts,
                           "rule": "extractive: no supported LLM sentence"}
        return extractive
    parts = [written(v) for v in kept]
    citations: list[Citation] = []
    for v, text in zip(kept, parts, strict=True):
        citations.extend(c.model_copy(update={"sentence": text}) for c in v.citations)
    # The offline answer's quotes the kept sentences do not already hold word for word.
    quotes = cited_sentences(extractive.text, len(documents))
    added = [q for q in quotes if not any(find_loose(v.text, q.text.rstrip(".!?")) for v in kept)]
    if added:
        extra, _ = verify_offline(added, documents, language=language)
        parts.extend(q.sentence for q in added)
        citations.extend(extra)
    info = {"sentences": sentences_info, "llm_sentences": counts, "quotes_added": len(added),
            "rule": "llm sentences supported" + (" + extractive quotes" if added else "")}
    return Answer(" ".join(parts), extractive.sources, method="llm", info=info, citations=citations)

