"""The job's steps on the queues: one Celery task per node of ``agentsearch.pipeline.job.workflow``'s graphs, the one
wrapper that runs them (``step_task``), and the graph made a canvas of those tasks (``enqueue_job``), mechanically.

Each task keeps its name and its message's arguments (a worker of the previous release sends them); its body only
names its node and passes on what its message carries. ``step_task`` makes the ``StepCall`` (this process's
services and step ledger, the message's arguments, the task's retries), runs the node's step in the frame every
step shares (``agentsearch.pipeline.job.step_protocol.run_step``: the job's check, the step ledger, the work, its time)
and turns the outcome into the task's: the output to hand on; for ``Cancelled`` the state as it was handed (the rest of
the chain passes through) or the step's own record of it; for ``Retry`` the task's retry. Around every task
``agentsearch.worker.observability`` binds the job to its log lines; each stage function opens its span of the job's
trace. ``job_failed`` is the canvas's errback, handed a failed request rather than a state.

The canvas::

    chain(pre_search agents by priority -> core_search -> post_search agents by priority -> write_answer
          -> chord(group(response agents), assemble))

Each node of the graph becomes its task's signatures (``node_signatures``): one; one per agent of its stage, in
order (a chain's links) or side by side (a chord's header, joined by the node's ``joined_by``); one per collection
(with several collections core_search becomes chord(group(core_search per collection), merge_search)). The pre-
and post-search agents are told their stage's agents (``peers``), which a ``next_agent_id`` may name
(``agentsearch.pipeline.job.routing``: passed-over agents are no-op hops). Each task is limited by its node's ``limit``.

An agentic job runs in two canvases with the loops between them::

    chain(pre_search agents -> agentic_begin)                       the head, applied at submission
    agentic_begin -> group(agentic_iteration per loop)              each iteration enqueues the next one, or
                                                                     agentic_finish when its loop is the last to end
    chain(post_search agents -> agentic_compress -> write_answer
          -> chord(group(response agents), assemble))                the tail, applied by agentic_finish

The loop's own tasks (``agentsearch.worker.agentic_tasks``) are named rather than imported: they apply these canvases
themselves (begin starts the loops, each iteration its successor, finish the tail), so importing them here would
make an import circle.

Usage::

    task_ids = enqueue_job(job_id, specs, state, default_timeout_s=30)     # the job's first state: its canvas
    JobStore(db).record_tasks(job_id, task_ids)                            # applied, its task ids kept for cancel
    build_agentic_tail(job_id, specs).apply_async((state.dump(),))
    state = pre_search_agent(state.dump(), spec.model_dump(mode="json"))   # what a worker does with a message

    @app.task(name=workflow.MY_STEP.task, bind=True, **DB_RETRY)     # a new step: a node of the workflow
    def my_step(self: Task, state: dict[str, Any]) -> dict[str, Any]:
        return step_task(self, state, workflow.MY_STEP)
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from typing import Any, cast

from celery import Task, chain, chord, group, signature
from celery.canvas import Signature
from celery.result import AsyncResult, ResultSet

from agentsearch.pipeline.agents.base import Stage
from agentsearch.pipeline.job import assembly, workflow
from agentsearch.pipeline.job.artifact_names import name_ranks, rank_key
from agentsearch.pipeline.job.job_state import JobState
from agentsearch.pipeline.job.job_store import JobStore
from agentsearch.pipeline.job.ledger import StepLedger
from agentsearch.pipeline.job.routing import StageAgent, ordered
from agentsearch.pipeline.job.stage_budget import start_clock
from agentsearch.pipeline.job.step_protocol import Cancelled, Retry, StepCall, load_state, run_step
from agentsearch.pipeline.job.workflow import (
    AGENTIC_ITERATION,
    ITERATIVE_HEAD,
    ITERATIVE_TAIL,
    JOB,
    RESPONSE_AGENT,
    Node,
)
from agentsearch.pipeline.platform.kv import connect_redis
from agentsearch.pipeline.platform.settings import Settings, get_settings
from agentsearch.pipeline.records.agent_runs import AgentSpec
from agentsearch.pipeline.services import get_services
from agentsearch.worker.app import DB_RETRY, REDIS_OUTAGE_WAIT_S, app
from agentsearch.worker.missing_state import ends_without_state

_ledgers: dict[int, StepLedger] = {}
_ledgers_lock = threading.Lock()  # a thread-pool worker's steps ask for it at once


def step_ledger() -> StepLedger:
    """This process's step ledger, in the result backend's Redis (which never evicts, unlike a cache instance).

    Embedded mode has no redelivery and no second process, so nothing can run twice: the ledger is off there.
    """
    pid = os.getpid()  # a forked process must not use its parent's connection
    with _ledgers_lock:
        if pid not in _ledgers:
            settings = get_services().settings
            url = next((u for u in (settings.result_backend, settings.broker_url) if str(u).startswith("redis")),
                       None)
            client = None if settings.embedded or url is None else connect_redis(url)
            _ledgers[pid] = StepLedger(client, ttl_s=max(3600.0, settings.job_deadline_s * 4))
        return _ledgers[pid]


def step_task(task: Task, handed: Any, node: workflow.Node, spec: dict[str, Any] | None = None,
              peers: list[list[str | None]] | None = None, **message: Any) -> Any:
    """The one wrapper of a step's task: ``handed`` (the task's first argument) and the rest of its message
    (``spec``, ``peers``, ``collection_id``, ``name_rank``, ``job_id``) made the step's ``StepCall``, the node's step
    run in the frame every step shares, the outcome made the task's (see the module's docstring)."""
    if "job_id" not in message and isinstance(handed, dict):
        message["job_id"] = handed.get("job_id")  # the job the state belongs to, for the step's own records
    call = StepCall(get_services(), step_ledger(), spec=AgentSpec.model_validate(spec) if spec else None,
                    peers=cast("tuple[StageAgent, ...]", tuple((a, c) for a, c in peers or [])),
                    retries=task.request.retries or 0, **message)
    out, loaded = run_step(node.step, call, handed)
    if isinstance(out, Retry):
        retry: dict[str, Any] = {"countdown": out.countdown}
        if out.max_retries is not None:
            retry["max_retries"] = out.max_retries
        if out.cause is not None:
            retry["exc"] = out.cause
        raise task.retry(**retry) from out.cause
    if isinstance(out, Cancelled):
        if node.step.cancelled is not None:
            return node.step.cancelled(call, out).model_dump(mode="json")
        return handed if node.step.load is load_state else loaded.dump()
    return out


@app.task(name=workflow.PRE_SEARCH_AGENT.task, bind=True, **DB_RETRY)
def pre_search_agent(self: Task, state: dict[str, Any], spec: dict[str, Any],
                     peers: list[list[str | None]] | None = None) -> dict[str, Any]:
    return step_task(self, state, workflow.PRE_SEARCH_AGENT, spec=spec, peers=peers)


@app.task(name=workflow.CORE_SEARCH.task, bind=True, **DB_RETRY)
def core_search(self: Task, state: dict[str, Any], collection_id: str | None = None) -> dict[str, Any]:
    return step_task(self, state, workflow.CORE_SEARCH, collection_id=collection_id)


@app.task(name=workflow.MERGE_SEARCH.task, bind=True, **DB_RETRY)
def merge_search(self: Task, states: list[dict[str, Any]]) -> dict[str, Any]:
    return step_task(self, states, workflow.MERGE_SEARCH)


@app.task(name=workflow.POST_SEARCH_AGENT.task, bind=True, **DB_RETRY)
def post_search_agent(self: Task, state: dict[str, Any], spec: dict[str, Any],
                      peers: list[list[str | None]] | None = None) -> dict[str, Any]:
    return step_task(self, state, workflow.POST_SEARCH_AGENT, spec=spec, peers=peers)


@app.task(name=workflow.AGENTIC_COMPRESS.task, bind=True)
def agentic_compress(self: Task, state: dict[str, Any]) -> dict[str, Any]:
    return step_task(self, state, workflow.AGENTIC_COMPRESS)


@app.task(name=workflow.ANSWER.task, bind=True, **DB_RETRY)
def write_answer(self: Task, state: dict[str, Any]) -> dict[str, Any]:
    return step_task(self, state, workflow.ANSWER)


@app.task(name=workflow.RESPONSE_AGENT.task, bind=True)
def response_agent(self: Task, state: dict[str, Any], spec: dict[str, Any], name_rank: int = 1) -> dict[str, Any]:
    return step_task(self, state, workflow.RESPONSE_AGENT, spec=spec, name_rank=name_rank)


@app.task(name=workflow.ASSEMBLE.task, bind=True, **DB_RETRY)
@ends_without_state
def assemble(self, records: list[dict[str, Any]], job_id: str) -> dict[str, Any]:
    return step_task(self, records, workflow.ASSEMBLE, job_id=job_id)


@app.task(name="agentsearch.job_failed", **DB_RETRY)
def job_failed(request, exc, traceback, job_id: str) -> None:
    """Errback of the job's canvas: a step outside the agents failed, so the job ends ``failed`` with why."""
    jobs = JobStore(get_services().db)
    jobs.fail(job_id, f"{getattr(request, 'task', 'step')} failed: {type(exc).__name__}: {exc}")
    assembly.end_job_trace(jobs, job_id)


