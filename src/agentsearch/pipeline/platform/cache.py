"""Agent result cache in Redis, with a lock so concurrent misses for one key compute once.

Usage::

    cache = ResultCache(redis)
    value, hit = cache.get_or_compute("agentsearch:agent:...", ttl_s=600, lock_timeout_s=30, compute=lambda: "...")

``compute`` returns a string (the serialised result) or raises; errors are never cached.

A caller with reads and writes of its own around the computation (the agent runner: its circuit breaker, its
metrics) takes the steps one by one, so that the cache adds no round trip to its own::

    lookup = cache.lookup(key, lock_timeout_s=30, read_along=breaker_keys)  # the value or the lock, and those keys
    if lookup.busy:
        lookup = cache.wait(lookup, lock_timeout_s=30)     # a twin is computing it: its value, or the lock
    if lookup.value is None:
        writes = redis.pipeline(transaction=False)
        cache.store(writes, lookup, compute(), ttl_s=600)  # or cache.release(writes, lookup) when it failed
        send(writes)                                       # the value and the lock's release, with the caller's own
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import redis
from redis.client import Pipeline
from redis.exceptions import RedisError

from agentsearch.pipeline.platform.redis_pipelining import send

# How often a miss that found a twin computing looks again for the twin's value (or the lock free).
POLL_S = 0.05
# The lock outlives the computation it guards by this much: a holder that died frees it after that.
LOCK_MARGIN_S = 5.0

# The value, or (when there is none) the lock, and the caller's keys (KEYS[3] on): one round trip for what took a
# GET, a lock's SET, a GET again and the caller's own read.
_GET_OR_LOCK = """
local along = {}
if #KEYS > 2 then along = redis.call('MGET', unpack(KEYS, 3)) end
local value = redis.call('GET', KEYS[1])
if value then return {1, value, along} end
if redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then return {0, 1, along} end
return {0, 0, along}
"""
# The lock is released only by its holder: one that outlived its lock must not free a twin's.
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


@dataclass(frozen=True)
class Lookup:
    """What ``lookup`` found: the cached ``value``, or none and the ``token`` of the lock this caller now holds.

    Neither: ``busy`` when a twin holds the lock (``wait`` for it), else no lock to be had (a twin held it past
    the wait, or Redis could not be asked): the caller computes without it. ``along``: the values of the keys read
    along, in their order (empty when Redis could not be asked).
    """

    key: str
    value: str | None = None
    token: str | None = None
    busy: bool = False
    along: tuple[bytes | None, ...] = ()

    @property
    def lock_key(self) -> str:
        return f"{self.key}:lock"


class ResultCache:
    def __init__(self, redis_client: redis.Redis, namespace: str = "agentsearch:cache") -> None:
        self._redis = redis_client
        self.namespace = namespace

    def key(self, *parts: str) -> str:
        return ":".join((self.namespace, *parts))

    def get(self, key: str) -> str | None:
        try:
            raw = self._redis.get(key)
        except RedisError:
            return None  # a cache outage degrades to a miss, never to a failed job
        return raw.decode() if isinstance(raw, bytes) else raw

    def set(self, key: str, value: str, ttl_s: int) -> None:
        try:
            self._redis.set(key, value.encode(), ex=max(1, int(ttl_s)))
        except RedisError:
            pass

    def lookup(self, key: str, lock_timeout_s: float, read_along: Sequence[str] = ()) -> Lookup:
        """One round trip: the cached value, else the lock to compute it under (held for ``lock_timeout_s`` and a
        margin), and the values of the keys ``read_along``."""
        token = uuid.uuid4().hex
        lock_ms = int((lock_timeout_s + LOCK_MARGIN_S) * 1000)
        try:
            found, payload, along = self._redis.eval(_GET_OR_LOCK, 2 + len(read_along), key, f"{key}:lock",
                                                     *read_along, token, lock_ms)
        except RedisError:
            return Lookup(key)  # a cache outage degrades to a miss, never to a failed job
        if found:
            return Lookup(key, value=_text(payload), along=tuple(along))
        return Lookup(key, token=token if payload else None, busy=not payload, along=tuple(along))

    def wait(self, lookup: Lookup, lock_timeout_s: float) -> Lookup:
        """A busy lookup again every ``POLL_S``, until the twin's value is there (a hit) or its lock is free (now
        this caller's); past ``lock_timeout_s`` none of them, and the caller computes without the lock."""
        deadline = time.monotonic() + lock_timeout_s
        while lookup.busy:
            if time.monotonic() >= deadline:
                return Lookup(lookup.key)
            time.sleep(POLL_S)
            lookup = self.lookup(lookup.key, lock_timeout_s)
        return lookup

    def store(self, pipe: Pipeline, lookup: Lookup, value: str, ttl_s: int) -> None:
        """Queue the computed value, and the lock's release, on the caller's pipeline."""
        pipe.set(lookup.key, value.encode(), ex=max(1, int(ttl_s)))
        self.release(pipe, lookup)

    def release(self, pipe: Pipeline, lookup: Lookup) -> None:
        """Queue the lock's release (a failed computation: nothing is stored, the next miss computes again)."""
        if lookup.token is not None:
            # EVAL, not a registered script: redis-py checks a pipeline's scripts with one more round trip.
            pipe.eval(_RELEASE, 1, lookup.lock_key, lookup.token)

    def get_or_compute(
        self, key: str, ttl_s: int, lock_timeout_s: float, compute: Callable[[], str]
    ) -> tuple[str, bool]:
        lookup = self.wait(self.lookup(key, lock_timeout_s), lock_timeout_s)
        if lookup.value is not None:
            return lookup.value, True
        writes = self._redis.pipeline(transaction=False)
        try:
            value = compute()
            self.store(writes, lookup, value, ttl_s)
            return value, False
        except BaseException:
            self.release(writes, lookup)
            raise
        finally:
            send(writes)


def _text(raw: bytes | str) -> str:
    return raw.decode() if isinstance(raw, bytes) else raw
