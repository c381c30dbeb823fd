"""The job's step tasks: one Celery task per node of ``agentsearch.pipeline.job.workflow``'s graphs, and ``step_task``,
the one wrapper that runs them.

Each task keeps its name and its message's arguments (a worker of the previous release sends them); its body only
names its node and passes on what its message carries. ``step_task`` makes the ``StepCall`` (this process's
services and step ledger, the message's arguments, the task's retries), runs the node's step in the frame every
step shares (``agentsearch.pipeline.job.step_protocol.run_step``: the job's check, the step ledger, the work, its time)
and turns the outcome into the task's: the output to hand on; for ``Cancelled`` the state as it was handed (the rest of
the chain passes through) or the step's own record of it; for ``Retry`` the task's retry. Around every task
``agentsearch.worker.observability`` binds the job to its log lines; each stage function opens its span of the job's
trace. ``job_failed`` is the canvas's errback, handed a failed request rather than a state.
``agentsearch.worker.canvas`` puts these tasks in order; ``TASKS`` finds each node's task by its name.

Usage (what a worker does with a message; a test calls the task the same way)::

    state = pre_search_agent(state.dump(), spec.model_dump(mode="json"))

    @app.task(name=workflow.MY_STEP.task, bind=True, **DB_RETRY)     # a new step: a node of the workflow
    def my_step(self: Task, state: dict[str, Any]) -> dict[str, Any]:
        return step_task(self, state, workflow.MY_STEP)
"""

from __future__ import annotations

import os
import threading
from typing import Any, cast

from celery import Task

from agentsearch.pipeline.job import assembly, workflow
from agentsearch.pipeline.job.job_store import JobStore
from agentsearch.pipeline.job.ledger import StepLedger
from agentsearch.pipeline.job.routing import StageAgent
from agentsearch.pipeline.job.step_protocol import Cancelled, Retry, StepCall, load_state, run_step
from agentsearch.pipeline.platform.kv import connect_redis
from agentsearch.pipeline.records.agent_runs import AgentSpec
from agentsearch.pipeline.services import get_services
from agentsearch.worker.app import DB_RETRY, app
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


# Each node's task, by its name (agentsearch.worker.canvas builds the canvases from these).
TASKS: dict[str, Task] = {t.name: t for t in (pre_search_agent, core_search, merge_search, post_search_agent,
                                               agentic_compress, write_answer, response_agent, assemble)}
