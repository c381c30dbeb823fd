"""Scoring results on four criteria: relevance, actionability, source quality, recency/impact (1-5 each, overall =
their mean), and keeping those at or above a threshold.

- ``LLMScorer``: one chat completion scores a batch. The reply is parsed defensively (``parse_json_reply``:
  fences and text around the JSON are tolerated; a list, or an object holding one, is accepted; entries are matched
  to documents by number or id). A reply with no usable evaluation keeps every document (a scoring failure must not
  empty the job's results) and says why in ``Scoring.error`` (method ``keep_all``); a document the reply left out
  is kept the same way, and so is one past the model's context, which is not shown (the reply is asked by JSON
  schema, at most ``TOKENS_PER_EVALUATION`` tokens a document).
- ``OfflineScorer``: the criteria from retrieval signals. Relevance is the mean of the query's stemmed-term
  coverage, the embedding cosine of query and document, and the retrieval score; source quality comes from
  ``authority`` and blocked domains; recency from a ``published`` date, only when the search weighs recency
  (``recency_half_life_days`` given: a knowledge base's two-year-old handbook is not worse for its age unless the
  user said so). A criterion with no evidence (actionability always: no retrieval signal measures it; source
  quality and recency without metadata or weight) takes the relevance score, so it neither raises nor lowers the
  overall score; it is listed in ``Evaluation.imputed``.
- ``judge``: the keep/discard decision against the iteration's threshold, optionally moved with the batch's score
  distribution (``Thresholds.adaptive``).

Usage::

    scoring = OfflineScorer(KeywordAnalyzer()).score("solar output 2025", documents)
    judged = judge(scoring, base=4.0, thresholds=Thresholds())
    [e.document_id for e in judged.evaluations if e.decision == "keep"]

    scoring = LLMScorer(llm, timeout_s=20).score(query, documents, threshold=4.0)
    scoring.method, scoring.error          # "keep_all", "LLM reply is not JSON: ..." when the reply was malformed
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Literal, Protocol, cast

from pydantic import BaseModel, Field

from agentsearch.pipeline.agentic.config import Thresholds
from agentsearch.pipeline.agentic.signals import cosine, coverage
from agentsearch.pipeline.agents.builtin.relevance_filter import (
    DEFAULT_BLOCKED_DOMAINS,
    blocked_domain,
    published_date,
    url_host,
)
from agentsearch.pipeline.documents import Document
from agentsearch.pipeline.platform.llm import LLMClient, LLMError, parse_json_reply
from agentsearch.pipeline.platform.prompt_budget import fit_texts
from agentsearch.pipeline.retrieval.analyzer import KeywordAnalyzer

CRITERIA = ("relevance", "actionability", "source_quality", "recency_impact")
DOC_CHARS_IN_PROMPT = 800
# MiniLM cosines: unrelated texts sit around 0.1-0.2, close paraphrases above 0.7; mapped linearly onto [0, 1].
COSINE_FLOOR, COSINE_CEILING = 0.2, 0.7

Embed = Callable[[list[str]], list[list[float]]]
DocVectors = Callable[[list[Document]], dict[str, list[float]]]


class Evaluation(BaseModel):
    document_id: str
    relevance: float | None = None
    actionability: float | None = None
    source_quality: float | None = None
    recency_impact: float | None = None
    overall: float | None = Field(None, description="Mean of the four criteria; None when the document was not scored.")
    decision: Literal["keep", "discard"] | None = None
    reasoning: str = ""
    imputed: list[str] = Field(default_factory=list, description="Offline: criteria without evidence.")


class Scoring(BaseModel):
    method: Literal["llm", "offline", "keep_all"]
    evaluations: list[Evaluation]
    error: str | None = Field(None, description="Why (part of) the LLM's reply was not used.")


class Judgement(BaseModel):
    method: str
    threshold: float
    base_threshold: float
    evaluations: list[Evaluation]
    error: str | None = None

    def kept_ids(self) -> list[str]:
        return [e.document_id for e in self.evaluations if e.decision == "keep"]


class Scorer(Protocol):
    def score(self, query: str, documents: list[Document], threshold: float = 4.0) -> Scoring: ...


def overall(scores: dict[str, float]) -> float:
    return round(sum(scores[c] for c in CRITERIA) / len(CRITERIA), 3)


def adaptive_threshold(overalls: list[float], base: float, max_shift: float) -> float:
    """mean + 0.5 sd of the batch, kept within ``max_shift`` of ``base``: a strong batch raises the bar, a weak
    one lowers it, but never far from what was configured."""
    if len(overalls) < 2:
        return base
    target = statistics.fmean(overalls) + 0.5 * statistics.pstdev(overalls)
    return round(min(base + max_shift, max(base - max_shift, target)), 3)


def judge(scoring: Scoring, base: float, thresholds: Thresholds) -> Judgement:
    """Keep a document scoring at least the threshold, and every document without a score (a failed evaluation
    keeps rather than drops)."""
    scored = [e.overall for e in scoring.evaluations if e.overall is not None]
    threshold = adaptive_threshold(scored, base, thresholds.max_shift) if thresholds.adaptive else base
    evaluations = [
        e.model_copy(update={"decision": "keep" if e.overall is None or e.overall >= threshold else "discard"})
        for e in scoring.evaluations
    ]
    return Judgement(method=scoring.method, threshold=threshold, base_threshold=base, evaluations=evaluations,
                     error=scoring.error)


def keep_all(documents: list[Document], error: str) -> Scoring:
    return Scoring(method="keep_all", error=error,
                   evaluations=[Evaluation(document_id=d.id, reasoning="not scored: kept") for d in documents])


# --- LLM ----------------------------------------------------------------------------------------------------------

_SYSTEM = (
    "You evaluate search results for a user's query on four criteria, each an integer from 1 (poor) to 5 "
    "(excellent):\n"
    "1. relevance: how well the document answers or bears on the query\n"
    "2. actionability: concrete facts, figures, names or practical takeaways a reader can use\n"
    "3. source_quality: an original, authoritative source rather than an aggregator or a thin page\n"
    "4. recency_impact: recent and significant developments (judge by the text when no date is given)\n"
    "For each document give the four scores and a one-sentence reasoning (the overall score, their average, and "
    "the decision against the threshold are computed from them).\n"
    'Reply with only JSON: {"evaluations": [{"id": <the document\'s number>, "relevance": n, "actionability": n, '
    '"source_quality": n, "recency_impact": n, "reasoning": "..."}, ...]}'
)
_SCORE = {"enum": [1, 2, 3, 4, 5]}
EVALUATION_SCHEMA = {"type": "object", "required": ["id", *CRITERIA, "reasoning"],
                     "properties": {"id": {"type": "integer"}, **dict.fromkeys(CRITERIA, _SCORE),
                                    "reasoning": {"type": "string", "maxLength": 200}}}
REPLY_BASE_TOKENS = 16
TOKENS_PER_EVALUATION = 96


def evaluations_schema(n: int) -> dict:
    """The reply's shape: at most one evaluation a document shown (a small model goes on inventing documents)."""
    return {"type": "object", "required": ["evaluations"], "properties": {"evaluations": {
        "type": "array", "maxItems": n, "items": EVALUATION_SCHEMA}}}