# Each node's task, by its name (agentsearch.worker.job_tasks builds the canvases from these).
TASKS: dict[str, Task] = {t.name: t for t in (pre_search_agent, core_search, merge_search, post_search_agent,
                                               agentic_compress, write_answer, response_agent, assemble)}


# Celery's own limits are a backstop behind the runner's deadline: the soft limit lands a little later, the hard
# limit kills a worker process whose agent thread will not come back. Both leave room for the task's Redis work to
# wait out a restart (agentsearch.worker.app.REDIS_OUTAGE_WAIT_S): a step that did its work in time is never cut while
# it waits to store its result or publish the next step.
SOFT_LIMIT_MARGIN_S = 5.0 + REDIS_OUTAGE_WAIT_S
HARD_LIMIT_MARGIN_S = 15.0 + REDIS_OUTAGE_WAIT_S
STEP_LIMIT_S = 120.0
# The answer step's work beside its two LLM calls (the offline answer, its sentences embedded and checked, the
# stream's writes): what STEP_LIMIT_S leaves beside the calls' default budgets of 60 and 20 s.
ANSWER_SPARE_S = 40.0
# An iteration searches, evaluates (one LLM call, or offline signals), maybe grades and refines (an LLM call each).
ITERATION_LIMIT_S = 180.0
# A step's output travels to the next step inside that step's message: the result backend needs it only where a
# chord gathers its header's outputs. Stored anyway, every step would write the job's whole state to Redis again.
# The step's start is still recorded (agentsearch.worker.reaper.record_start): the reaper reads it.
HANDED_ON = {"ignore_result": True}


