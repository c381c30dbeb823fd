"""Circuit breakers shared by every worker process through Redis (pybreaker + ``CircuitRedisStorage``).

``CircuitBreaker.call`` holds a lock for the whole call, which would serialise agent calls inside a process. So the
runner asks ``admits()`` before the call, runs the agent itself under its own deadline, and afterwards replays the
outcome through the breaker with ``record()``: pybreaker still owns every state transition (closed -> open ->
half-open -> closed) and its counters live in Redis.

Every agent call passes a breaker, so the usual case costs one round trip: ``read()`` fetches the state, the failure
count and the opening time at once, and a success recorded against a reading of a closed circuit with no failure
counted writes nothing (pybreaker would reset a count that is already zero). Anything else, a failure or a success
that closes a circuit or clears a count, is replayed through pybreaker as it comes.

Usage::

    breaker = AgentBreaker("translator:ab12", redis, fail_max=5, reset_timeout_s=60)
    reading = breaker.read()
    if breaker.admits(reading):
        try:
            value = call_agent()
            breaker.record(None, reading)
        except Exception as exc:
            breaker.record(exc, reading)
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pybreaker
import redis
from redis.exceptions import RedisError

NAMESPACE = "agentsearch:breaker"
log = logging.getLogger("agentsearch.breakers")


@dataclass(frozen=True)
class BreakerReading:
    """A breaker's shared state as one call saw it before it ran; ``record`` compares the outcome with it."""

    state: str
    failures: int
    opened_at: datetime | None

    @property
    def quiet(self) -> bool:
        """Closed with no failure counted: a success changes nothing."""
        return self.state == pybreaker.STATE_CLOSED and self.failures == 0


# What an unreadable Redis amounts to: like pybreaker's own Redis storage, the circuit fails open.
UNREAD = BreakerReading(pybreaker.STATE_CLOSED, 0, None)


class AdmitAll:
    """In place of a breaker Redis could not give: every call admitted, nothing recorded (the circuit fails open,
    as with ``UNREAD``)."""

    keys: tuple[str, ...] = ()

    def read(self) -> None:
        return None

    def reading(self, values: object) -> None:
        return None

    def admits(self, reading: BreakerReading | None = None) -> bool:
        return True

    def record(self, error: BaseException | None, seen: BreakerReading | None = None) -> None:
        pass


ADMIT_ALL = AdmitAll()


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
        self._redis = redis_client
        # The keys CircuitRedisStorage keeps the circuit in, read together by ``read``.
        prefix = f"{NAMESPACE}:{name}:{pybreaker.CircuitRedisStorage.BASE_NAMESPACE}"
        self._keys = () if redis_client is None else tuple(f"{prefix}:{k}" for k in ("state", "fail_counter",
                                                                                       "opened_at"))

    @property
    def state(self) -> str:
        return self._storage.state

    @property
    def fail_counter(self) -> int:
        return self._storage.counter

    @property
    def keys(self) -> tuple[str, ...]:
        """The Redis keys of its state, failure count and opening time (none in memory): a caller that reads them
        along with something of its own hands their values to ``reading``."""
        return self._keys

    def read(self) -> BreakerReading:
        """State, failure count and opening time in one round trip (pybreaker's storage asks for each alone)."""
        if not self._keys:
            return self.reading(())
        try:
            assert self._redis is not None  # the keys are made only with a client
            return self.reading(self._redis.mget(self._keys))
        except RedisError:
            log.warning("breaker %s unreadable: the call goes through", self.name, exc_info=True)
            return UNREAD

    def reading(self, values: Sequence[bytes | str | None]) -> BreakerReading:
        """The reading of the values of ``keys`` (in memory: the storage's own); none read: ``UNREAD``."""
        if not self._keys:
            storage = self._storage
            return BreakerReading(storage.state, storage.counter, storage.opened_at)
        if len(values) != len(self._keys):
            return UNREAD
        state, failures, opened_at = values
        return BreakerReading(
            _text(state) if state is not None else pybreaker.STATE_CLOSED,
            int(failures) if failures else 0,
            # As pybreaker stores it: whole seconds since the epoch, UTC.
            datetime(*time.gmtime(int(opened_at))[:6], tzinfo=UTC) if opened_at else None,
        )

    def admits(self, reading: BreakerReading | None = None) -> bool:
        """False while the circuit is open and its reset timeout has not elapsed (in any process)."""
        if reading is None:
            reading = self.read()
        if reading.state != pybreaker.STATE_OPEN or reading.opened_at is None:
            return True
        # The memory storage keeps a naive timestamp, the Redis storage an aware one.
        opened_at = reading.opened_at
        now = datetime.now(UTC) if opened_at.tzinfo else datetime.now(UTC).replace(tzinfo=None)
        return now >= opened_at + timedelta(seconds=self.reset_timeout_s)

    def record(self, error: BaseException | None, seen: BreakerReading | None = None) -> None:
        """Feed one finished call's outcome to the breaker: ``None`` for success, the exception for a failure.

        ``seen``: the reading the call was admitted on. A success after a quiet reading is not written: had another
        process counted failures meanwhile, they stay counted (a call that began before them does not clear them);
        had it opened the circuit, pybreaker would have refused the replay anyway.
        """
        if error is None and seen is not None and seen.quiet:
            return

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


def _text(raw: bytes | str) -> str:
    return raw.decode() if isinstance(raw, bytes) else raw


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
