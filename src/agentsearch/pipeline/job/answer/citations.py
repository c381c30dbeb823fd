"""Verified citations: every answer sentence that cites ``[n]`` checked against the text of source n.

An answer's citation says "source n says this". Nothing made the model keep that promise, and nothing told the
reader when it did not; so after the answer, each sentence that carries ``[n]`` is looked up in source n's text
and gets a ``Citation``: the span of that text that says it (character offsets into ``Document.text``), a status
and a score.

- ``supported``: a span of the source says the whole sentence: (nearly) all of its weighted terms are there,
  or most are and the meaning matches, or half are and the sentence's numbers stand there in the same place with
  its names (a paraphrase anchored by its numbers and names); every number it states is there, and the span does
  not negate it. Both texts are read in one typographic form (``agentsearch.pipeline.text.typography``): "20-18"
  is "20–18", "5.5" is "5½", "68500" is "68,500", "12 percent" is "12%".
- ``partial``: the span says part of it (about half its weighted terms, or a close meaning), or says it but
  without one of its numbers, or with the negation the other way round. The span is given.
- ``unsupported``: nothing in the source comes close, or the closest span states another number in the
  sentence's place (a contradicted number), or says the sentence's number of another name than the sentence does
  ("X had 5 sacks" of "Y had 5 sacks and X had 2": ``agentsearch.pipeline.job.answer.attachment``). No span.

Offline (``verify_offline``) the signals are per source sentence and per pair of adjacent sentences (a claim
may join two): the share of the claim's stemmed terms the span holds, each weighted by its rarity among the
sources' sentences (a rare term found says more than "the"); the numbers of both; negation words; and the
embedding cosine of claim and source sentence, read from the sentence vectors stored at ingest when the job's
``embed`` is a ``KnownVectors``. A sentence found verbatim is supported with score 1 at once (the extractive
answer's sentences are quotes, so they cost no embedding). With an LLM (``verify_citations(..., llm=)``), for
an answer the LLM wrote, one chat completion judges every (sentence, source) pair at once
(``agentsearch.pipeline.job.answer.entailment``); a reply that fails validation falls back to the offline verdicts.

Usage::

    check = verify_citations(answer.text, documents, embed=embed)           # offline
    check = verify_citations(answer.text, documents, llm=llm, embed=embed)  # entailment by the LLM
    check.citations    # [Citation(sentence=..., source=2, span=(120, 188), status="supported", score=0.93), ...]
    check.info         # {"method": "offline", "supported": 2, "partial": 0, "unsupported": 1, "ms": 3.1, ...}
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from agentsearch.pipeline.documents import Citation, Document, location_of
from agentsearch.pipeline.job.answer.attachment import NUMBER_WORDS, misattributed, normal_number
from agentsearch.pipeline.job.answer.entailment import CONTRADICTED, entailment_verdicts
from agentsearch.pipeline.job.answer.extractive import _analyzer, _cosine
from agentsearch.pipeline.job.answer.result import Embed
from agentsearch.pipeline.platform.settings import JUDGE_LLM_TIMEOUT_S
from agentsearch.pipeline.text import words
from agentsearch.pipeline.text.spans import Sentence, find_loose, sentence_spans, squeeze
from agentsearch.pipeline.text.typography import fold_typography

# The LLM check's whole budget: the default of AGENTSEARCH_JUDGE_LLM_TIMEOUT_S, the answer step's judge's budget.
# The answer step's Celery limit leaves room for it beside the answer's own
# (agentsearch.worker.job_tasks.answer_limit_s).
CITATION_LLM_TIMEOUT_S = JUDGE_LLM_TIMEOUT_S

# Thresholds on the share of weighted terms found (coverage) and the embedding cosine. Chosen on hand-made
# sentences and the SciFact training claims (docs/citations.md): a supported claim of a real answer holds nearly
# all its terms; one holding half of them with a close meaning is a partial restatement.
SUPPORTED_COVERAGE = 0.8
SUPPORTED_COVERAGE_WITH_MEANING = 0.5
SUPPORTED_COSINE = 0.8
PARTIAL_COVERAGE = 0.4
PARTIAL_COSINE = 0.6
# A paraphrase anchored by its numbers: a claim stating a number, every one of which the span states in the same
# place (a neighbouring word in common), whose names the span holds, and holding at least this share of the
# claim's weighted terms, says what the span says in other words ("The final score was 20-18." for "..., winning
# 20–18.").
ANCHORED_COVERAGE = 0.5
# A span holding at least this share of the claim's terms speaks of the same thing: a number of the claim
# missing from it while it states another is a contradiction, not an omission.
SAME_TOPIC_COVERAGE = 0.5
# With embeddings, the score is mostly the terms found: the cosine of two short sentences runs high for any pair
# on one topic.
LEXICAL_WEIGHT = 0.65
# A span of two sentences must earn its length: it wins over the best single sentence only by this margin.
PAIR_MARGIN = 0.05

_MARKERS = re.compile(r"\s?\[(\s*\d+\s*(?:(?:,|;|-|–)\s*\d+\s*)*)\]")
_LEADING_MARKERS = re.compile(r"(?:\s*\[\s*\d+\s*(?:(?:,|;|-|–)\s*\d+\s*)*\])+")
# A citation, its full stop and a space end an answer's sentence whatever follows. The sentence splitter wants a
# capital after a full stop in a cased script and knows the ends of the scripts without capitals it names, but not
# Thai's (which has none) or an answer that goes on in lower case: without this, an answer of three quoted Hindi
# sentences was once one claim citing all three sources, and no source held it.
_CITED_END = re.compile(r"(?<=\])[.!?。।]\s+")
_NUMBER = re.compile(r"(?<![\w.])(\d+(?:[.,]\d+)*)")
_CAPITALISED = re.compile(r"(?<=\s)[A-Z][\w]*")
_TOKEN = re.compile(r"[^\W_]+(?:[.,]\d+)*")
_NUMERIC = re.compile(r"\d+(?:[.,]\d+)*")
_NEGATIONS = frozenset(
    """not no never none neither nor without cannot nothing nobody n't nicht kein keine keinen keiner nie niemals
    ohne nunca sin ningún ninguna ni""".split()
)
STATUSES = ("supported", "partial", "unsupported")


@dataclass
class Claim:
    """An answer sentence that cites sources: as written, without its markers, and the numbers it cites."""

    sentence: str
    text: str
    sources: list[int]


@dataclass
class CitationCheck:
    citations: list[Citation] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)


def _cut(sentence: str) -> list[tuple[int, int]]:
    """``[start, end)`` of the pieces of ``sentence`` after each cited full stop (``_CITED_END``)."""
    bounds, start = [], 0
    for m in _CITED_END.finditer(sentence):
        bounds.append((start, m.start() + 1))
        start = m.end()
    return [*bounds, (start, len(sentence))]


def citation_numbers(inner: str) -> list[int]:
    """The source numbers inside one citation's brackets: ``"1, 3-5"`` -> ``[1, 3, 4, 5]``."""
    out: list[int] = []
    for part in re.split(r"\s*[,;]\s*", inner.strip()):
        bounds = [int(x) for x in re.split(r"\s*[-–]\s*", part) if x.strip()]
        if len(bounds) == 2 and 0 < bounds[1] - bounds[0] <= 50:
            out.extend(range(bounds[0], bounds[1] + 1))
        else:
            out.extend(bounds)
    return out


