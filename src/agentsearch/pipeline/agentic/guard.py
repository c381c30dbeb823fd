"""Does the LLM's evaluation of a batch agree with the retrieval? If not, the loop stops trusting it.

A weak model scores results almost at random: it discards the retrieval's best results and keeps worse ones, and
the loop's kept set then holds fewer relevant documents than a plain search would return. The loop cannot know
which results are relevant, but it can check the model against evidence it already has: the retrieval's own
scores and the offline scorer's decisions on the same batch (terms, embedding cosine, retrieval score). The model
disagrees with the retrieval when either

- ``rank``: the rank correlation (Kendall tau-b) of its overall scores with the retrieval scores of the batch is
  below ``min_rank_correlation`` (default 0: it orders the batch against the retrieval more often than with it).
  Needs at least ``MIN_RANKED`` scored results and scores that are not all tied (ties carry no order); or
- ``keep``: the offline scorer keeps at least one result of the batch and the model keeps none of them.

When it disagrees, the loop judges that batch with the offline scorer instead and evaluates, refines and grades
offline for the rest of the run (``LoopState.llm_guard``, the iteration's ``IterationRecord.guard``).

Usage::

    check = check_agreement(llm_judgement, offline_judgement, [d.score for d in batch])
    check.disagrees, check.rule, check.rank_correlation
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from agentsearch.pipeline.agentic.scoring import Judgement

DISAGREES = "llm_disagrees_with_retrieval"
DEFAULT_MIN_RANK_CORRELATION = 0.0
# Fewer scored results than this give a rank correlation that says nothing (two results: +1 or -1 by a coin toss).
MIN_RANKED = 3


class GuardCheck(BaseModel):
    disagrees: bool
    rule: str | None = Field(None, description="Which rule fired: 'rank' or 'keep' (None when it agrees).")
    rank_correlation: float | None = Field(
        None, description="Kendall tau-b of the LLM's overall scores with the retrieval scores; None when undefined.")
    min_rank_correlation: float
    llm_kept: int
    offline_kept: int
    both_kept: int
    detail: str = ""


def kendall_tau_b(xs: list[float], ys: list[float]) -> float | None:
    """Kendall's tau-b (ties in either list allowed); None when one list is all ties or too short."""
    if len(xs) != len(ys) or len(xs) < 2:
        return None
    concordant = discordant = ties_x = ties_y = 0
    for i in range(len(xs)):
        for j in range(i + 1, len(xs)):
            dx, dy = xs[i] - xs[j], ys[i] - ys[j]
            if dx == 0 and dy == 0:
                continue
            if dx == 0:
                ties_x += 1
            elif dy == 0:
                ties_y += 1
            elif (dx > 0) == (dy > 0):
                concordant += 1
            else:
                discordant += 1
    denominator = ((concordant + discordant + ties_x) * (concordant + discordant + ties_y)) ** 0.5
    if denominator == 0 or concordant + discordant == 0:
        return None
    return round((concordant - discordant) / denominator, 4)


def check_agreement(llm: Judgement, offline: Judgement, retrieval_scores: list[float],
                    min_rank_correlation: float = DEFAULT_MIN_RANK_CORRELATION) -> GuardCheck:
    """The guard's verdict on one batch: ``llm`` and ``offline`` judge the same documents, in the same order as
    ``retrieval_scores``."""
    llm_keep = {e.document_id for e in llm.evaluations if e.decision == "keep"}
    offline_keep = {e.document_id for e in offline.evaluations if e.decision == "keep"}
    pairs = [(e.overall, s) for e, s in zip(llm.evaluations, retrieval_scores) if e.overall is not None]
    tau = kendall_tau_b([p[0] for p in pairs], [p[1] for p in pairs]) if len(pairs) >= MIN_RANKED else None
    common = dict(min_rank_correlation=min_rank_correlation, rank_correlation=tau, llm_kept=len(llm_keep),
                  offline_kept=len(offline_keep), both_kept=len(llm_keep & offline_keep))
    if tau is not None and tau < min_rank_correlation:
        return GuardCheck(disagrees=True, rule="rank", **common,
                          detail=f"the LLM's scores rank the batch against the retrieval (tau {tau:+.2f} < "
                                 f"{min_rank_correlation:+.2f})")
    if offline_keep and not llm_keep & offline_keep:
        return GuardCheck(disagrees=True, rule="keep", **common,
                          detail=f"the LLM kept none of the {len(offline_keep)} results the retrieval signals keep")
    return GuardCheck(disagrees=False, **common)
