"""Post-search: re-rank the retrieved documents with signals the first-stage search does not combine.

Offline (no API key), the new score is a weighted mean of three components, each in [0, 1]:

- ``dense``: passage-level semantic similarity. Each document is cut into windows of whole sentences; a window's
  vector is the normalised sum of its sentences' vectors and its title's (mean pooling, as the model itself pools
  a text's tokens), and the document's value is the best cosine of a window to the query. A long document that
  answers the query in one paragraph is no longer diluted by the rest of it. The sentence and title vectors come
  from ``ctx.tools.embed_known`` when the toolbox has it (the vectors ingestion stored with each chunk are read,
  not computed again), else ``ctx.tools.embed``: composing windows from sentences is what lets a job read them.
- ``bm25``: Okapi BM25 over the candidate set itself (Snowball-stemmed terms from ``KeywordAnalyzer``, idf over the
  candidates), divided by the best candidate's value.
- ``proximity``: how close together the query's terms occur: ``coverage / (1 + ln(window / matched))`` where
  ``window`` is the smallest span of content words holding every matched query term.

Without the toolbox (``ctx.tools`` is None) or when embedding fails, ``dense`` is left out, the other weights are
renormalised and ``metadata["rerank"]["dense"]`` says why. ``retrieval_weight`` can mix in the first-stage score
(min-max normalised over the candidates). The documents are re-sorted by the new score; each gets its components
in ``metadata["rerank"]``.

LLM listwise (``mode: "llm"``, or ``"auto"`` when an endpoint is configured): the offline ranking's top
``llm_top_n`` documents are sent as numbered passages (as many as the model's context holds: the others keep their
offline order after the ranked ones, ``metadata["rerank"]["llm_budget"]`` says so) and the model replies with the
numbers, best first (``{"ranking": [3, 1, 2]}``, asked by JSON schema; a bare list is read too). The reply is parsed
defensively: unknown, repeated or out-of-range numbers are ignored (and reported), documents it leaves out keep their
offline order after the ones it ranked; a reply with no usable number, or an LLM error, keeps the offline order and
records the problem in ``metadata["rerank"]["llm_error"]``. In LLM mode the scores are by
position (``1 - rank / n``), so that every later step that sorts by score keeps the model's order.

Usage::

    agent = Reranker({"dense_weight": 0.6, "bm25_weight": 0.25, "proximity_weight": 0.15})
    out = agent.run(PostSearchInput(documents=docs, query="When did Harrow Ridge start operating?"), ctx)
    out.documents[0].metadata["rerank"]   # {"score": 0.81, "dense": 0.74, "bm25": 1.0, "proximity": 0.62, ...}
    out.metadata["rerank"]                # {"method": "offline", "weights": {...}, "moved": 3, ...}
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Any, Literal

import numpy as np
import Stemmer
from pydantic import Field, field_validator, model_validator

from agentsearch.pipeline.agents.base import (
    AgentConfig,
    AgentContext,
    Document,
    PostSearchAgent,
    PostSearchInput,
    PostSearchOutput,
)
from agentsearch.pipeline.platform.llm import LLMError
from agentsearch.pipeline.platform.prompt_budget import fit_texts
from agentsearch.pipeline.retrieval.analyzer import KeywordAnalyzer
from agentsearch.pipeline.text import whole_sentences

LLM_SYSTEM = (
    "You rank search results. Given a query and numbered passages, order the passages by how well they answer the "
    'query, best first. Reply with only JSON holding the passage numbers, for example {"ranking": [3, 1, 2]}.'
)
REPLY_BASE_TOKENS = 16
TOKENS_PER_NUMBER = 4


def _closing(n: int) -> str:
    return f"\n\nReply with the JSON of all {n} passage numbers, best first."


# --- offline components ---------------------------------------------------------------------------------------


# How much a document's title weighs in each of its windows' vectors, beside the window's sentences (each 1). Set
# on SciFact (184 claims, the first 1,000 abstracts, hybrid top 20 reranked; nDCG@10): windows embedded whole, the
# title in front, 0.8094; composed with title weight 0 / 0.5 / 1 / 2 / 3: 0.8015 / 0.8065 / 0.8066 / 0.8067 /
# 0.8107. In a window embedded whole the title is about a quarter of the tokens, and often holds the query's topic.
TITLE_WEIGHT = 3.0


def sentences_of(text: str) -> list[str]:
    """The sentences windows are made of: the whole sentences ingestion stored vectors for."""
    return whole_sentences(text) or ([text.strip()] if text.strip() else [])


def window_starts(count: int, window: int, max_passages: int) -> list[int]:
    """Where each window of ``window`` sentences starts (at most ``max_passages``, spread over the whole text)."""
    starts = list(range(max(1, count - window + 1)))
    if len(starts) > max_passages:
        step = len(starts) / max_passages
        starts = sorted({int(i * step) for i in range(max_passages)})
    return starts


def passages(title: str, text: str, window: int, max_passages: int, include_title: bool = True) -> list[str]:
    """Overlapping windows of ``window`` sentences (at most ``max_passages``, spread over the whole text), as text."""
    sentences = sentences_of(text)
    if not sentences:
        return [title] if title else []
    prefix = f"{title}: " if include_title and title else ""
    return [prefix + " ".join(sentences[s : s + window]) for s in window_starts(len(sentences), window, max_passages)]


def bm25_scores(query_terms: list[str], documents_terms: list[list[str]], k1: float = 1.5,
                b: float = 0.75) -> list[float]:
    """Okapi BM25 of each document for the query, with idf computed over these documents only."""
    n = len(documents_terms)
    if n == 0:
        return []
    lengths = [len(t) for t in documents_terms]
    avg_len = sum(lengths) / n or 1.0
    counts = [Counter(t) for t in documents_terms]
    unique_query = list(dict.fromkeys(query_terms))
    df = {q: sum(1 for c in counts if q in c) for q in unique_query}
    idf = {q: math.log(1 + (n - df[q] + 0.5) / (df[q] + 0.5)) for q in unique_query}
    scores = []
    for c, length in zip(counts, lengths):
        score = 0.0
        for q in unique_query:
            tf = c.get(q, 0)
            if tf:
                score += idf[q] * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / avg_len))
        scores.append(score)
    return scores


def smallest_window(tokens: list[str], wanted: set[str]) -> tuple[int, int]:
    """(matched distinct terms, length of the smallest token window that holds all of them); (0, 0) if none."""
    present = wanted & set(tokens)
    if not present:
        return 0, 0
    need, have, best = len(present), Counter[str](), len(tokens)
    left = 0
    covered = 0
    for right, token in enumerate(tokens):
        if token in present:
            have[token] += 1
            if have[token] == 1:
                covered += 1
        while covered == need:
            best = min(best, right - left + 1)
            out = tokens[left]
            if out in present:
                have[out] -= 1
                if have[out] == 0:
                    covered -= 1
            left += 1
    return need, best


def proximity_score(query_terms: list[str], tokens: list[str]) -> float:
    wanted = set(query_terms)
    if not wanted:
        return 0.0
    matched, window = smallest_window(tokens, wanted)
    if matched == 0:
        return 0.0
    coverage = matched / len(wanted)
    return coverage / (1.0 + math.log(window / matched))


def minmax(values: list[float]) -> list[float]:
    if not values:
        return []
    lo, hi = min(values), max(values)
    return [1.0 if hi == lo else (v - lo) / (hi - lo) for v in values]


def _unit(vector: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm else vector


def _units(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0, 1.0, norms)


# --- the LLM reply ---------------------------------------------------------------------------------------------


def parse_ranking(reply: Any, n: int) -> tuple[list[int], list[str]]:
    """0-based order from a reply meant to be a JSON list of 1-based passage numbers, and what was wrong with it.

    Raises ``ValueError`` when nothing usable is in it.
    """
    if isinstance(reply, dict):
        for key in ("ranking", "order", "indices", "passages", "result", "results"):
            if isinstance(reply.get(key), list):
                reply = reply[key]
                break
    if not isinstance(reply, list):
        raise ValueError(f"expected a JSON list of passage numbers, got {type(reply).__name__}")
    order: list[int] = []
    problems: list[str] = []
    for item in reply:
        if isinstance(item, dict):
            item = next((item[k] for k in ("index", "id", "passage", "number") if k in item), None)
        number: int | None = None
        if isinstance(item, bool):
            number = None
        elif isinstance(item, int):
            number = item
        elif isinstance(item, float) and item.is_integer():
            number = int(item)
        elif isinstance(item, str) and (m := re.fullmatch(r"\s*\[?\s*(\d+)\s*\]?\s*", item)):
            number = int(m.group(1))
        if number is None:
            problems.append(f"ignored {str(item)[:40]!r}: not a passage number")
        elif not 1 <= number <= n:
            problems.append(f"ignored {number}: no such passage (1-{n})")
        elif number - 1 in order:
            problems.append(f"ignored repeated {number}")
        else:
            order.append(number - 1)
    if not order:
        detail = f" ({'; '.join(problems[:3])})" if problems else ""
        raise ValueError(f"the reply holds no usable passage number{detail}")
    return order, problems


class Reranker(PostSearchAgent):
    agent_id = "reranker"
    version = "2"  # 2: windows composed from sentence vectors
    description = ("Re-ranks documents by passage-level dense similarity, BM25 over the candidates and term "
                   "proximity; LLM listwise ranking when an endpoint is configured.")
    default_timeout_s = 60.0
    cache_ttl_s = 3600

    class Config(AgentConfig):
        mode: Literal["offline", "llm", "auto"] = Field(
            "offline", description="'llm' ranks with the LLM; 'auto' does when one is configured, else offline."
        )
        dense_weight: float = Field(0.5, ge=0.0)
        bm25_weight: float = Field(0.3, ge=0.0)
        proximity_weight: float = Field(0.2, ge=0.0)
        retrieval_weight: float = Field(0.0, ge=0.0, description="Weight of the first-stage score, min-max normalised.")
        passage_sentences: int = Field(2, ge=1, le=10, description="Sentences per passage window.")
        max_passages_per_document: int = Field(12, ge=1, le=100)
        include_title: bool = Field(True, description="Put the document title in front of each passage.")
        language: str = Field("english", description="Snowball stemmer for BM25 and proximity terms.")
        bm25_k1: float = Field(1.5, gt=0.0)
        bm25_b: float = Field(0.75, ge=0.0, le=1.0)
        llm_top_n: int = Field(10, ge=2, le=50, description="How many of the offline top documents the LLM orders.")
        llm_passage_chars: int = Field(700, ge=100, le=4000)
        llm_timeout_s: float = Field(15.0, gt=0.0, le=120.0)

        @field_validator("language")
        @classmethod
        def _known_language(cls, language: str) -> str:
            if language not in Stemmer.algorithms():
                raise ValueError(f"no stemmer for {language!r}")
            return language

        @model_validator(mode="after")
        def _some_weight(self) -> Reranker.Config:
            if self.dense_weight + self.bm25_weight + self.proximity_weight + self.retrieval_weight <= 0:
                raise ValueError("at least one weight must be above 0")
            return self

    config: Config

    def run(self, inp: PostSearchInput, ctx: AgentContext) -> PostSearchOutput:
        cfg = self.config
        docs = inp.documents
        if not docs:
            return PostSearchOutput(documents=[], metadata={"rerank": {"method": "none", "reason": "no documents"}})

        analyzer = KeywordAnalyzer(cfg.language)
        query_terms = analyzer.terms(inp.query)
        doc_terms = [analyzer.terms(f"{d.title} {d.text}") for d in docs]
        bm25_raw = bm25_scores(query_terms, doc_terms, cfg.bm25_k1, cfg.bm25_b)
        top_bm25 = max(bm25_raw)
        components: dict[str, list[float]] = {
            "bm25": [s / top_bm25 if top_bm25 > 0 else 0.0 for s in bm25_raw],
            "proximity": [proximity_score(query_terms, t) for t in doc_terms],
            "retrieval": minmax([d.score for d in docs]),
        }
        weights = {"dense": cfg.dense_weight, "bm25": cfg.bm25_weight, "proximity": cfg.proximity_weight,
                   "retrieval": cfg.retrieval_weight}
        summary: dict[str, Any] = {"method": "offline"}

        best_passages: list[str | None] = [None] * len(docs)
        if cfg.dense_weight > 0:
            dense, best_passages, problem = self._dense(inp.query, docs, ctx)
            if dense is None:
                weights["dense"] = 0.0
                summary["dense"] = f"unavailable: {problem}"
            else:
                components["dense"] = dense
                summary["dense"] = "ok"
        weights = {k: w for k, w in weights.items() if w > 0}
        if not weights:  # only dense was weighted and it is unavailable: fall back to BM25 + proximity
            weights = {"bm25": 0.6, "proximity": 0.4}
            summary["fallback"] = "dense similarity was the only weighted component; used bm25 0.6 + proximity 0.4"
        total = sum(weights.values())
        summary["weights"] = {k: round(w / total, 4) for k, w in weights.items()}

        scored = []
        for i in range(len(docs)):
            parts = {k: round(float(components[k][i]), 6) for k in weights}
            score = sum(weights[k] * components[k][i] for k in weights) / total
            scored.append((round(float(score), 6), i, parts))
        offline_order = [i for _, i, _ in sorted(scored, key=lambda s: (-s[0], s[1]))]

        order = offline_order
        want_llm = cfg.mode == "llm" or (cfg.mode == "auto" and ctx.llm is not None)
        if want_llm:
            order = self._llm_order(inp.query, docs, offline_order, best_passages, ctx, summary)

        result: list[Document] = []
        for rank, i in enumerate(order):
            offline_score, _, parts = scored[i]
            doc = docs[i]
            info = {"score": offline_score, **parts, "original_score": doc.score, "original_rank": i + 1}
            score = offline_score
            if summary["method"] == "llm":
                score = round(1.0 - rank / len(order), 6)
                info["score"] = score
                info["offline_score"] = offline_score
                info["offline_rank"] = offline_order.index(i) + 1
            result.append(doc.model_copy(update={"score": score, "metadata": {**doc.metadata, "rerank": info}}))
        summary["moved"] = sum(1 for rank, i in enumerate(order) if rank != i)
        summary["order"] = [docs[i].id for i in order]
        return PostSearchOutput(documents=result, metadata={"rerank": summary})

    def _dense(self, query: str, docs: list[Document], ctx: AgentContext):
        """Best window cosine per document, the best windows as text, or (None, [...], why) when it cannot be
        computed."""
        cfg = self.config
        embed_known: Any = getattr(ctx.tools, "embed_known", None)
        embed: Any = getattr(ctx.tools, "embed", None)
        if embed_known is None and embed is None:
            return None, [None] * len(docs), "no agent toolbox (ctx.tools) to embed with"
        per_doc = [sentences_of(d.text) for d in docs]
        titles = [d.title.strip() if cfg.include_title else "" for d in docs]
        texts = list(dict.fromkeys([query, *(s for ss in per_doc for s in ss), *(t for t in titles if t)]))
        try:
            raw = embed_known(texts, docs) if embed_known is not None else embed(texts)
            vectors = np.asarray(raw, dtype=np.float32)
        except Exception as exc:  # noqa: BLE001 - the other components still rank
            return None, [None] * len(docs), f"embedding failed: {type(exc).__name__}: {exc}"
        if vectors.ndim != 2 or len(vectors) != len(texts):
            return None, [None] * len(docs), "embedding returned the wrong number of vectors"
        row = {text: i for i, text in enumerate(texts)}
        query_vector = _unit(vectors[0])
        dense, best = [], []
        for _doc, sentences, title in zip(docs, per_doc, titles, strict=True):
            title_vector = TITLE_WEIGHT * vectors[row[title]] if title else 0.0
            if not sentences:
                dense.append(max(0.0, float(_unit(np.asarray(title_vector)) @ query_vector)) if title else 0.0)
                best.append(title or None)
                continue
            starts = window_starts(len(sentences), cfg.passage_sentences, cfg.max_passages_per_document)
            windows = np.stack([vectors[[row[s] for s in sentences[i : i + cfg.passage_sentences]]].sum(axis=0)
                                + title_vector for i in starts])
            sims = _units(windows) @ query_vector
            j = int(np.argmax(sims))
            dense.append(max(0.0, float(sims[j])))
            prefix = f"{title}: " if title else ""
            best.append(prefix + " ".join(sentences[starts[j] : starts[j] + cfg.passage_sentences]))
        return dense, best, None

    def _llm_order(self, query, docs, offline_order, best_passages, ctx, summary) -> list[int]:
        cfg = self.config
        llm = ctx.llm
        if llm is None:
            summary["llm_error"] = "no LLM endpoint configured; kept the offline order"
            return offline_order
        head = offline_order[: cfg.llm_top_n]
        bodies = []
        for i in head:
            doc = docs[i]
            body = best_passages[i] or (f"{doc.title}: {doc.text}" if doc.title else doc.text)
            body = " ".join(body.split())
            if len(body) > cfg.llm_passage_chars:
                body = body[: cfg.llm_passage_chars].rsplit(" ", 1)[0] + " …"
            bodies.append(body)
        reply_tokens = REPLY_BASE_TOKENS + TOKENS_PER_NUMBER * len(head)
        fixed = [{"role": "system", "content": LLM_SYSTEM},
                 {"role": "user", "content": f"Query: {query}\n\nPassages:\n" + _closing(len(head))}]
        # The passages past the model's context are not shown: they keep their offline order after the ranked ones.
        fitted = fit_texts(llm, fixed, bodies, reply_tokens)
        if len(fitted.texts) < 2:
            summary["llm_error"] = f"{fitted.note()}; kept the offline order"
            return offline_order
        if fitted.changed:
            summary["llm_budget"] = fitted.note()
        head, tail = head[: len(fitted.texts)], offline_order[len(fitted.texts):]
        lines = [f"[{n}] {body}" for n, body in enumerate(fitted.texts, start=1)]
        messages = [
            {"role": "system", "content": LLM_SYSTEM},
            {"role": "user", "content": f"Query: {query}\n\nPassages:\n" + "\n".join(lines) + _closing(len(head))},
        ]
        schema = {"type": "object", "required": ["ranking"], "properties": {"ranking": {
            "type": "array", "maxItems": len(head), "items": {"type": "integer"}}}}
        try:
            reply = llm.complete_json(messages, timeout_s=cfg.llm_timeout_s, max_tokens=reply_tokens,
                                      json_schema=schema)
            ranked, problems = parse_ranking(reply, len(head))
        except (LLMError, ValueError) as exc:
            summary["llm_error"] = f"{exc}; kept the offline order"
            return offline_order
        summary["method"] = "llm"
        summary["llm_ranked"] = len(head)
        if problems:
            summary["llm_problems"] = problems[:10]
        missing = [i for i in range(len(head)) if i not in ranked]
        if missing:
            summary["llm_missing"] = len(missing)
        return [head[k] for k in ranked + missing] + tail