def cited_sentences(answer: str, n_sources: int, keep_uncited: bool = False) -> list[Claim]:
    """The answer's sentences that cite at least one existing source (every sentence with ``keep_uncited``). A
    citation written after a sentence's full stop ("... won. [2] The game ...") belongs to the sentence before
    it."""
    spans = [Sentence(s.start + a, s.start + b, answer[s.start + a:s.start + b])
             for s in sentence_spans(answer) for a, b in _cut(answer[s.start:s.end])]
    pieces: list[list[int]] = []  # [start, end] in the answer, per sentence
    for s in spans:
        lead = _LEADING_MARKERS.match(answer, s.start, s.end)
        if lead and pieces:
            pieces[-1][1] = lead.end()
            if lead.end() >= s.end:
                continue
            start = lead.end() + (len(answer[lead.end():s.end]) - len(answer[lead.end():s.end].lstrip()))
            pieces.append([start, s.end])
        else:
            pieces.append([s.start, s.end])
    claims: list[Claim] = []
    for start, end in pieces:
        written = answer[start:end]
        cited: list[int] = []
        for m in _MARKERS.finditer(written):
            cited.extend(n for n in citation_numbers(m.group(1)) if 1 <= n <= n_sources and n not in cited)
        if not cited and not keep_uncited:
            continue
        text = squeeze(re.sub(r"\s+([.,;:!?])", r"\1", _MARKERS.sub("", written)))
        if text:
            claims.append(Claim(sentence=squeeze(written), text=text, sources=cited))
    return claims


_number = normal_number


