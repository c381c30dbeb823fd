"""A collection's quality, measured on its question set, and every measurement kept.

Each question goes the road a job's takes, in this process: ``Retriever.search`` (caching off) with the settings
measured, keeping the job's top-k; then ``answer_step`` (the LLM's answer when one is given, else the extractive one).
The figures:

- ``hit@5``: the question's document among the first five found; ``ndcg@10``: its place in the first ten (one relevant
  document, gain 1);
- ``gold_span_rate``: answers holding the question's answer span (case aside, citation marks read past);
- ``supported_rate``: the answers' cited sentences whose sources support them, of all cited sentences;
- ``fallback_rate``: with an LLM, answers delivered offline (None without one);
- ``latency_p50_ms``: the median of search and answer together.

A run that passes its deadline stops and is kept ``timed_out`` with the figures of the questions it reached.

Usage::

    figures, status = measure(services, collection_id, questions, RunSettings({"strategy": "hybrid"}, top_k=5))
    with db.session() as s:
        record_run(s, collection_id, "run", status, settings.as_json(), figures)
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from agentsearch.pipeline.eval.answers import holds_gold_span
from agentsearch.pipeline.eval.retrieval import ndcg_at, percentile
from agentsearch.pipeline.platform.tables.quality import EvalRunRow

if TYPE_CHECKING:  # types only: the services take seconds to load
    from agentsearch.pipeline.services import Services

# Figures where a higher value is better; the gate holds each of them to the tolerance (fallback_rate: lower is
# better). Latency is shown beside them, never gated: on a shared machine it moves with the load, not the change.
HIGHER_IS_BETTER = ("hit@5", "ndcg@10", "gold_span_rate", "supported_rate")
LOWER_IS_BETTER = ("fallback_rate",)


@dataclass(frozen=True)
class RunSettings:
    """What a run measures: the search overrides (``SearchConfig`` fields but top_k), the job's top-k, and the
    pre- and post-search agents (``AgentSpec``, as a job's snapshot holds them) around the search."""

    search: dict[str, Any] = field(default_factory=dict)
    top_k: int = 5
    agents: tuple[Any, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {"search": self.search, "top_k": self.top_k,
                "agents": [f"{a.agent_id}:{a.config_id}" for a in self.agents]}


@dataclass(frozen=True)
class Asked:
    """One question of the set as a run reads it."""

    question: str
    answer: str
    document_id: str


def ranked_ids(documents: Sequence[Any]) -> list[str]:
    """Document ids in the order found, each once (chunks of one document count as the document)."""
    return list(dict.fromkeys(d.id for d in documents))


def score_question(found: list[str], gold_document: str) -> tuple[bool, float]:
    """hit@5 and nDCG@10 of one question with one relevant document."""
    return gold_document in found[:5], ndcg_at(found, {gold_document: 1}, 10)


def _rate(count: float, of: int) -> float | None:
    return round(count / of, 4) if of else None


def measure(services: Services, collection_id: str, questions: Sequence[Asked], run: RunSettings, llm: Any = None,
            deadline: float | None = None, search_name: str | None = None, answers: bool = True,
            progress: Callable[[int], None] | None = None, each: list[float] | None = None
            ) -> tuple[dict[str, Any], str]:
    """The figures of ``run`` on ``questions`` and the run's status (``done``, or ``timed_out`` when ``deadline``, a
    ``time.monotonic()`` instant, passed first). ``search_name``: the vector store's collection, default the
    collection's own; ``answers`` False: the retrieval figures alone (the answer's are None); ``each``: a list that
    gets each question's nDCG@10, in order (a benchmark's bootstrap reads them)."""
    from agentsearch.pipeline.job.agent_call import post_search_step, pre_search_step
    from agentsearch.pipeline.job.job_state import JobState
    from agentsearch.pipeline.job.workflow import answer_step, search_config
    from agentsearch.pipeline.platform.tables.collections import milvus_collection_name

    settings = services.settings
    retriever = services.uncached_retriever()
    # In the order a job runs each stage: by priority, then agent id.
    pre, post = ([a for a in sorted(run.agents, key=lambda a: (a.priority, a.agent_id)) if a.stage == stage]
                 for stage in ("pre_search", "post_search"))
    name = search_name or milvus_collection_name(collection_id)
    hits = gold = fallbacks = 0
    ndcg = 0.0
    supported = cited = 0
    latencies: list[float] = []
    status = "done"
    for asked in questions:
        if deadline is not None and time.monotonic() > deadline:
            status = "timed_out"
            break
        started = time.perf_counter()
        state = JobState(job_id=f"eval-{uuid.uuid4().hex[:8]}", collection_id=collection_id, query=asked.question,
                         original_query=asked.question, top_k=run.top_k, search=dict(run.search))
        for spec in pre:
            state = pre_search_step(state, spec, services.runner, default_timeout_s=settings.default_agent_timeout_s)
        result = retriever.search(name, state.query, search_config(state, settings.search_defaults()),
                                  model=settings.embedding_model)
        state.documents = result.documents
        for spec in post:
            state = post_search_step(state, spec, services.runner, default_timeout_s=settings.default_agent_timeout_s)
        if answers:
            state = answer_step(state, llm=llm, embed=services.embedder.embed, language=settings.keyword_language,
                                embedding_model=settings.embedding_model, timeout_s=settings.answer_llm_timeout_s,
                                judge_timeout_s=settings.judge_llm_timeout_s)
        latencies.append((time.perf_counter() - started) * 1000)
        hit, gain = score_question(ranked_ids(state.documents), asked.document_id)
        hits += hit
        ndcg += gain
        if each is not None:
            each.append(gain)
        gold += holds_gold_span(state.answer or "", [asked.answer])
        cited += len(state.citations)
        supported += sum(c.status == "supported" for c in state.citations)
        fallbacks += state.metadata.get("answer", {}).get("method") != "llm"
        if progress:
            progress(1)
    n = len(latencies)
    figures = {
        "questions": n,
        "hit@5": _rate(hits, n),
        "ndcg@10": _rate(ndcg, n),
        "gold_span_rate": _rate(gold, n) if answers else None,
        "supported_rate": _rate(supported, cited) if answers else None,
        "fallback_rate": _rate(fallbacks, n) if llm is not None and answers else None,
        "latency_p50_ms": round(percentile(latencies, 0.5), 1),
    }
    return figures, status


def record_run(s: Session, collection_id: uuid.UUID, kind: str, status: str, settings: dict[str, Any],
               figures: dict[str, Any]) -> EvalRunRow:
    row = EvalRunRow(collection_id=collection_id, kind=kind, status=status, settings=settings, figures=figures,
                     questions=int(figures.get("questions") or 0))
    s.add(row)
    s.flush()
    return row


def run_out(row: EvalRunRow) -> dict[str, Any]:
    return {"id": str(row.id), "kind": row.kind, "status": row.status, "settings": row.settings,
            "figures": row.figures, "questions": row.questions, "created_at": row.created_at}


def runs_of(s: Session, collection_id: uuid.UUID, limit: int = 50) -> list[EvalRunRow]:
    """The collection's latest runs, oldest first (a chart's order)."""
    rows = s.scalars(select(EvalRunRow).where(EvalRunRow.collection_id == collection_id)
                     .order_by(EvalRunRow.created_at.desc()).limit(limit))
    return list(reversed(list(rows)))
