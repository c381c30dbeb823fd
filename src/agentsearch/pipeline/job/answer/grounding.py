"""Grounded answers: every sentence an LLM wrote gets a verdict against the sources, and one stated rule picks the
answer the user receives. A weak LLM may add nothing to the offline answer; it can never take anything away.

A sentence's verdict (``judge_sentences``):

0. **A fragment** ("118.", "Kawann Short.") is ``unsupported``: its meaning lies in the question, so a source that
   holds its words does not support it. So is a source's title copied as a sentence (``3. Approvals``,
   ``ผลประกอบการไตรมาส 3``, ``الموافقات على تقارير النفقات``): a piece ``titles.is_title`` takes for a title that
   stands word for word in a source is that part's title, never a sentence of the answer, in any script.
1. **Its numbers and names.** Each number it states, and each name (a word written with a capital inside the
   sentence, or with digits among its letters: "Northwind", "Q4"), must stand in some source. A sentence stating
   one that no source holds is ``unsupported``, whatever else it says: this is how an invented figure is caught.
2. **The sources that say it.** It is checked against every source (``citations.verify_offline``: the weighted
   terms a span of the source holds, its numbers, negation, and the embedding cosine where vectors are given). It
   is then cited to the sources that support it, preferring those the model cited; a sentence the model left
   uncited, or cited to the wrong source, is cited where it is said. Both are read in one typographic form
   ("20-18" is "20–18", "5.5" is "5½"), and a paraphrase anchored by the source's numbers and names is supported.
   A sentence that joins clauses ("A won 20-18, and the stadium holds 68,500 people") no single source says is
   supported when each clause is (``clauses``), cited to the sources of both.
3. **The LLM's own check** (``entailment``, where an LLM judge is given) can only lower a verdict: a weak judge
   cannot pass off what the offline check refused. A sentence that stands word for word in its source is not
   asked about: nothing could lower it.

The delivery rule, what the user receives of the judged sentences, is ``agentsearch.pipeline.job.answer.delivery``.

Usage::

    verdicts, info = judge_sentences(sentences, documents, embed=embed, language="english")
    verdicts[0].status, verdicts[0].sources, verdicts[0].reason, written(verdicts[0])
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from agentsearch.pipeline.documents import Citation, Document
from agentsearch.pipeline.job.answer.citations import Claim, numbers_in, verify_offline
from agentsearch.pipeline.job.answer.result import Embed
from agentsearch.pipeline.text import PARTIAL_MARK, without_citation_marks
from agentsearch.pipeline.text.spans import find_loose
from agentsearch.pipeline.text.titles import is_title
from agentsearch.pipeline.text.typography import fold_typography

SupportStatus = str  # supported | partial | unsupported
MIN_WORDS = 3
MIN_UNSPACED_CHARS = 6
_UNSPACED = re.compile(r"[\u0E00-\u0EFF\u1780-\u17FF\u3040-\u30FF\u3400-\u9FFF]")
_RANK = {"supported": 2, "partial": 1, "unsupported": 0}
# A word: letters and digits. An apostrophe or a hyphen ends it, so "Poland's" is the name "Poland" and
# "COVID-19" the name "COVID" and the number 19.
_WORD = re.compile(r"[^\W_]+")
_JOINS = re.compile(r";\s+|,?\s+(?:and|but|while|whereas)\s+")


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
    numbers = numbers_in(fold_typography(sentence))
    names = names_in(sentence)
    if not numbers and not names:
        return []
    held_numbers: set[str] = set()
    held_words: set[str] = set()
    for doc in documents:
        text = f"{doc.title or ''}\n{doc.text}"
        held_numbers |= numbers_in(fold_typography(text))
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


def copied_title(sentence: str, documents: list[Document]) -> bool:
    """A title (``titles.is_title``: a heading, a slide title, a numbered line without end mark) that a source holds
    word for word: the model copied a part's title, not a sentence."""
    plain = without_citation_marks(sentence).strip()
    return is_title(plain) and any(find_loose(d.text, plain.rstrip(".!?。")) for d in documents)


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
        if copied_title(s.text, documents):
            verdicts[i] = SentenceVerdict(s.text, s.cited, "unsupported", [], [],
                                          "a title of the source: a part's title is no sentence of the answer")
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
        for i in claim_of:
            verdict = verdicts[i]
            if verdict is not None and verdict.status != "supported":
                verdicts[i] = _joined(sentences[i], documents, embed, language) or verdict
    return [v for v in verdicts if v is not None], info


def clauses(sentence: str) -> list[str]:
    """The clauses a sentence joins ("A won the game, and B holds 68,500 people."): split at a semicolon or at
    "and", "but", "while", "whereas" between two clauses of ``MIN_WORDS`` words or more each; one clause when it
    joins none."""
    body = without_citation_marks(sentence).strip().rstrip(".!?")
    parts = [p.strip(" ,") for p in _JOINS.split(body)]
    if len(parts) < 2 or any(len(_WORD.findall(p)) < MIN_WORDS for p in parts):
        return [sentence]
    return parts


def _joined(sentence: LLMSentence, documents: list[Document], embed: Embed | None,
            language: str) -> SentenceVerdict | None:
    """Supported when it joins clauses each of which some source supports (two sources may say one sentence);
    None otherwise."""
    parts = clauses(sentence.text)
    if len(parts) < 2:
        return None
    every = list(range(1, len(documents) + 1))
    pairs, _ = verify_offline([Claim(sentence=p, text=p, sources=every) for p in parts], documents, embed=embed,
                              language=language)
    per_part = len(documents)
    chosen: list[Citation] = []
    for k, part in enumerate(parts):
        verdict = _verdict(LLMSentence(part, sentence.cited), pairs[k * per_part:(k + 1) * per_part], documents)
        if verdict.status != "supported":
            return None
        chosen.extend(c for c in verdict.citations if c.source not in {x.source for x in chosen})
    citations = [c.model_copy(update={"sentence": sentence.text}) for c in chosen]
    sources = [c.source for c in citations]
    reason = None if set(sources) <= set(sentence.cited) else f"cited {_marks(sentence.cited)}, said by " \
        f"{_marks(sources)}"
    return SentenceVerdict(sentence.text, sentence.cited, "supported", sources, citations, reason)


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