def limits(timeout_s: float) -> dict[str, float]:
    """Celery's soft and hard time limits of a task whose own work is bounded by ``timeout_s``."""
    return {"soft_time_limit": timeout_s + SOFT_LIMIT_MARGIN_S, "time_limit": timeout_s + HARD_LIMIT_MARGIN_S}


def answer_limit_s(settings: Settings) -> float:
    """The answer step's limit: ``STEP_LIMIT_S``, or longer when the LLM's budgets (AGENTSEARCH_ANSWER_LLM_TIMEOUT_S
    and AGENTSEARCH_JUDGE_LLM_TIMEOUT_S) need it, so a slow model's reply is cut by its budget, and recorded,
    never by Celery stopping the step."""
    return max(STEP_LIMIT_S, settings.answer_llm_timeout_s + settings.judge_llm_timeout_s + ANSWER_SPARE_S)


def node_signature(node: Node, **kwargs: Any) -> Signature:
    """One task of ``node`` outside the agents, limited by its node's limit (a step's, the answer's, a loop's start),
    its output handed on, not stored (but a loop's start, whose output ends its canvas)."""
    task = TASKS.get(node.task)
    step = task.s(**kwargs) if task is not None else signature(node.task, kwargs=kwargs)
    if node.limit == "loop":
        return step.set(**limits(STEP_LIMIT_S))
    step = step.set(**limits(STEP_LIMIT_S), **HANDED_ON)
    if node.limit == "answer":
        step = step.set(**limits(answer_limit_s(get_settings())))
    return step


def agent_signature(task: Task, spec: AgentSpec, default_timeout_s: float) -> Signature:
    """One agent's task, limited by the agent's timeout (and its fallback's, which may run after it)."""
    timeout_s = spec.timeout_s or default_timeout_s
    if spec.fallback is not None:
        timeout_s += spec.fallback.timeout_s or default_timeout_s
    return task.s(spec=spec.model_dump(mode="json")).set(**limits(timeout_s))


def stage_signatures(node: Node, specs: Iterable[AgentSpec], default_timeout_s: float) -> list[Signature]:
    """The node's agents' tasks in order, one after the other, each told its stage's agents (``peers``): a routed
    stage stays one task per agent, and an agent passed over by an earlier one's ``next_agent_id`` is a no-op hop
    (``agentsearch.pipeline.job.routing``)."""
    agents = ordered(specs, node.step.agent_stage or Stage.PRE_SEARCH)
    peers = [[s.agent_id, s.config_id] for s in agents]
    steps = []
    for spec in agents:
        step = agent_signature(TASKS[node.task], spec, default_timeout_s).set(**HANDED_ON)
        if len(agents) > 1:  # alone in its stage, an agent has nothing to route to
            step.kwargs["peers"] = peers
        steps.append(step)
    return steps


