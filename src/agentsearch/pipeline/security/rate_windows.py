"""Per-user request counters shared by every API process: the ``limits`` package's moving window, in Redis.

A moving window counts exactly the requests of the last 60 seconds: a burst at the turn of a minute cannot pass
twice the limit (as a fixed window lets it), and the moment one more request is allowed is known exactly (the
oldest counted request leaves the window), so ``Retry-After`` admits a client that honours it on its next try.
Its cost is one Redis list of at most ``limit`` timestamps per user and class (a user at 1200 reads a minute:
about 30 KB). The sliding window counter keeps two integers instead, but guesses at how the previous minute's
requests were spread, and with them at the wait it announces.

With no Redis URL (embedded mode, one process) the counters live in the process (``limits``' memory storage).
Should Redis fail, requests are let through, with a warning in the log at most every ``DOWN_RETRY_S``: a limit
that cannot be counted is not a reason to refuse service, and the database quotas (running jobs, documents) still
hold, since they are counted where they are stored.

Usage::

    windows = RateWindows("redis://redis:6379/2")
    window = windows.hit(user_id, "search", 60)       # None while Redis is unreachable
    if window is not None and not window.allowed:
        ...  # 429, Retry-After: window.retry_after_s
    admission = windows.admit_job(user_id, 10, running=lambda: store.running_jobs(user_id))
    ...  # create the job, then:
    admission.release()
"""

from __future__ import annotations

import logging
import math
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from limits import RateLimitItemPerSecond
from limits.errors import StorageError
from limits.storage import MemoryStorage, RedisStorage, Storage
from limits.strategies import MovingWindowRateLimiter

from agentsearch.pipeline.security.quotas import RouteClass

log = logging.getLogger("agentsearch.limits")
T = TypeVar("T")

WINDOW_S = 60
KEY_PREFIX = "agentsearch:limits"
# Redis answers in well under a millisecond; a request does not wait long for one that does not answer.
REDIS_TIMEOUT_S = 0.5
# After a failure Redis is left alone this long: requests pass at once instead of each waiting for a timeout.
DOWN_RETRY_S = 5.0
# A submission holds its admission for the moment between counting the user's jobs and writing its own; the
# counter expires this long after it was created, so a process killed in that moment does not hold it for ever.
ADMISSION_TTL_S = 30


@dataclass(frozen=True)
class Window:
    """A user's count in one class, as of one request."""

    limit: int
    remaining: int
    reset_s: float  # seconds until the oldest request counted leaves the window (one more is allowed then)
    allowed: bool = True

    @property
    def retry_after_s(self) -> int:
        return max(1, math.ceil(self.reset_s))


@dataclass
class Admission:
    """A search's place under the running-jobs limit, held from the count until its job row is written."""

    admitted: bool
    running: int
    limit: int
    _release: Callable[[], object] | None = None

    @property
    def held(self) -> bool:
        """The place is still this submission's (admitted, counted in Redis, not yet released)."""
        return self._release is not None

    def release(self) -> None:
        """Give the place back (the job's row counts it from now on); only the first call does anything."""
        release, self._release = self._release, None
        if release is not None:
            release()


