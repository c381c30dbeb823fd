"""A job's graph as plain data (pure functions from its agent specs to a Celery canvas), and ``enqueue_job``, which
puts it on the queues.

    chain(pre_search agents by priority -> core_search -> post_search agents by priority -> write_answer
          -> chord(group(response agents), assemble))

With several collections, core_search becomes chord(group(core_search per collection), merge_search).

Each agent invocation is its own task; the pre- and post-search agents are told their stage's agents (``peers``),
which a ``next_agent_id`` may name (``pipeline.job.routing``: passed-over agents are no-op hops). Signatures are
made from the task objects of ``worker.job_tasks``, so each name here leads to its task.

An agentic job runs in two canvases with the loops between them::

    chain(pre_search agents -> agentic_begin)                       the head, applied at submission
    agentic_begin -> group(agentic_iteration per loop)              each iteration enqueues the next one, or
                                                                     agentic_finish when its loop is the last to end
    chain(post_search agents -> agentic_compress -> write_answer
          -> chord(group(response agents), assemble))                the tail, applied by agentic_finish

The loop's own tasks (``worker.agentic_tasks``) are named here instead, and register under these names: they apply
these canvases themselves (begin starts the loops, each iteration its successor, finish the tail), so importing
them here would make an import circle.

Usage::

    task_ids = enqueue_job(job_id, specs, state, default_timeout_s=30)     # the job's first state: its canvas
    JobStore(db).record_tasks(job_id, task_ids)                            # applied, its task ids kept for cancel
    sig = build_job_canvas(job_id, specs)
    sig.apply_async((state.dump(),))      # the first task receives the initial state
    build_agentic_tail(job_id, specs).apply_async((state.dump(),))
"""

from __future__ import annotations

from collections.abc import Iterable

from celery import Task, chain, chord, group, signature
from celery.canvas import Signature
from celery.result import AsyncResult, ResultSet

from pipeline.agents.base import Stage
from pipeline.agents.records import AgentSpec
from pipeline.job.artifact_names import name_ranks, rank_key
from pipeline.job.stage_budget import start_clock
from pipeline.job.state import JobState
from pipeline.platform.settings import Settings, get_settings
from worker.app import REDIS_OUTAGE_WAIT_S
from worker.job_tasks import (
    agentic_compress,
    assemble,
    core_search,
    job_failed,
    merge_search,
    ordered,
    post_search_agent,
    pre_search_agent,
    response_agent,
    write_answer,
)

# Celery's own limits are a backstop behind the runner's deadline: the soft limit lands a little later, the hard
# limit kills a worker process whose agent thread will not come back. Both leave room for the task's Redis work to
# wait out a restart (worker.app.REDIS_OUTAGE_WAIT_S): a step that did its work in time is never cut while it waits
# to store its result or publish the next step.
SOFT_LIMIT_MARGIN_S = 5.0 + REDIS_OUTAGE_WAIT_S
HARD_LIMIT_MARGIN_S = 15.0 + REDIS_OUTAGE_WAIT_S
STEP_LIMIT_S = 120.0
# The answer step's work beside its two LLM calls (the offline answer, its sentences embedded and checked, the
# stream's writes): what STEP_LIMIT_S leaves beside the calls' default budgets of 60 and 20 s.
ANSWER_SPARE_S = 40.0
# The tasks worker.agentic_tasks.agentic_begin and worker.agentic_tasks.agentic_iteration.
AGENTIC_BEGIN = "agentsearch.agentic_begin"
AGENTIC_ITERATION = "agentsearch.agentic_iteration"
# An iteration searches, evaluates (one LLM call, or offline signals), maybe grades and refines (an LLM call each).
ITERATION_LIMIT_S = 180.0
# A step's output travels to the next step inside that step's message: the result backend needs it only where a
# chord gathers its header's outputs. Stored anyway, every step would write the job's whole state to Redis again.
# The step's start is still recorded (worker.reaper.record_start): the reaper reads it.
HANDED_ON = {"ignore_result": True}


def limits(timeout_s: float) -> dict[str, float]:
    """Celery's soft and hard time limits of a task whose own work is bounded by ``timeout_s``."""
    return {"soft_time_limit": timeout_s + SOFT_LIMIT_MARGIN_S, "time_limit": timeout_s + HARD_LIMIT_MARGIN_S}


def answer_limit_s(settings: Settings) -> float:
    """The answer step's limit: ``STEP_LIMIT_S``, or longer when the LLM's budgets (AGENTSEARCH_ANSWER_LLM_TIMEOUT_S
    and AGENTSEARCH_JUDGE_LLM_TIMEOUT_S) need it, so a slow model's reply is cut by its budget, and recorded,
    never by Celery stopping the step."""
    return max(STEP_LIMIT_S, settings.answer_llm_timeout_s + settings.judge_llm_timeout_s + ANSWER_SPARE_S)


def answer_signature() -> Signature:
    """The answer step, limited by ``answer_limit_s`` of this process's settings."""
    return step_signature(write_answer).set(**limits(answer_limit_s(get_settings())))


def agent_signature(task: Task, spec: AgentSpec, default_timeout_s: float) -> Signature:
    """One agent's task, limited by the agent's timeout (and its fallback's, which may run after it)."""
    timeout_s = spec.timeout_s or default_timeout_s
    if spec.fallback is not None:
        timeout_s += spec.fallback.timeout_s or default_timeout_s
    return task.s(spec=spec.model_dump(mode="json")).set(**limits(timeout_s))


