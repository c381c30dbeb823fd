"""The reaper: a job whose worker died is enqueued again, once; one past its deadline is failed with why. A document
whose worker or task was lost is sent again; one that lost ``ingest_max_attempts`` is failed with why.

Beat calls ``reap_jobs`` and ``reap_documents`` every ``reaper_interval_s`` in its own process
(``agentsearch.worker.lifecycle``); both are tasks too, so an operator or a test can send them. Which jobs are lost is
decided by ``JobStore.reap`` from the live nodes (``agentsearch.worker.liveness``) and the nodes holding each job's
started, unacknowledged tasks (below); which documents, by ``agentsearch.pipeline.ingestion.recovery`` from the live
nodes and the ingest tasks the broker holds (``agentsearch.worker.broker_tasks``). A job's steps hand their outputs on
without storing them, for which Celery records no start: ``record_start`` records it as Celery would. A message a
node has taken but not yet started (a thread-pool worker killed between the two) would name no node at all:
``record_receipt`` notes the node as the message arrives, so that job counts as lost with it too.

Usage::

    reap_jobs()                                   # {"failed": [job ids], "retried": [job ids]}
    reap_documents()                              # {"sent_again": [document row ids], "failed": [document row ids]}
    app.send_task(reap_jobs.name)                 # the same, run by a worker
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

from celery import Task, states
from celery.signals import task_prerun, task_received

from agentsearch.pipeline.ingestion.recovery import find_lost, send_again
from agentsearch.pipeline.job.assembly import end_job_trace
from agentsearch.pipeline.job.job_store import ORPHAN_GRACE_S, JobStore
from agentsearch.pipeline.platform.db import utcnow
from agentsearch.pipeline.records.agent_runs import AgentSpec
from agentsearch.pipeline.services import get_services
from agentsearch.worker.app import INGEST_QUEUE, app
from agentsearch.worker.broker_tasks import broker_client, held_tasks, ingest_view
from agentsearch.worker.job_tasks import enqueue_job
from agentsearch.worker.liveness import alive_nodes

log = logging.getLogger("agentsearch.worker")


@task_prerun.connect
def record_start(task: Task, task_id: str, **_) -> None:
    """A task's start as Celery records it (task_track_started), also for a step whose output is handed on, not
    stored (``agentsearch.worker.job_tasks.HANDED_ON``), for which Celery records none: ``_started_nodes`` reads it."""
    request = task.request
    if request.ignore_result and not request.called_directly and not request.is_eager:
        task.backend.store_result(task_id, {"pid": os.getpid(), "hostname": request.hostname}, states.STARTED,
                                  request=request)


@task_received.connect
def record_receipt(request, **_) -> None:
    """The node a task's message went to, noted before the task is handed to a thread or process (the consumer sends
    this signal first): a node killed with the message taken and the task not started left no other trace of it, and
    its job waited for the broker's visibility timeout (measured in the deploy drill: a job ``queued`` for minutes
    after its thread-pool worker's container was killed). The start, then the end, write over it."""
    app.backend.store_result(request.id, {"hostname": request.hostname}, states.RECEIVED)


def _started_nodes(task_ids: list[str]) -> set[str]:
    """The nodes these tasks were seen taking or starting: a taken or started task's result holds its node's name
    until the task ends (task_track_started), and a step's that stores no output until it expires; only tasks still
    unacknowledged are asked about (``_lost_task_nodes``)."""
    backend = app.backend
    client = getattr(backend, "client", None)
    if client is None or not task_ids:
        return set()
    nodes = set()
    for raw in client.mget([backend.get_key_for_task(t) for t in task_ids]):
        if raw is None:
            continue
        meta = backend.decode_result(raw)
        if meta.get("status") in (states.RECEIVED, states.STARTED) and isinstance(meta.get("result"), dict):
            nodes.add(meta["result"].get("hostname"))
    return {n for n in nodes if n}


def _held_task_ids() -> set[str]:
    """Task ids whose message a consumer holds unacknowledged (``agentsearch.worker.broker_tasks``); none but with
    Redis."""
    client = broker_client()
    return set(held_tasks(client)) if client is not None else set()


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
        except Exception:  # without the answer the reaper goes by the job's last node only
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


@app.task(name="agentsearch.reap_documents")
def reap_documents() -> dict[str, list[str]]:
    """Periodic: a pending document whose worker died (a whole node: its message would wait for the broker's
    visibility timeout, about an hour) or whose task was lost is sent again, its row naming the new task (the old
    message, should it come back, finds the row is not its own and does nothing); one that lost
    ``ingest_max_attempts`` ends ``failed`` with the cause. Indexing again replaces what a lost try stored."""
    services = get_services()
    settings = services.settings
    with services.db.session() as s:
        lost = find_lost(s, utcnow(), alive_nodes(), ingest_view, ORPHAN_GRACE_S)
        sends, failed_ids = send_again(s, lost, settings.ingest_max_attempts, settings.ingest_task_documents)
    for send in sends:
        app.send_task(send.task, args=send.args, task_id=send.task_id, queue=INGEST_QUEUE)
    sent, failed = [d for send in sends for d in send.document_ids], [str(d) for d in failed_ids]
    if lost:
        log.warning("reaper: %d documents lost their worker or task (%s); sent again %d, ended failed %d",
                    len(lost), "; ".join(sorted({item.cause for item in lost})), len(sent), len(failed))
    return {"sent_again": sent, "failed": failed}
