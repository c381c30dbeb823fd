"""Circuit breakers shared by every worker process through Redis (pybreaker + ``CircuitRedisStorage``).

``CircuitBreaker.call`` holds a lock for the whole call, which would serialise agent calls inside a process. So the
runner asks ``admits()`` before the call, runs the agent itself under its own deadline, and afterwards replays the
outcome through the breaker with ``record()``: pybreaker still owns every state transition (closed -> open ->
half-open -> closed) and its counters live in Redis.

Usage::

    breaker = AgentBreaker("translator:ab12", redis, fail_max=5, reset_timeout_s=60)
    if breaker.admits():
        try:
            value = call_agent()
            breaker.record(None)
        except Exception as exc:
            breaker.record(exc)
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pybreaker
import redis

NAMESPACE = "agentsearch:breaker"


class AgentBreaker:
    def __init__(self, name: str, redis_client: redis.Redis | None, fail_max: int, reset_timeout_s: float) -> None:
        """With ``redis_client`` None the state stays in this process (for a toolbox-less agent run)."""
        self.name = name
        self.reset_timeout_s = reset_timeout_s
        self._storage = (
            pybreaker.CircuitRedisStorage(pybreaker.STATE_CLOSED, redis_client, namespace=f"{NAMESPACE}:{name}")
            if redis_client is not None
            else pybreaker.CircuitMemoryStorage(pybreaker.STATE_CLOSED)
        )
        self._breaker = pybreaker.CircuitBreaker(
            fail_max=fail_max, reset_timeout=reset_timeout_s, state_storage=self._storage, name=name
        )

    @property
    def state(self) -> str:
        return self._storage.state

    @property
    def fail_counter(self) -> int:
        return self._storage.counter

    def admits(self) -> bool:
        """False while the circuit is open and its reset timeout has not elapsed (in any process)."""
        if self._storage.state != pybreaker.STATE_OPEN:
            return True
        opened_at = self._storage.opened_at
        if opened_at is None:
            return True
        # The memory storage keeps a naive timestamp, the Redis storage an aware one.
        now = datetime.now(UTC) if opened_at.tzinfo else datetime.now(UTC).replace(tzinfo=None)
        return now >= opened_at + timedelta(seconds=self.reset_timeout_s)

    def record(self, error: BaseException | None) -> None:
        """Feed one finished call's outcome to the breaker: ``None`` for success, the exception for a failure."""

        def replay() -> None:
            if error is not None:
                raise error

        try:
            self._breaker.call(replay)
        except pybreaker.CircuitBreakerError:
            pass  # the failure tripped the circuit (or another process opened it meanwhile)
        except BaseException as exc:
            if exc is not error:
                raise


class BreakerBoard:
    """One ``AgentBreaker`` per (name, limits) in this process, all backed by the same Redis keys per name."""

    def __init__(self, redis_client: redis.Redis) -> None:
        self._redis = redis_client
        self._breakers: dict[tuple[str, int, float], AgentBreaker] = {}
        self._lock = threading.Lock()

    def get(self, name: str, fail_max: int, reset_timeout_s: float) -> AgentBreaker:
        key = (name, fail_max, reset_timeout_s)
        with self._lock:
            breaker = self._breakers.get(key)
            if breaker is None:
                breaker = self._breakers[key] = AgentBreaker(name, self._redis, fail_max, reset_timeout_s)
            return breaker


def shared_states(redis_client: redis.Redis) -> dict[str, str]:
    """Every breaker kept in Redis, by name, with its stored state (closed, open or half-open).

    An open circuit stays "open" here after its reset timeout until the next call moves it to half-open.
    """
    suffix = f":{pybreaker.CircuitRedisStorage.BASE_NAMESPACE}:state"
    # SCAN, not KEYS: the cache Redis also holds every cached result and must not block for a scrape.
    keys = sorted(set(redis_client.scan_iter(match=f"{NAMESPACE}:*{suffix}", count=500)))
    if not keys:
        return {}
    values = redis_client.mget(keys)
    states = {}
    for key, value in zip(keys, values):
        if value is None:
            continue
        name = (key.decode() if isinstance(key, bytes) else key)[len(NAMESPACE) + 1 : -len(suffix)]
        states[name] = value.decode() if isinstance(value, bytes) else str(value)
    return states
