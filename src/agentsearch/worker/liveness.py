"""Which Celery nodes are alive, as the reaper needs to know: a key per node in the broker's Redis, with a TTL.

A node's main process refreshes its key every ``BEAT_S``; a node that dies (SIGKILL, a lost host) stops refreshing
and its key expires after ``TTL_S``. Progress reports record the node that made them
(``agentsearch.pipeline.job.job_store``), so the reaper can tell a job whose worker is gone from one that is merely
slow. The broker's Redis is used because it never evicts (the cache instance may run an LRU policy, which could drop a
live node's key).

Usage::

    alive = alive_nodes()        # {"w1@host", ...}, or None when Redis cannot be asked

Loaded by every worker (``agentsearch.worker.app`` names it in ``HOOK_MODULES``), which connects its signals.
"""

from __future__ import annotations

import logging
import time
from functools import partial

import redis
from celery.signals import celeryd_init, worker_ready, worker_shutdown

from agentsearch.pipeline.job.job_store import set_worker_node
from agentsearch.pipeline.platform.settings import get_settings
from agentsearch.pipeline.platform.ticker import Ticker

KEY_PREFIX = "agentsearch:node:"
BEAT_S = 10.0
TTL_S = 30

log = logging.getLogger("agentsearch.worker")
_heartbeat: Ticker | None = None


def _client() -> redis.Redis | None:
    settings = get_settings()
    url = settings.broker_url if str(settings.broker_url).startswith("redis") else settings.redis_url
    return redis.Redis.from_url(url, socket_timeout=5) if url else None


@celeryd_init.connect
def _name_this_node(sender: str | None = None, **_kwargs) -> None:
    # Runs in the main process before the pool forks, so every child inherits the name.
    set_worker_node(sender)


def _refresh(client: redis.Redis, node: str) -> None:
    try:
        client.set(KEY_PREFIX + node, str(time.time()), ex=TTL_S)
    except redis.RedisError:
        log.debug("node heartbeat not written", exc_info=True)


@worker_ready.connect
def _start_node_heartbeat(sender=None, **_kwargs) -> None:
    global _heartbeat
    node = getattr(sender, "hostname", None)
    client = None if get_settings().embedded else _client()
    if node is None or client is None:
        return
    _heartbeat = Ticker(partial(_refresh, client, node), BEAT_S, "agentsearch-node-heartbeat", at_once=True)
    _heartbeat.start()


@worker_shutdown.connect
def _stop_node_heartbeat(sender=None, **_kwargs) -> None:
    if _heartbeat is not None:
        _heartbeat.stop()


def alive_nodes() -> set[str] | None:
    client = _client()
    if client is None:
        return None
    try:
        return {key.decode()[len(KEY_PREFIX):] for key in client.scan_iter(match=KEY_PREFIX + "*", count=500)}
    except redis.RedisError:
        return None
