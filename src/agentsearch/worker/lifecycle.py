"""What a worker or beat process does as it starts, forks and stops (Celery signals; loaded by
``agentsearch.worker.app``).

- ``worker_init`` (the main process, before the pool forks): publish patiently, share the cores out among the pool
  processes, load the embedding model once for all of them; a thread-pool worker runs its steps in this very
  process, so it loads the model for itself and starts its tracing and its thread watch
  (``agentsearch.worker.recycling``);
- ``worker_process_init`` (each prefork pool process): fresh clients, the shared model handed over (or loaded in
  the background), torch's threads set;
- ``worker_ready``/``beat_init``: the liveness file touched every ``HEARTBEAT_INTERVAL_S``; beat also sweeps for
  lost and overdue jobs, and for documents whose worker or task was lost, every ``reaper_interval_s``
  (``agentsearch.worker.reaper``);
- ``worker_shutdown``: both stopped.

The soft shutdown on SIGTERM is set where the app is made (``agentsearch.worker.app``): it must be in place before
billiard loads.

Usage: nothing to call; ``agentsearch.worker.app`` names this module in ``HOOK_MODULES``, so every worker and beat
imports it.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from functools import partial
from pathlib import Path

from celery.concurrency import get_implementation
from celery.concurrency.thread import TaskPool as ThreadTaskPool
from celery.signals import beat_init, worker_init, worker_process_init, worker_ready, worker_shutdown

from agentsearch.pipeline.observability import tracing
from agentsearch.pipeline.platform.settings import get_settings
from agentsearch.pipeline.platform.ticker import Ticker
from agentsearch.pipeline.retrieval.embedder import Embedder, make_embedder
from agentsearch.pipeline.services import reset_services
from agentsearch.worker import recycling
from agentsearch.worker.app import WORKER_PUBLISH_RETRY, app
from agentsearch.worker.reaper import reap_documents, reap_jobs

# Probes allow 60 s of silence: several missed beats, not one slow one.
HEARTBEAT_INTERVAL_S = 10.0

log = logging.getLogger("agentsearch.worker")

# The embedding model, loaded once in a prefork worker's main process and inherited by every pool process.
_parent_embedder = None
# Model threads per pool process (torch's and ONNX Runtime's): the cores shared out among the processes.
_model_threads: int | None = None


def uses_threads(worker) -> bool:
    """Whether a starting worker (``worker_init``'s sender) runs its tasks in threads of its own process."""
    return issubclass(get_implementation(getattr(worker, "pool_cls", None) or app.conf.worker_pool), ThreadTaskPool)


@worker_init.connect
def _patient_publishing(**_kwargs) -> None:
    # Set in the main process before the pool forks, and before anything was sent: the sender reads it once.
    app.conf.task_publish_retry_policy = WORKER_PUBLISH_RETRY


@worker_init.connect
def _share_cores(sender=None, **_kwargs) -> None:
    """Measured (docs/reliability.md): with two pool processes on two cores, torch's default of one thread per
    core made an extractive answer take 1.12 s instead of 0.31 s with one thread each, the threads of the two
    processes fighting over the same cores."""
    global _model_threads
    processes = getattr(sender, "concurrency", None)
    # OMP_NUM_THREADS set by the operator wins (e.g. several worker nodes sharing one host's cores). A thread-pool
    # worker is one process: torch keeps a thread per core there.
    settings = get_settings()
    if (not settings.embedded and processes and "OMP_NUM_THREADS" not in os.environ
            and not settings.embedding_threads and not uses_threads(sender)):
        _model_threads = max(1, len(os.sched_getaffinity(0)) // int(processes))


@worker_init.connect
def _load_model_before_fork(**_kwargs) -> None:
    """A pool process that replaces a dead one is ready at once instead of loading the model again.

    Measured under the kill drill (docs/reliability.md): loading took 12-15 s on a busy 2-core machine, so with a
    process killed every 5 s no replacement ever finished a search. Only loading happens here: the main process
    never embeds, and a forward pass before fork would leave torch's thread pool unusable in the children.
    """
    global _parent_embedder
    settings = get_settings()
    # With an embeddings server (AGENTSEARCH_EMBEDDING_URL) there is no model to load, and torch stays unimported.
    if settings.embedded or not settings.worker_preload_embedder or not settings.embeds_in_process:
        return
    try:
        _parent_embedder = make_embedder(settings)
    except Exception:  # each process then loads it itself, as without preloading
        log.exception("embedding model not preloaded in the main process")


@worker_init.connect
def _ready_to_run_threads(sender=None, **_kwargs) -> None:
    """A thread-pool worker has no pool process to prepare: this process serves every step."""
    if get_settings().embedded or not uses_threads(sender):
        return
    services = reset_services()
    if _parent_embedder is not None:
        services.use(embedder=_parent_embedder)
    # Made now, before the first step: the threads then share one of each instead of racing to make them (a
    # cached_property is not locked from Python 3.12 on). None of them connects yet.
    for part in ("db", "redis", "runner", "metrics"):
        getattr(services, part)
    tracing.configure_tracing(services.settings.otel_exporter, "agentsearch-worker")
    recycling.watch(threads_pool=True)


@worker_process_init.connect
def _fresh_clients_after_fork(**_kwargs) -> None:
    # Database pools, Redis sockets and gRPC channels must not be shared with the parent process.
    services = reset_services()
    if _model_threads is not None and "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(_model_threads)
    if _parent_embedder is not None:
        _give_its_share(_parent_embedder)
        # Services keeps its loaded model under this name; the weights are shared copy-on-write.
        services.__dict__["_embedder"] = _parent_embedder
    elif services.settings.worker_preload_embedder and services.settings.embeds_in_process:
        # Load the model while the process waits for work, so the first search does not pay for it.
        # In a thread: Celery gives a child only a few seconds to report ready.
        threading.Thread(target=lambda: _give_its_share(services.embedder), name="agentsearch-preload",
                         daemon=True).start()
    recycling.watch(threads_pool=False)


def _give_its_share(embedder) -> None:
    """This pool process's share of the cores to the model's runtime (torch's is set above)."""
    if _model_threads is not None and isinstance(embedder, Embedder):
        embedder.share_cores(_model_threads)


def _touch(path: Path) -> None:
    try:
        path.touch()
    except OSError:
        pass  # the probe sees a stale file and says so; nothing here could do better


# A cheap liveness probe that does not ask the broker anything.
_heartbeat = Ticker(partial(_touch, get_settings().worker_heartbeat_file), HEARTBEAT_INTERVAL_S,
                    "agentsearch-heartbeat", at_once=True)
# Run in beat's own process, not queued as a task. Measured under the kill drill (docs/reliability.md): sent as a
# task, the sweep waited behind the whole backlog of job steps, and 104 of 200 jobs ended more than one reaper
# period after their deadline. Called, not sent: reap_jobs runs here and now.
_reaper = Ticker(reap_jobs, get_settings().reaper_interval_s, "agentsearch-reaper")
# A thread of its own: a slow look at the documents (Redis, a long pending list) never delays the jobs' sweep.
_document_reaper = Ticker(reap_documents, get_settings().reaper_interval_s, "agentsearch-document-reaper")


@worker_ready.connect
def _start_heartbeat(**_kwargs) -> None:
    if not get_settings().embedded:
        _heartbeat.start()


@beat_init.connect
def _start_beat_tickers(**_kwargs) -> None:
    # A dedicated `agentsearch beat` gets the same probe as a worker; an embedded beat (worker --beat) shares the
    # worker's file, and the ticker is started once per process.
    _start_heartbeat()
    _reaper.start()
    _document_reaper.start()


@worker_shutdown.connect
def _stop_tickers(**_kwargs) -> None:
    _heartbeat.stop()
    _reaper.stop()
    _document_reaper.stop()