def stage_signatures(task: Task, specs: Iterable[AgentSpec], stage: Stage,
                     default_timeout_s: float) -> list[Signature]:
    """The pre- or post-search agents' tasks in order, each told its stage's agents (``peers``): a routed stage
    stays one task per agent, and an agent passed over by an earlier one's ``next_agent_id`` is a no-op hop
    (``pipeline.job.routing``)."""
    agents = ordered(specs, stage)
    peers = [[s.agent_id, s.config_id] for s in agents]
    steps = []
    for spec in agents:
        step = agent_signature(task, spec, default_timeout_s).set(**HANDED_ON)
        if len(agents) > 1:  # alone in its stage, an agent has nothing to route to
            step.kwargs["peers"] = peers
        steps.append(step)
    return steps


def step_signature(task: Task, **kwargs) -> Signature:
    """A step outside the agents (search, merge, answer, assemble), limited by ``STEP_LIMIT_S``, its output handed
    on, not stored."""
    return task.s(**kwargs).set(**limits(STEP_LIMIT_S), **HANDED_ON)


def response_signatures(specs: Iterable[AgentSpec], default_timeout_s: float) -> list[Signature]:
    """The response agents' tasks, in order; a second config of one agent is told its rank, so that its artifact
    gets a name of its own (``pipeline.job.artifact_names``). Rank 1 sends no rank: the message stays as before."""
    responders = ordered(specs, Stage.RESPONSE)
    ranks = name_ranks(responders)
    steps = []
    for spec in responders:
        step = agent_signature(response_agent, spec, default_timeout_s)
        if ranks[rank_key(spec)] > 1:
            step.kwargs["name_rank"] = ranks[rank_key(spec)]
        steps.append(step)
    return steps


def respond_and_assemble(job_id: str, specs: Iterable[AgentSpec], default_timeout_s: float) -> Signature:
    """The end of every job: its response agents side by side (a chord), then ``assemble`` with their records.

    With no response agents, ``assemble`` alone with no records: an empty chord header would leave nothing to
    trigger the body.
    """
    finish = step_signature(assemble, job_id=job_id)
    responders = response_signatures(specs, default_timeout_s)
    if responders:
        return chord(group(responders), finish)
    return finish.clone(args=([],)).set(immutable=True)


def fail_job_on_error(canvas: Signature, job_id: str) -> Signature:
    """A step outside the agents that fails ends the job ``failed`` with why (``job_failed``, the errback)."""
    canvas.on_error(job_failed.s(job_id=job_id))
    return canvas


def search_signature(collection_ids: list[str] | None) -> Signature:
    """One collection: one task. Several: searched in parallel (a group), then merged."""
    if not collection_ids or len(collection_ids) == 1:
        return step_signature(core_search)
    # The chord gathers each collection's search from the result backend: stored.
    header = group(step_signature(core_search, collection_id=c).set(ignore_result=False) for c in collection_ids)
    return chord(header, step_signature(merge_search))


def build_job_canvas(
    job_id: str, specs: list[AgentSpec], default_timeout_s: float = 30.0, collection_ids: list[str] | None = None
) -> Signature:
    steps: list[Signature] = []
    steps += stage_signatures(pre_search_agent, specs, Stage.PRE_SEARCH, default_timeout_s)
    steps.append(search_signature(collection_ids))
    steps += stage_signatures(post_search_agent, specs, Stage.POST_SEARCH, default_timeout_s)
    steps.append(answer_signature())
    steps.append(respond_and_assemble(job_id, specs, default_timeout_s))
    return fail_job_on_error(chain(*steps), job_id)


def build_agentic_head(job_id: str, specs: list[AgentSpec], default_timeout_s: float = 30.0) -> Signature:
    steps = stage_signatures(pre_search_agent, specs, Stage.PRE_SEARCH, default_timeout_s)
    steps.append(signature(AGENTIC_BEGIN).set(**limits(STEP_LIMIT_S)))
    return fail_job_on_error(chain(*steps), job_id)


def iteration_signature(job_id: str, profile: str, loop_state: dict) -> Signature:
    return signature(AGENTIC_ITERATION, args=(job_id, profile, loop_state), immutable=True).set(
        **limits(ITERATION_LIMIT_S))


def build_loops(job_id: str, loops: dict[str, dict]) -> Signature:
    """Every loop's first iteration, side by side."""
    return group(iteration_signature(job_id, profile, state) for profile, state in loops.items())


def build_agentic_tail(job_id: str, specs: list[AgentSpec], default_timeout_s: float = 30.0) -> Signature:
    steps = stage_signatures(post_search_agent, specs, Stage.POST_SEARCH, default_timeout_s)
    steps.append(step_signature(agentic_compress))
    steps.append(answer_signature())
    steps.append(respond_and_assemble(job_id, specs, default_timeout_s))
    return fail_job_on_error(chain(*steps), job_id)


def task_ids(result: AsyncResult | None) -> list[str]:
    """Every task id of an applied chain: its results link back through ``parent``, chord headers included."""
    ids: list[str] = []
    node = result
    while node is not None:
        ids.append(node.id)
        if isinstance(node, ResultSet):
            ids += [child.id for child in node.results]
        node = node.parent
    return ids[::-1]


def enqueue_job(job_id: str, specs: list[AgentSpec], state: JobState, default_timeout_s: float) -> list[str]:
    # Handed over to the queues: the pre-search agents' clock starts (again, for a job the reaper enqueues anew).
    state = state.model_copy(update={"stage_clock": dict(state.stage_clock)})
    start_clock(state, Stage.PRE_SEARCH)
    if state.agentic is not None:
        # Iterative mode: the head only; its loops and tail are enqueued by the tasks themselves.
        return task_ids(build_agentic_head(job_id, specs, default_timeout_s).apply_async((state.dump(),)))
    canvas = build_job_canvas(job_id, specs, default_timeout_s, list(state.collections) or None)
    return task_ids(canvas.apply_async((state.dump(),)))
