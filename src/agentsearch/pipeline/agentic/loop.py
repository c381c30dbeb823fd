"""The iterative mode as a step function over a small, JSON-serialisable state.

One iteration: search each of the state's queries (skipping what this run already saw — the seen-memo — and what
the user was shown by earlier runs), evaluate the first ``per_iteration`` new results against the original query,
keep those at or above the iteration's threshold, and record all of it. Then ``next_action`` decides:

    stop "target_reached"    when at least ``target`` results are kept
    stop "budget_exhausted"  when the budget of iterations is spent
    stop "no_new_results"    when the last iteration found nothing new to evaluate
    stop "sufficient"        when the sufficiency grader says the kept results answer the query
    continue                 otherwise: with the refined query and the grader's follow-up queries

With an LLM scoring the batches and the offline tools given as ``fallback_*``, each LLM-scored batch is checked
against the retrieval (``guard.check_agreement``): when the model disagrees with it, that batch is judged by the
offline scorer and the rest of the run evaluates, refines and grades offline (``LoopState.llm_off``, the
iteration's ``guard``).

The grader runs only when its answer can change the decision (short of the target, budget left). The state is all
a successor needs, so a Celery task runs one step and enqueues the next one instead of waiting on it.

Usage::

    state = LoopState.start("solar output 2025", IterativeConfig(target=3))
    tools = LoopTools(search=lambda q, k: retriever.search(name, q, SearchConfig(top_k=k)).documents,
                      scorer=OfflineScorer(analyzer), refiner=OfflineRefiner(analyzer), grader=OfflineGrader(analyzer))
    while next_action(state).action == "continue":
        state = run_iteration(state, tools)
    [j.document for j in final_documents(state)], state.stop_reason, state.history
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Literal

from pydantic import BaseModel, Field

from agentsearch.pipeline.agentic.config import IterativeConfig
from agentsearch.pipeline.agentic.guard import DISAGREES, GuardCheck, check_agreement
from agentsearch.pipeline.agentic.refine import Refinement, Refiner
from agentsearch.pipeline.agentic.scoring import Evaluation, Scorer, judge
from agentsearch.pipeline.agentic.sufficiency import Grade, Grader, choose_budget
from agentsearch.pipeline.documents import Document

LOOP_STATE_VERSION: Final = 1
MAX_SEARCH_TOP_K = 1000
# New candidates gathered beyond per_iteration, so results skipped as seen by earlier runs leave no gap.
CANDIDATE_FACTOR = 3

Search = Callable[[str, int], list[Document]]
SkipSeen = Callable[[list[Document]], tuple[list[Document], list[dict[str, Any]]]]


class JudgedDocument(BaseModel):
    document: Document
    evaluation: Evaluation
    iteration: int
    query: str


class IterationRecord(BaseModel):
    iteration: int
    queries: list[str]
    threshold: float
    base_threshold: float
    method: str
    evaluated: int
    skipped_memo: int = Field(description="Results this run had already seen (not evaluated again).")
    skipped_earlier: list[dict[str, Any]] = Field(
        default_factory=list, description="Results the user was shown by earlier runs, with why they match.")
    kept: int
    discarded: int
    kept_total: int
    evaluation_error: str | None = None
    guard: GuardCheck | None = Field(None, description="The check of the LLM's scores against the retrieval.")
    grade: Grade | None = None
    refinement: Refinement | None = None
    next_queries: list[str] = Field(default_factory=list)
    decision: str = ""
    duration_ms: float = 0.0


class Decision(BaseModel):
    action: Literal["continue", "stop"]
    reason: str


class LoopState(BaseModel):
    schema_version: Literal[1] = LOOP_STATE_VERSION
    query: str
    config: IterativeConfig
    budget: int = Field(ge=1)
    iteration: int = 0
    queries: list[str]
    kept: list[JudgedDocument] = Field(default_factory=list)
    discarded: list[JudgedDocument] = Field(default_factory=list)
    seen: list[str] = Field(default_factory=list, description="Memo keys: 'id:<collection>/<doc>' and 'url:<url>'.")
    history: list[IterationRecord] = Field(default_factory=list)
    stop_reason: str | None = None
    llm_off: str | None = Field(None, description="Why the LLM stopped being used ('llm_disagrees_with_retrieval').")
    llm_off_iteration: int | None = Field(None, description="The iteration whose check turned the LLM off.")

    @classmethod
    def start(cls, query: str, config: IterativeConfig) -> LoopState:
        return cls(query=query, config=config, budget=config.max_iterations or choose_budget(query), queries=[query])

    def dump(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    @classmethod
    def load(cls, payload: dict[str, Any]) -> LoopState:
        return cls.model_validate(payload)


@dataclass
class LoopTools:
    search: Search
    scorer: Scorer
    refiner: Refiner
    grader: Grader | None = None
    skip_seen: SkipSeen | None = None
    # The offline tools the guard falls back to when the LLM's scores disagree with the retrieval (None: no guard).
    fallback_scorer: Scorer | None = None
    fallback_refiner: Refiner | None = None
    fallback_grader: Grader | None = None

    def current(self, state: LoopState) -> tuple[Scorer, Refiner, Grader | None]:
        """The scorer, refiner and grader this iteration uses: the offline ones once the guard turned the LLM off."""
        if state.llm_off is None or self.fallback_scorer is None:
            return self.scorer, self.refiner, self.grader
        return (self.fallback_scorer, self.fallback_refiner or self.refiner,
                self.fallback_grader or self.grader)


def memo_keys(doc: Document) -> list[str]:
    keys = [f"id:{doc.metadata.get('collection_id', '')}/{doc.id}"]
    if doc.metadata.get("url"):
        keys.append(f"url:{doc.metadata['url']}")
    return keys


def next_action(state: LoopState) -> Decision:
    """Continue or stop, from the state alone (what a task decides before enqueuing its successor)."""
    if state.stop_reason:
        return Decision(action="stop", reason=state.stop_reason)
    if not state.history:
        return Decision(action="continue", reason="start")
    last = state.history[-1]
    if len(state.kept) >= state.config.target:
        return Decision(action="stop", reason="target_reached")
    if state.iteration >= state.budget:
        return Decision(action="stop", reason="budget_exhausted")
    if last.evaluated == 0:
        return Decision(action="stop", reason="no_new_results")
    if last.grade is not None and last.grade.sufficient:
        return Decision(action="stop", reason="sufficient")
    return Decision(action="continue", reason="short_of_target")


def _gather(state: LoopState, search: Search, limit: int) -> tuple[list[tuple[Document, str]], int]:
    """New results of every query, interleaved (first of each, then second of each...), without memo'd ones."""
    memo = set(state.seen)
    top_k = min(MAX_SEARCH_TOP_K, limit + sum(1 for k in state.seen if k.startswith("id:")))
    per_query = [(q, search(q, top_k)) for q in state.queries]
    picked: list[tuple[Document, str]] = []
    taken: set[str] = set()
    skipped = 0
    for rank in range(max((len(docs) for _, docs in per_query), default=0)):
        for query, docs in per_query:
            if rank >= len(docs):
                continue
            keys = memo_keys(docs[rank])
            if any(k in taken for k in keys):
                continue  # another query of this iteration found it first (or the same URL under another id)
            if any(k in memo for k in keys):
                skipped += 1
                continue
            taken.update(keys)
            picked.append((docs[rank], query))
    return picked[:limit], skipped


