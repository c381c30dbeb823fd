"""The job graph as plain data: a pure function from a job's agent specs to a Celery canvas.

    chain(pre_search agents by priority -> core_search -> post_search agents by priority -> generate_answer
          -> chord(group(response agents), assemble))

With several collections, core_search becomes chord(group(core_search per collection), merge_search).

Each agent invocation is its own task. With no response agents the chord is replaced by ``assemble`` alone: an
empty chord header would leave nothing to trigger the body.

Usage::

    sig = build_job_canvas(job_id, specs)
    sig.apply_async((state.dump(),))      # the first task receives the initial state
"""

from __future__ import annotations

from collections.abc import Iterable

from celery import chain, chord, group, signature
from celery.canvas import Signature

from pipeline.agents.base import Stage
from pipeline.job.artifact_names import name_ranks, rank_key
from pipeline.job.state import AgentSpec

# Celery's own limits are a backstop behind the runner's deadline: the soft limit lands a little later,
# the hard limit kills a worker process whose agent thread will not come back.
SOFT_LIMIT_MARGIN_S = 5.0
HARD_LIMIT_MARGIN_S = 15.0
STEP_LIMIT_S = 120.0


def _limits(timeout_s: float) -> dict[str, float]:
    return {"soft_time_limit": timeout_s + SOFT_LIMIT_MARGIN_S, "time_limit": timeout_s + HARD_LIMIT_MARGIN_S}


def ordered(specs: Iterable[AgentSpec], stage: Stage) -> list[AgentSpec]:
    return sorted((s for s in specs if s.stage == stage), key=lambda s: (s.priority, s.agent_id))


def _agent_step(task: str, spec: AgentSpec, default_timeout_s: float) -> Signature:
    return signature(task, kwargs={"spec": spec.model_dump(mode="json")}).set(
        **_limits(spec.timeout_s or default_timeout_s)
    )


def response_steps(specs: Iterable[AgentSpec], default_timeout_s: float) -> list[Signature]:
    """The response agents' tasks, in order; a second config of one agent is told its rank, so that its artifact
    gets a name of its own (``pipeline.job.artifact_names``). Rank 1 sends no rank: the message stays as before."""
    responders = ordered(specs, Stage.RESPONSE)
    ranks = name_ranks(responders)
    steps = []
    for spec in responders:
        step = _agent_step("agentsearch.response_agent", spec, default_timeout_s)
        if ranks[rank_key(spec)] > 1:
            step.kwargs["name_rank"] = ranks[rank_key(spec)]
        steps.append(step)
    return steps


def search_step(collection_ids: list[str] | None) -> Signature:
    """One collection: one task. Several: searched in parallel (a group), then merged."""
    if not collection_ids or len(collection_ids) == 1:
        return signature("agentsearch.core_search").set(**_limits(STEP_LIMIT_S))
    header = group(
        signature("agentsearch.core_search", kwargs={"collection_id": c}).set(**_limits(STEP_LIMIT_S))
        for c in collection_ids
    )
    return chord(header, signature("agentsearch.merge_search").set(**_limits(STEP_LIMIT_S)))


def build_job_canvas(
    job_id: str, specs: list[AgentSpec], default_timeout_s: float = 30.0, collection_ids: list[str] | None = None
) -> Signature:
    steps: list[Signature] = []
    steps += [_agent_step("agentsearch.pre_search_agent", s, default_timeout_s) for s in ordered(specs, Stage.PRE_SEARCH)]
    steps.append(search_step(collection_ids))
    steps += [_agent_step("agentsearch.post_search_agent", s, default_timeout_s) for s in ordered(specs, Stage.POST_SEARCH)]
    steps.append(signature("agentsearch.generate_answer").set(**_limits(STEP_LIMIT_S)))

    assemble = signature("agentsearch.assemble", kwargs={"job_id": job_id}).set(**_limits(STEP_LIMIT_S))
    responders = response_steps(specs, default_timeout_s)
    if responders:
        steps.append(chord(group(responders), assemble))
    else:
        steps.append(assemble.clone(args=([],)).set(immutable=True))

    canvas = chain(*steps)
    canvas.on_error(signature("agentsearch.job_failed", kwargs={"job_id": job_id}, immutable=False))
    return canvas
