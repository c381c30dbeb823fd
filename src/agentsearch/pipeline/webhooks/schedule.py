"""When a delivery that failed is tried again: exponential backoff with jitter, within a retry window.

After failed attempt ``n`` the wait is drawn between half and all of ``base_s * 2**(n-1)`` (at most ``max_s``):
"equal jitter", so many deliveries failing together (an endpoint down for everyone) spread out, and the wait still
grows with each failure. No wait reaches past the window (counted from the event): the last attempt is at its
end, and a delivery that fails then is given up. With the defaults (5 s, doubling, 1 h at most, 24 h) that is
about 30 attempts.

Usage::

    schedule = RetrySchedule(base_s=5, max_s=3600, window_s=86400)
    schedule.next_delay(failures=1, elapsed_s=0.4)       # 2.5 .. 5.0
    schedule.next_delay(failures=3, elapsed_s=86400)     # None: the window is over, give up
"""

from __future__ import annotations

import random
from collections.abc import Callable

from pydantic import BaseModel, Field, model_validator

# 2**60 s is far past any window: a larger exponent changes nothing but could overflow.
_MAX_EXPONENT = 60


class RetrySchedule(BaseModel):
    base_s: float = Field(5.0, gt=0, description="Nominal wait after the first failed attempt.")
    max_s: float = Field(3600.0, gt=0, description="Longest nominal wait between two attempts.")
    window_s: float = Field(86400.0, gt=0, description="How long after the event attempts are made at all.")

    @model_validator(mode="after")
    def _ordered(self) -> RetrySchedule:
        if self.max_s < self.base_s:
            raise ValueError("the longest wait (max_s) must be at least the first one (base_s)")
        return self

    @classmethod
    def from_settings(cls, settings) -> RetrySchedule:
        return cls(base_s=settings.webhook_backoff_base_s, max_s=settings.webhook_backoff_max_s,
                   window_s=settings.webhook_retry_window_s)

    def nominal_delay(self, failures: int) -> float:
        """The un-jittered wait after ``failures`` failed attempts (1 or more)."""
        return min(self.max_s, self.base_s * 2 ** min(max(failures - 1, 0), _MAX_EXPONENT))

    def next_delay(self, failures: int, elapsed_s: float, rng: Callable[[], float] = random.random) -> float | None:
        """Seconds until the next attempt after ``failures`` failed ones, ``elapsed_s`` after the event; None once
        the window is spent (give up)."""
        remaining = self.window_s - elapsed_s
        if remaining <= 0:
            return None
        nominal = self.nominal_delay(failures)
        return min(nominal / 2 + rng() * nominal / 2, remaining)