def response_signatures(specs: Iterable[AgentSpec], default_timeout_s: float,
                        node: Node = RESPONSE_AGENT) -> list[Signature]:
    """The node's agents' tasks side by side (a chord's header, whose outputs are stored for its callback), in
    order; a second config of one agent is told its rank, so that its artifact gets a name of its own
    (``agentsearch.pipeline.job.artifact_names``). Rank 1 sends no rank: the message stays as before."""
    responders = ordered(specs, node.step.agent_stage or Stage.RESPONSE)
    ranks = name_ranks(responders)
    steps = []
    for spec in responders:
        step = agent_signature(TASKS[node.task], spec, default_timeout_s)
        if ranks[rank_key(spec)] > 1:
            step.kwargs["name_rank"] = ranks[rank_key(spec)]
        steps.append(step)
    return steps


def respond_and_assemble(node: Node, job_id: str, specs: Iterable[AgentSpec], default_timeout_s: float) -> Signature:
    """The end of every job: its response agents side by side (a chord), then the node's ``joined_by``
    (``assemble``) with their records.

    With no response agents, ``assemble`` alone with no records: an empty chord header would leave nothing to
    trigger the body.
    """
    assert node.joined_by is not None
    finish = node_signature(node.joined_by, job_id=job_id)
    responders = response_signatures(specs, default_timeout_s, node)
    if responders:
        return chord(group(responders), finish)
    return finish.clone(args=([],)).set(immutable=True)


def search_signature(node: Node, collection_ids: list[str] | None) -> Signature:
    """One collection: one task. Several: searched in parallel (a group), then merged (the node's ``joined_by``)."""
    if not collection_ids or len(collection_ids) == 1 or node.joined_by is None:
        return node_signature(node)
    # The chord gathers each collection's search from the result backend: stored.
    header = group(node_signature(node, collection_id=c).set(ignore_result=False) for c in collection_ids)
    return chord(header, node_signature(node.joined_by))


def graph_signatures(graph: tuple[Node, ...], job_id: str, specs: list[AgentSpec], default_timeout_s: float,
                     collection_ids: list[str] | None = None) -> list[Signature]:
    """Each node of ``graph`` in order, as its tasks (see the module's docstring)."""
    steps: list[Signature] = []
    for node in graph:
        if node.each == "agent" and node.side_by_side:
            steps.append(respond_and_assemble(node, job_id, specs, default_timeout_s))
        elif node.each == "agent":
            steps += stage_signatures(node, specs, default_timeout_s)
        elif node.each == "collection":
            steps.append(search_signature(node, collection_ids))
        else:
            steps.append(node_signature(node))
    return steps


def fail_job_on_error(canvas: Signature, job_id: str) -> Signature:
    """A step outside the agents that fails ends the job ``failed`` with why (``job_failed``, the errback)."""
    canvas.on_error(job_failed.s(job_id=job_id))
    return canvas


def build_job_canvas(
    job_id: str, specs: list[AgentSpec], default_timeout_s: float = 30.0, collection_ids: list[str] | None = None
) -> Signature:
    return fail_job_on_error(chain(*graph_signatures(JOB, job_id, specs, default_timeout_s, collection_ids)), job_id)


def build_agentic_head(job_id: str, specs: list[AgentSpec], default_timeout_s: float = 30.0) -> Signature:
    return fail_job_on_error(chain(*graph_signatures(ITERATIVE_HEAD, job_id, specs, default_timeout_s)), job_id)


def iteration_signature(job_id: str, profile: str, loop_state: dict) -> Signature:
    return signature(AGENTIC_ITERATION, args=(job_id, profile, loop_state), immutable=True).set(
        **limits(ITERATION_LIMIT_S))


def build_loops(job_id: str, loops: dict[str, dict]) -> Signature:
    """Every loop's first iteration, side by side."""
    return group(iteration_signature(job_id, profile, state) for profile, state in loops.items())


def build_agentic_tail(job_id: str, specs: list[AgentSpec], default_timeout_s: float = 30.0) -> Signature:
    return fail_job_on_error(chain(*graph_signatures(ITERATIVE_TAIL, job_id, specs, default_timeout_s)), job_id)


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