def run_iteration(state: LoopState, tools: LoopTools) -> LoopState:
    started = time.perf_counter()
    state = state.model_copy(deep=True)
    config = state.config
    n = state.iteration + 1
    candidates, skipped_memo = _gather(state, tools.search, config.per_iteration * CANDIDATE_FACTOR)
    earlier: list[dict[str, Any]] = []
    if tools.skip_seen is not None and candidates:
        fresh, earlier = tools.skip_seen([d for d, _ in candidates])
        fresh_keys = {memo_keys(d)[0] for d in fresh}
        for doc, _ in candidates:
            if memo_keys(doc)[0] not in fresh_keys:
                state.seen.extend(memo_keys(doc))
        candidates = [(d, q) for d, q in candidates if memo_keys(d)[0] in fresh_keys]
    batch = candidates[: config.per_iteration]
    # Found but not evaluated: not memo'd (a later iteration may evaluate them), only the refiner's background.
    background = [d for d, _ in candidates[config.per_iteration:]]
    base = config.thresholds.base(n)
    scorer, refiner, grader = tools.current(state)
    documents = [d for d, _ in batch]
    scoring = scorer.score(state.query, documents, threshold=base)
    judgement = judge(scoring, base, config.thresholds)
    guard = None
    if scoring.method == "llm" and config.llm_guard and tools.fallback_scorer is not None and state.llm_off is None:
        offline = judge(tools.fallback_scorer.score(state.query, documents, threshold=base), base,
                        config.thresholds)
        guard = check_agreement(judgement, offline, [d.score for d in documents],
                                config.llm_guard_min_rank_correlation)
        if guard.disagrees:
            # The batch is judged by the retrieval's signals, and so is everything after it in this run.
            judgement = offline.model_copy(update={"error": f"LLM scores not used: {guard.detail}"})
            state.llm_off, state.llm_off_iteration = DISAGREES, n
            scorer, refiner, grader = tools.current(state)
    kept = discarded = 0
    for (doc, query), evaluation in zip(batch, judgement.evaluations):
        judged = JudgedDocument(document=doc, evaluation=evaluation, iteration=n, query=query)
        if evaluation.decision == "keep":
            state.kept.append(judged)
            kept += 1
        else:
            state.discarded.append(judged)
            discarded += 1
        state.seen.extend(memo_keys(doc))
    state.iteration = n
    record = IterationRecord(
        iteration=n, queries=list(state.queries), threshold=judgement.threshold, base_threshold=base,
        method=judgement.method, evaluated=len(batch), skipped_memo=skipped_memo, skipped_earlier=earlier,
        kept=kept, discarded=discarded, kept_total=len(state.kept), evaluation_error=judgement.error, guard=guard,
    )
    state.history.append(record)
    if config.sufficiency and grader is not None and next_action(state).action == "continue":
        record.grade = grader.grade(state.query, [j.document for j in state.kept])
    decision = next_action(state)
    if decision.action == "stop":
        state.stop_reason = decision.reason
    else:
        refinement = refiner.refine(state.query, state.queries[0], [j.document for j in state.kept],
                                          [(j.document, j.evaluation) for j in state.discarded], background)
        follow_ups = record.grade.follow_up_queries if record.grade is not None else []
        queries: list[str] = []
        for q in [refinement.query, *follow_ups]:
            if q.strip() and q.strip().lower() not in {x.lower() for x in queries}:
                queries.append(q.strip())
        state.queries = queries[: config.max_queries]
        record.refinement = refinement
        record.next_queries = list(state.queries)
    record.decision = decision.action if decision.action == "continue" else f"stop: {decision.reason}"
    record.duration_ms = round((time.perf_counter() - started) * 1000, 3)
    return state


def run_loop(state: LoopState, tools: LoopTools,
             on_iteration: Callable[[LoopState], None] | None = None) -> LoopState:
    """Every iteration in this thread (evaluation, scripts); jobs run one iteration per task instead."""
    while next_action(state).action == "continue":
        state = run_iteration(state, tools)
        if on_iteration is not None:
            on_iteration(state)
    return state


def final_documents(state: LoopState) -> list[JudgedDocument]:
    """The kept results, best first (an unscored, kept-by-fallback result ranks at its iteration's threshold), cut to
    the target."""
    thresholds = {r.iteration: r.threshold for r in state.history}

    def rank(j: JudgedDocument) -> tuple[float, float]:
        score = j.evaluation.overall if j.evaluation.overall is not None else thresholds.get(j.iteration, 0.0)
        return -score, -j.document.score

    return sorted(state.kept, key=rank)[: state.config.target]
