"""Backoff: how long a step waits before it tries again, within a budget of waiting.

Celery counts a task's retries (``request.retries``) but not the time they took; the schedule is a pure function of
that count, so a step knows how long it has waited without keeping a clock: 1, 2, 4, 8, 16, then 30 s at most each,
the last delay cut so that the waits add up to the budget exactly, then ``None`` (give up).

Usage::

    delay = backoff_delay(retries=self.request.retries, budget_s=60)   # 1, 2, 4, 8, 16, 29, then None
    if delay is None:
        ...  # waited the whole budget: fail with the error
    raise self.retry(exc=exc, countdown=delay)
"""

from __future__ import annotations

FIRST_DELAY_S = 1.0
LONGEST_DELAY_S = 30.0  # agentsearch.worker.app.LONGEST_RETRY_DELAY_S: the broker's visibility timeout allows for it


def backoff_delay(retries: int, budget_s: float, first_s: float = FIRST_DELAY_S,
                  longest_s: float = LONGEST_DELAY_S) -> float | None:
    """The wait before retry number ``retries + 1``, or None once ``budget_s`` of waiting has been spent."""
    spent = 0.0
    for attempt in range(retries + 1):
        delay = min(first_s * 2**attempt, longest_s, budget_s - spent)
        if delay <= 0:
            return None
        if attempt == retries:
            return delay
        spent += delay
    return None  # unreachable: the loop returns on its last pass

