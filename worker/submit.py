"""Putting a job on the queues: its canvas applied to its first state, and the task ids kept for cancel.

Usage::

    task_ids = enqueue_job(job_id, specs, state, default_timeout_s=30)
    JobStore(db).record_tasks(job_id, task_ids)
"""

from __future__ import annotations

from celery.result import AsyncResult, ResultSet

from pipeline.agents.base import Stage
from pipeline.agents.records import AgentSpec
from pipeline.job.stage_budget import start_clock
from pipeline.job.state import JobState
from worker.agentic_canvas import build_agentic_head
from worker.canvas import build_job_canvas


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