def numbers_in(text: str) -> set[str]:
    """The numbers a text states, normalised: "1,000" and "1000" are one number, "four" is "4"."""
    found = {_number(m.group(1)) for m in _NUMBER.finditer(text)}
    found.update(NUMBER_WORDS[w] for w in words(text) if w in NUMBER_WORDS)
    return found


Mention = tuple[str, str, str]  # (number, the word before it, the word after it)


def mentions_in(text: str) -> list[Mention]:
    """Each number a text states, with its neighbours: "a 3-yard run" holds ("3", "a", "yard"). A number is the
    same claim in two texts when it has a neighbour in common; another number beside the same neighbour is a
    rival value for that slot."""
    tokens = [t.lower() for t in _TOKEN.findall(text)]
    return [(_number(t), tokens[k - 1] if k else "", tokens[k + 1] if k + 1 < len(tokens) else "")
            for k, t in enumerate(tokens) if _NUMERIC.fullmatch(t)]


def _matched(m: Mention, there: list[Mention]) -> bool:
    return any(v == m[0] and (left == m[1] or right == m[2]) for v, left, right in there)


def _rival(m: Mention, there: list[Mention]) -> str | None:
    for v, left, right in there:
        if v != m[0] and ((m[1] and left == m[1]) or (m[2] and right == m[2])):
            return v
    return None


def _negated(text: str) -> bool:
    lowered = text.lower()
    return "n't" in lowered or any(w in _NEGATIONS for w in words(lowered))


@dataclass
class _Window:
    start: int
    end: int
    terms: set[str]
    numbers: set[str]
    negated: bool
    sentences: list[int]  # indexes into the source's sentence list
    mentions: list[Mention]
    text: str  # folded


@dataclass
class _Source:
    document: Document
    sentences: list[Sentence]
    windows: list[_Window]


@dataclass
class _Verdict:
    status: str
    score: float
    span: tuple[int, int] | None
    reason: str | None
    contradicted: bool = False


def _prepare(doc: Document, analyzer) -> _Source:
    sentences = sentence_spans(doc.text)
    # Terms and numbers are read in one typographic form: "20-18" is the source's "20–18", "5.5" its "5½".
    folded = [fold_typography(s.text) for s in sentences]
    singles = [
        _Window(s.start, s.end, set(analyzer.terms(text)), numbers_in(text), _negated(text), [i], mentions_in(text),
                text)
        for i, (s, text) in enumerate(zip(sentences, folded, strict=True))
    ]
    pairs = [
        _Window(a.start, b.end, a.terms | b.terms, a.numbers | b.numbers, a.negated or b.negated,
                [*a.sentences, *b.sentences], a.mentions + b.mentions, f"{a.text} {b.text}")
        for a, b in pairwise(singles)
    ]
    return _Source(doc, sentences, singles + pairs)