def _doc_block(n: int, doc: Document) -> str:
    lines = [f"[{n}] {doc.title or doc.id}"]
    for key in ("url", "source", "published"):
        if doc.metadata.get(key):
            lines.append(f"{key}: {doc.metadata[key]}")
    lines.append(" ".join(doc.text.split())[:DOC_CHARS_IN_PROMPT])
    return "\n".join(lines)


def _entries(data: Any) -> list[Any] | None:
    if isinstance(data, list):
        return data
    if isinstance(data, dict):
        for key in ("evaluations", "results", "articles", "documents", "items"):
            if isinstance(data.get(key), list):
                return data[key]
        if all(c in data for c in CRITERIA):
            return [data]  # one document, answered as a bare object
    return None


def _criterion(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) and 1.0 <= number <= 5.0 else None


def _match(entry: dict, documents: list[Document]) -> int | None:
    """The index of the document an entry is about: by its number, its id or its URL."""
    for key in ("id", "number", "index", "document", "document_id"):
        value = entry.get(key)
        if isinstance(value, bool) or value is None:
            continue
        text = str(value).strip("[] ")
        if (isinstance(value, (int, float)) and math.isfinite(value)) or (isinstance(value, str) and text.isdigit()):
            n = int(float(text))
            if 1 <= n <= len(documents):
                return n - 1
        for i, doc in enumerate(documents):
            if str(value) == doc.id:
                return i
    url = entry.get("url")
    if url:
        return next((i for i, d in enumerate(documents) if d.metadata.get("url") == url), None)
    return None


