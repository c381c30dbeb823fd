"""The reaper: a job whose worker died is enqueued again, once; one past its deadline is failed with why.

Beat calls ``reap_jobs`` every ``reaper_interval_s`` in its own process (``worker.lifecycle``); it is also a task, so
an operator or a test can send it. Which jobs are lost is decided by ``JobStore.reap`` from the live nodes
(``worker.liveness``) and the nodes holding each job's started, unacknowledged tasks (below).

Usage::

    reap_jobs()                                   # {"failed": [job ids], "retried": [job ids]}
    app.send_task(reap_jobs.name)                 # the same, run by a worker
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

from celery import states

from pipeline.job.state import AgentSpec
from pipeline.job.store import JobStore
from pipeline.platform.kv import connect_redis
from pipeline.services import get_services
from worker.app import app
from worker.liveness import alive_nodes
from worker.observability import end_job_trace
from worker.submit import enqueue_job

log = logging.getLogger("agentsearch.worker")


def _started_nodes(task_ids: list[str]) -> set[str]:
    """The nodes these tasks were seen starting on: a started task's result holds its node's name until the task
    ends (task_track_started)."""
    backend = app.backend
    client = getattr(backend, "client", None)
    if client is None or not task_ids:
        return set()
    nodes = set()
    for raw in client.mget([backend.get_key_for_task(t) for t in task_ids]):
        if raw is None:
            continue
        meta = backend.decode_result(raw)
        if meta.get("status") == states.STARTED and isinstance(meta.get("result"), dict):
            nodes.add(meta["result"].get("hostname"))
    return {n for n in nodes if n}


def _held_task_ids() -> set[str]:
    """Task ids whose message a consumer holds unacknowledged (kombu's Redis transport keeps them in the broker's
    ``unacked`` hash until the ack, or until the visibility timeout hands them out again)."""
    url = str(get_services().settings.broker_url)
    if not url.startswith("redis"):
        return set()
    held = set()
    for raw in connect_redis(url).hvals("unacked"):
        try:
            held.add(json.loads(raw)[0]["headers"]["id"])
        except (ValueError, LookupError, TypeError):
            continue
    return held


def _lost_task_nodes() -> Callable[[list[str]], set[str]]:
    """For one sweep: the nodes holding a job's started, unacknowledged tasks.

    A started state alone is not enough. A task killed with its process on a live node goes back to the queue and
    keeps its old started state until it runs again: measured under the kill drill, judging by the state alone
    sent 15 jobs round a second time when the node they had once started on died.
    """
    held: set[str] | None = None

    def nodes(task_ids: list[str]) -> set[str]:
        nonlocal held
        try:
            if held is None:
                held = _held_task_ids()
            return _started_nodes([t for t in task_ids if t in held])
        except Exception:  # noqa: BLE001 - without the answer the reaper goes by the job's last node only
            log.warning("could not tell where the tasks of a job run", exc_info=True)
            return set()

    return nodes


@app.task(name="agentsearch.reap_jobs")
def reap_jobs() -> dict[str, list[str]]:
    """Periodic: a job whose worker died is enqueued again, once; one past its deadline is failed with why.

    A job enqueued again keeps the outputs its steps already stored (the step ledger): it resumes where the lost
    worker stopped instead of calling its agents a second time.
    """
    services = get_services()
    jobs = JobStore(services.db)
    result = jobs.reap(alive_nodes=alive_nodes(), deadline_s=services.settings.job_deadline_s,
                       task_nodes=_lost_task_nodes())
    for job_id in result.failed:
        end_job_trace(jobs, job_id)
    for job_id in result.retried:
        try:
            state, snapshot = jobs.initial_state(job_id)
            specs = [AgentSpec.model_validate(spec) for spec in snapshot]
            jobs.record_tasks(job_id, enqueue_job(job_id, specs, state, services.settings.default_agent_timeout_s))
        except Exception as exc:  # noqa: BLE001 - a retry that cannot be enqueued ends the job with why
            jobs.fail(job_id, f"retry after a lost worker could not be enqueued: {type(exc).__name__}: {exc}")
    if result.failed or result.retried:
        log.warning("reaper: failed %s; retried %s", result.failed, result.retried)
    return {"failed": result.failed, "retried": result.retried}