def verify_offline(claims: list[Claim], documents: list[Document], embed: Embed | None = None,
                   language: str = "english") -> tuple[list[Citation], dict[str, Any]]:
    """Every (claim, cited source) pair judged by terms, numbers, negation and embedding cosine."""
    info: dict[str, Any] = {"signals": "verbatim"}
    exact: dict[tuple[int, int], tuple[int, int]] = {}
    for i, claim in enumerate(claims):
        for n in claim.sources:
            found = find_loose(documents[n - 1].text, claim.text) or find_loose(
                documents[n - 1].text, claim.text.rstrip(".!?"))
            if found:
                exact[(i, n)] = found
    if len(exact) == sum(len(c.sources) for c in claims):  # all quoted: nothing more to weigh
        return [Citation(sentence=c.sentence, source=n, document_id=documents[n - 1].id,
                         location=location_of(documents[n - 1]), span=exact[(i, n)], status="supported", score=1.0)
                for i, c in enumerate(claims) for n in c.sources], info
    info["signals"] = "lexical"
    analyzer = _analyzer(language)
    cited = sorted({n for c in claims for n in c.sources})
    sources = {n: _prepare(documents[n - 1], analyzer) for n in cited}

    # A term's weight: its rarity among every sentence of the cited sources (an unseen term weighs most).
    singles = [w for s in sources.values() for w in s.windows if len(w.sentences) == 1]
    df: dict[str, int] = {}
    for w in singles:
        for t in w.terms:
            df[t] = df.get(t, 0) + 1
    total = len(singles)

    def weight(term: str) -> float:
        return math.log(1 + (total + 1) / (1 + df.get(term, 0)))

    # One embedding call for the claims not found verbatim and the sentences of their sources (stored at ingest).
    cosines: dict[tuple[int, int], list[float]] = {}
    pending = [(i, n) for i, c in enumerate(claims) for n in c.sources if (i, n) not in exact]
    if embed is not None and pending:
        texts = list(dict.fromkeys(
            [claims[i].text for i, _ in pending] + [s.text for n in {n for _, n in pending}
                                                     for s in sources[n].sentences]))
        try:
            vectors = dict(zip(texts, embed(texts), strict=True))
            for i, n in pending:
                claim_vector = vectors[claims[i].text]
                cosines[(i, n)] = [max(0.0, _cosine(claim_vector, vectors[s.text])) for s in sources[n].sentences]
            info["signals"] = "lexical+embedding"
        except Exception as exc:  # noqa: BLE001 - the lexical signals still judge; say why they judged alone
            info["embedding_error"] = f"{type(exc).__name__}: {exc}"[:300]

    citations: list[Citation] = []
    for i, claim in enumerate(claims):
        text = fold_typography(claim.text)
        claim_terms = set(analyzer.terms(text)) or set(words(text))
        claim_numbers = numbers_in(text)
        claim_negated = _negated(text)
        # The terms of its names (capitalised after its first word): a paraphrase keeps them.
        claim_names = set(analyzer.terms(" ".join(_CAPITALISED.findall(text))))
        for n in claim.sources:
            doc = documents[n - 1]
            if (i, n) in exact:
                verdict = _Verdict("supported", 1.0, exact[(i, n)], None)
            else:
                verdict = _judge(claim_terms, claim_numbers, mentions_in(text), claim_negated, sources[n],
                                 cosines.get((i, n)), weight, claim_names, text)
            citations.append(Citation(sentence=claim.sentence, source=n, document_id=doc.id,
                                      location=location_of(doc), span=verdict.span,
                                      status=verdict.status, score=round(verdict.score, 4), reason=verdict.reason))
    return citations, info


def _judge(claim_terms: set[str], claim_numbers: set[str], claim_mentions: list[Mention], claim_negated: bool,
           source: _Source, cosines: list[float] | None, weight,
           claim_names: frozenset[str] | set[str] = frozenset(), claim_text: str = "") -> _Verdict:
    if not source.windows:
        return _Verdict("unsupported", 0.0, None, "the source has no text")
    total = sum(weight(t) for t in claim_terms) or 1.0
    # Whether a sentence speaks of the same thing is judged on the claim's words: its numbers are what may differ.
    wordy = {t for t in claim_terms if not any(ch.isdigit() for ch in t)}
    wordy_total = sum(weight(t) for t in wordy)

    def topic(w: _Window) -> float:
        return sum(weight(t) for t in wordy & w.terms) / wordy_total if wordy_total else 0.0

    scored: list[tuple[float, float, float, _Window]] = []  # (rank score, coverage, cosine, window)
    for w in source.windows:
        coverage = sum(weight(t) for t in claim_terms & w.terms) / total
        cosine = max(cosines[k] for k in w.sentences) if cosines is not None else 0.0
        score = LEXICAL_WEIGHT * coverage + (1 - LEXICAL_WEIGHT) * cosine if cosines is not None else coverage
        rank = score - (PAIR_MARGIN if len(w.sentences) > 1 else 0.0)
        scored.append((rank, coverage, cosine, w))

    def recombined(w: _Window) -> tuple[str, str, str] | None:
        # Every word and number of the claim may stand in the span and still be paired anew: "X had 5 sacks" of
        # "Y had 5 sacks and X had 2" (agentsearch.pipeline.job.answer.attachment).
        return misattributed(claim_text, w.text) if claim_numbers and claim_text else None

    def agrees(w: _Window) -> bool:
        return (claim_numbers <= w.numbers and all(_matched(m, w.mentions) for m in claim_mentions)
                and recombined(w) is None)

    # The best span whose numbers agree with the claim's, unless only a span that disagrees speaks of it at all.
    best = max(scored, key=lambda s: s[0])
    best_single = max((s for s in scored if len(s[3].sentences) == 1), key=lambda s: s[0])
    agreeing = [s for s in scored if agrees(s[3])]
    if agreeing:
        best_agreeing = max(agreeing, key=lambda s: s[0])
        if _level(best_agreeing[1], best_agreeing[2], cosines is not None) != "unsupported":
            best = best_agreeing
    _, coverage, cosine, window = best
    score = LEXICAL_WEIGHT * coverage + (1 - LEXICAL_WEIGHT) * cosine if cosines is not None else coverage
    level = _level(coverage, cosine, cosines is not None)
    span = (window.start, window.end)
    # A contradicted number: a sentence on the claim's topic (of the span, or the closest single sentence) that
    # puts another number where the claim puts its own.
    singles = {k: w for w in source.windows if len(w.sentences) == 1 for k in w.sentences}
    for k in dict.fromkeys([*window.sentences, *best_single[3].sentences]):
        sentence = singles[k]
        if topic(sentence) < SAME_TOPIC_COVERAGE:
            continue
        for m in claim_mentions:
            rival = None if _matched(m, sentence.mentions) else _rival(m, sentence.mentions)
            if rival is not None:
                return _Verdict("unsupported", 0.0, None,
                                f"{CONTRADICTED} {rival} where the sentence states {m[0]}", contradicted=True)
    missing = sorted(claim_numbers - window.numbers) + [m[0] for m in claim_mentions
                                                         if m[0] in window.numbers and not _matched(m, window.mentions)]
    if level == "unsupported":
        return _Verdict("unsupported", score, None, "no span of the source says it")
    paired = recombined(window)
    if paired is not None:
        number, claimed, holder = paired
        return _Verdict("unsupported", 0.0, None,
                        f"{CONTRADICTED} {number} of {holder}, not of {claimed}", contradicted=True)
    if missing:
        return _Verdict("partial", min(score, 0.6), span,
                        f"{', '.join(dict.fromkeys(missing))} is not in the source as the sentence states it")
    if claim_negated != window.negated and topic(window) >= SAME_TOPIC_COVERAGE:
        return _Verdict("partial", min(score, 0.6), span, "the source says it with the negation the other way")
    anchored = (claim_mentions and coverage >= ANCHORED_COVERAGE and claim_names <= window.terms
                and (cosines is None or cosine >= PARTIAL_COSINE))  # an embedding that finds it far overrules
    if level == "partial" and not anchored:
        return _Verdict("partial", score, span, "the source says part of it")
    return _Verdict("supported", score, span, None)


