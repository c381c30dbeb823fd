"""Agent result cache in Redis, with a lock so concurrent misses for one key compute once.

Usage::

    cache = ResultCache(redis)
    value, hit = cache.get_or_compute("agentsearch:agent:...", ttl_s=600, lock_timeout_s=30, compute=lambda: "...")

``compute`` returns a string (the serialised result) or raises; errors are never cached.
"""

from __future__ import annotations

from collections.abc import Callable

import redis
from redis.exceptions import LockError, RedisError


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
        return raw.decode() if raw is not None else None

    def set(self, key: str, value: str, ttl_s: int) -> None:
        try:
            self._redis.set(key, value.encode(), ex=max(1, int(ttl_s)))
        except RedisError:
            pass

    def get_or_compute(
        self, key: str, ttl_s: int, lock_timeout_s: float, compute: Callable[[], str]
    ) -> tuple[str, bool]:
        cached = self.get(key)
        if cached is not None:
            return cached, True
        lock = self._redis.lock(f"{key}:lock", timeout=lock_timeout_s + 5, blocking_timeout=lock_timeout_s)
        try:
            acquired = lock.acquire()
        except RedisError:
            acquired = False
        try:
            # Re-read either way: with the lock, a twin may have finished first; without it (timed out waiting),
            # the holder may have stored the value meanwhile.
            cached = self.get(key)
            if cached is not None:
                return cached, True
            value = compute()
            self.set(key, value, ttl_s)
            return value, False
        finally:
            if acquired:
                try:
                    lock.release()
                except (LockError, RedisError):
                    pass  # expired while computing: the next miss simply recomputes