class RateWindows:
    def __init__(self, redis_url: str | None, window_s: int = WINDOW_S) -> None:
        self.window_s = window_s
        self.storage: Storage
        if redis_url:
            self.storage = RedisStorage(redis_url, key_prefix=KEY_PREFIX, wrap_exceptions=True,
                                        socket_timeout=REDIS_TIMEOUT_S, socket_connect_timeout=REDIS_TIMEOUT_S)
        else:
            self.storage = MemoryStorage()
        self.limiter = MovingWindowRateLimiter(self.storage)
        self._down_until = 0.0
        self._lock = threading.Lock()

    @property
    def shared(self) -> bool:
        """True when the counts are in Redis, seen by every API process."""
        return isinstance(self.storage, RedisStorage)

    # -- per-minute windows ---------------------------------------------------------------------------------

    def _item(self, limit: int) -> RateLimitItemPerSecond:
        return RateLimitItemPerSecond(limit, self.window_s, namespace="agentsearch")

    def hit(self, user_id: uuid.UUID, kind: RouteClass, limit: int) -> Window | None:
        """Count one request of ``kind`` if the limit allows it; the window after it (``allowed`` False: refused,
        and not counted). None when the counters cannot be reached."""
        if limit <= 0:
            return Window(limit=0, remaining=0, reset_s=self.window_s, allowed=False)
        item = self._item(limit)
        identifiers = (kind, str(user_id))
        return self._guarded(lambda: self._after_hit(item, identifiers))

    def _after_hit(self, item: RateLimitItemPerSecond, identifiers: tuple[str, str]) -> Window:
        allowed = self.limiter.hit(item, *identifiers)
        stats = self.limiter.get_window_stats(item, *identifiers)
        return Window(limit=item.amount, remaining=max(0, stats.remaining),
                      reset_s=max(0.0, stats.reset_time - time.time()), allowed=allowed)

    def peek(self, user_id: uuid.UUID, kind: RouteClass, limit: int) -> Window | None:
        """The window as it stands, counting nothing; None when the counters cannot be reached."""
        if limit <= 0:
            return Window(limit=0, remaining=0, reset_s=0.0, allowed=False)
        item = self._item(limit)

        def read() -> Window:
            stats = self.limiter.get_window_stats(item, kind, str(user_id))
            remaining = max(0, stats.remaining)
            reset_s = max(0.0, stats.reset_time - time.time()) if remaining < limit else 0.0
            return Window(limit=limit, remaining=remaining, reset_s=reset_s, allowed=remaining > 0)

        return self._guarded(read)

    # -- running jobs -----------------------------------------------------------------------------------------

    def admit_job(self, user_id: uuid.UUID, limit: int, running: Callable[[], int]) -> Admission:
        """Whether one more job of the user fits under ``limit``, with ``running()`` its jobs queued or running
        as the database has them.

        Submissions admitted but not yet written are counted besides (a counter in Redis, held until
        ``Admission.release``): each submission takes its place *before* it counts the rows, so of two at once the
        later one sees the earlier either as a row or as a place, and the two cannot both take the last slot. One
        written and not yet released is counted twice for that moment, which errs towards refusing.
        """
        if limit <= 0:
            return Admission(admitted=False, running=0, limit=0)
        return self.admit_job_counted(user_id, lambda: (limit, running()))

    def admit_job_counted(self, user_id: uuid.UUID, usage: Callable[[], tuple[int, int]]) -> Admission:
        """``admit_job`` with the limit read together with the count: ``usage()`` gives both (one transaction),
        read after the place is taken, as the count must be. A limit of 0 admits none and reports no jobs running,
        as ``admit_job`` does."""
        key = f"admissions/{user_id}"
        in_flight = self._guarded(lambda: self.storage.incr(key, ADMISSION_TTL_S))
        release = None if in_flight is None else lambda: self._guarded(
            lambda: self.storage.incr(key, ADMISSION_TTL_S, -1))
        admission = Admission(admitted=True, running=0, limit=0, _release=release)
        try:
            admission.limit, admission.running = usage()
        except BaseException:
            admission.release()
            raise
        if admission.limit <= 0:
            admission.admitted, admission.running, admission.limit = False, 0, 0
            admission.release()
            return admission
        # This submission is one of the in-flight ones; a counter that expired under others may read less.
        others = max(1, in_flight or 1) - 1
        if admission.running + others + 1 > admission.limit:
            admission.admitted = False
            admission.release()
        return admission

    # -- Redis away ------------------------------------------------------------------------------------------

    def _guarded(self, call: Callable[[], T]) -> T | None:
        """``call()``, or None while the counters' Redis cannot be reached (logged, then left alone a while)."""
        if time.monotonic() < self._down_until:
            return None
        try:
            return call()
        except StorageError as exc:
            with self._lock:
                first = time.monotonic() >= self._down_until
                self._down_until = time.monotonic() + DOWN_RETRY_S
            if first:
                log.warning("rate limit counters unavailable, requests pass unlimited for %.0f s: %s",
                            DOWN_RETRY_S, type(exc.storage_error).__name__)
            return None
