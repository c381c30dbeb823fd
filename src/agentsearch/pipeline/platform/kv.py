"""The Redis connection used for agent caches and circuit breakers.

With ``AGENTSEARCH_REDIS_URL`` set it is a real Redis shared by every process; unset, it is an in-process
Redis-API store (fakeredis), which is enough when the whole service runs in one process.

Usage::

    redis = connect_redis(settings.redis_url)
    redis.set("k", b"v")
"""

from __future__ import annotations

import hashlib
import json
import threading
from typing import TYPE_CHECKING, Any

import redis
import redis.asyncio

from agentsearch.pipeline.platform.settings import get_settings

if TYPE_CHECKING:
    import fakeredis

# fakeredis is imported by the in-process store's first client: 15 MiB a process with a real Redis never holds.
_local_server: fakeredis.FakeServer | None = None
_local_lock = threading.Lock()


def connect_redis(url: str | None, timeout_s: float = 5.0) -> redis.Redis:
    # No decode_responses: pybreaker's CircuitRedisStorage expects bytes.
    if url:
        return redis.Redis.from_url(url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s,
                                    health_check_interval=30)
    import fakeredis

    return fakeredis.FakeRedis(server=_local())


def connect_async_redis(url: str | None, timeout_s: float | None = None) -> redis.asyncio.Redis:
    """The asyncio client of the same store: a real Redis at ``url``, else the in-process one ``connect_redis``
    gives (so an API and worker threads in one process share it). ``timeout_s``: default the settings'
    ``redis_timeout_s``."""
    if url:
        # A read's wait (an answer stream's XREAD BLOCK, 0.2 s) stays well under the timeout; without one, a Redis
        # partitioned away held an event stream's read, and the stream, until the heal.
        timeout_s = timeout_s if timeout_s is not None else get_settings().redis_timeout_s
        return redis.asyncio.Redis.from_url(url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s,
                                            health_check_interval=30)
    import fakeredis

    return fakeredis.FakeAsyncRedis(server=_local())


def _local() -> fakeredis.FakeServer:
    """The in-process store's server, made by its first client: the sync and asyncio clients share it."""
    import fakeredis

    global _local_server
    with _local_lock:
        if _local_server is None:
            _local_server = fakeredis.FakeServer()
        return _local_server


def canonical_hash(value: Any) -> str:
    """A stable digest of JSON-able data: key order and whitespace do not change it."""
    encoded = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(encoded.encode()).hexdigest()[:24]