def _level(coverage: float, cosine: float, with_meaning: bool) -> str:
    if coverage >= SUPPORTED_COVERAGE or (
            with_meaning and cosine >= SUPPORTED_COSINE and coverage >= SUPPORTED_COVERAGE_WITH_MEANING):
        return "supported"
    if coverage >= PARTIAL_COVERAGE or (with_meaning and cosine >= PARTIAL_COSINE):
        return "partial"
    return "unsupported"


def verify_citations(answer: str, documents: list[Document], llm=None, embed: Embed | None = None,
                     language: str = "english", timeout_s: float = CITATION_LLM_TIMEOUT_S) -> CitationCheck:
    """The answer's citations checked: offline always; with ``llm``, by one entailment call whose verdicts
    replace the offline ones (a number the source contradicts stays unsupported whatever the model says)."""
    started = time.perf_counter()
    try:
        claims = cited_sentences(answer, len(documents))
        citations, info = verify_offline(claims, documents, embed=embed, language=language)
    except Exception as exc:  # noqa: BLE001 - a check that cannot run leaves the answer unchecked, never unanswered
        return CitationCheck([], {"method": "none", "error": f"{type(exc).__name__}: {exc}"[:500],
                                  "all_supported": False})
    info["method"] = "offline"
    if llm is not None and claims:
        try:
            citations, llm_info = entailment_verdicts(llm, claims, documents, citations, timeout_s=timeout_s)
            info.update(llm_info, method="llm")
        except Exception as exc:  # noqa: BLE001 - any LLM failure leaves the offline verdicts, recorded
            info["fallback_reason"] = f"{type(exc).__name__}: {exc}"[:500]
    info["ms"] = round((time.perf_counter() - started) * 1000, 2)
    return CitationCheck(citations, citation_summary(citations, info))


def citation_summary(citations: list[Citation], info: dict[str, Any]) -> dict[str, Any]:
    """What a job records in ``metadata.citations``: how the check ran (``info``), the count per status, the
    sentences checked and whether every one is supported."""
    counts = {status: sum(c.status == status for c in citations) for status in STATUSES}
    return {"method": "offline", **info, **counts, "sentences": len({c.sentence for c in citations}),
            "all_supported": fully_supported(citations)}


def fully_supported(citations: list[Citation]) -> bool:
    """Every cited sentence supported by at least one of the sources it cites (an answer with no citations is
    not)."""
    best: dict[str, str] = {}
    for c in citations:
        if best.get(c.sentence) != "supported":
            best[c.sentence] = c.status
    return bool(best) and all(status == "supported" for status in best.values())