def parse_evaluations(text: str, documents: list[Document]) -> Scoring:
    """An LLM reply as a ``Scoring``; never raises: what cannot be used is kept and said in ``error``."""
    try:
        entries = _entries(parse_json_reply(text))
    except LLMError as exc:
        return keep_all(documents, f"malformed evaluation reply, every result kept: {exc}")
    if entries is None:
        return keep_all(documents, "evaluation reply is JSON but not a list of evaluations, every result kept: "
                                   f"{text[:200]!r}")
    found: dict[int, Evaluation] = {}
    invalid = 0
    for entry in entries:
        index = _match(entry, documents) if isinstance(entry, dict) else None
        scores = {c: _criterion(entry.get(c)) for c in CRITERIA} if isinstance(entry, dict) else {}
        if index is None or any(v is None for v in scores.values()):
            invalid += 1
            continue
        # None of the scores is None here: such an entry is invalid.
        checked = cast(dict[str, float], scores)
        found[index] = Evaluation(document_id=documents[index].id, **scores, overall=overall(checked),
                                  reasoning=str(entry.get("reasoning") or "")[:500])
    if not found:
        return keep_all(documents, f"no usable evaluation in the reply ({len(entries)} entries), every result kept")
    evaluations = [found.get(i) or Evaluation(document_id=d.id, reasoning="not in the evaluation reply: kept")
                   for i, d in enumerate(documents)]
    missing = len(documents) - len(found)
    error = None
    if missing or invalid:
        error = (f"{missing} of {len(documents)} results had no usable evaluation and were kept; "
                 f"{invalid} entries unusable")
    return Scoring(method="llm", evaluations=evaluations, error=error)


class LLMScorer:
    def __init__(self, llm: LLMClient, timeout_s: float = 20.0) -> None:
        self.llm, self.timeout_s = llm, timeout_s

    def score(self, query: str, documents: list[Document], threshold: float = 4.0) -> Scoring:
        if not documents:
            return Scoring(method="llm", evaluations=[])
        head = f"Query: {query}\nThreshold: {threshold:g}\n\nDocuments:\n\n"
        system = {"role": "system", "content": _SYSTEM}
        # Documents past the model's context are not shown: like any the reply leaves out, they are kept unscored.
        reply_tokens = REPLY_BASE_TOKENS + TOKENS_PER_EVALUATION * len(documents)
        fitted = fit_texts(self.llm, [system, {"role": "user", "content": head}],
                           [_doc_block(i, d) for i, d in enumerate(documents, start=1)], reply_tokens)
        if not fitted.texts:
            return keep_all(documents, f"evaluation not asked, every result kept: {fitted.note()}")
        try:
            reply = self.llm.reply([system, {"role": "user", "content": head + "\n\n".join(fitted.texts)}],
                                   timeout_s=self.timeout_s, temperature=0.3, max_tokens=reply_tokens,
                                   json_schema=evaluations_schema(len(fitted.texts)))
        except LLMError as exc:
            return keep_all(documents, f"evaluation call failed, every result kept: {exc}")
        scoring = parse_evaluations(reply.text, documents)
        if reply.truncated and scoring.method == "keep_all":
            scoring = keep_all(documents, f"evaluation reply cut at max_tokens ({reply_tokens}), every result kept")
        if fitted.changed:
            scoring = scoring.model_copy(update={"error": "; ".join(filter(None, [fitted.note(), scoring.error]))})
        return scoring


# --- offline ------------------------------------------------------------------------------------------------------

def _scale(value: float) -> float:
    """[0, 1] -> [1, 5]."""
    return round(1.0 + 4.0 * min(1.0, max(0.0, value)), 3)


class OfflineScorer:
    def __init__(self, analyzer: KeywordAnalyzer, embed: Embed | None = None, doc_vectors: DocVectors | None = None,
                 authority: dict[str, float] | None = None, blocked_domains: list[str] | None = None,
                 half_life_days: float | None = None, today: datetime | None = None) -> None:
        self.analyzer, self.embed, self.doc_vectors = analyzer, embed, doc_vectors
        self.authority = authority or {}
        self.blocked_domains = DEFAULT_BLOCKED_DOMAINS if blocked_domains is None else blocked_domains
        self.half_life_days = half_life_days
        self.today = (today or datetime.now(UTC)).date()

    def _vectors(self, query: str, documents: list[Document]) -> tuple[list[float] | None, dict[str, list[float]]]:
        if self.embed is None:
            return None, {}
        try:
            query_vector = self.embed([query])[0]
            found = self.doc_vectors(documents) if self.doc_vectors is not None else {}
            missing = [d for d in documents if d.id not in found]
            if missing:
                vectors = self.embed([f"{d.title}. {d.text}" for d in missing])
                found.update({d.id: v for d, v in zip(missing, vectors)})
            return query_vector, found
        except Exception:  # noqa: BLE001 - without vectors the other relevance signals still score
            return None, {}

    def score(self, query: str, documents: list[Document], threshold: float = 4.0) -> Scoring:
        query_vector, vectors = self._vectors(query, documents)
        evaluations = []
        for doc in documents:
            signals = {"terms": coverage(self.analyzer, query, f"{doc.title} {doc.text}"),
                       "retrieval": min(1.0, max(0.0, doc.score))}
            if query_vector is not None and doc.id in vectors:
                cos = cosine(query_vector, vectors[doc.id])
                signals["embedding"] = (cos - COSINE_FLOOR) / (COSINE_CEILING - COSINE_FLOOR)
            relevance = _scale(sum(min(1.0, max(0.0, v)) for v in signals.values()) / len(signals))
            scores = {"relevance": relevance}
            imputed = []
            # Measured on SciFact, a specificity proxy for actionability (share of sentences with names, numbers,
            # dates) discarded relevant abstracts for their prose style: no retrieval signal measures it.
            for name, value in (("actionability", None), ("source_quality", self._source_quality(doc)),
                                ("recency_impact", self._recency(doc))):
                if value is None:
                    imputed.append(name)
                scores[name] = relevance if value is None else value
            reasoning = ", ".join(f"{k} {v:.2f}" for k, v in signals.items())
            evaluations.append(Evaluation(document_id=doc.id, **scores, overall=overall(scores), imputed=imputed,
                                          reasoning=f"signals: {reasoning}"))
        return Scoring(method="offline", evaluations=evaluations)

    def _source_quality(self, doc: Document) -> float | None:
        if blocked_domain(url_host(doc.metadata.get("url")), self.blocked_domains):
            return 1.0
        source = doc.metadata.get("source")
        if source is not None and str(source) in self.authority:
            return _scale(self.authority[str(source)])
        return None

    def _recency(self, doc: Document) -> float | None:
        if self.half_life_days is None:
            return None
        meta = doc.metadata
        published = published_date(meta.get("published") or meta.get("published_date") or meta.get("date"))
        if published is None:
            return None
        age_days = max(0, (self.today - published).days)
        return _scale(math.pow(0.5, age_days / self.half_life_days))
