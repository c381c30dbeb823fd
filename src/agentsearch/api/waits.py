"""How many requests of one user may wait on jobs at once in this API process (``?wait``, event streams).

A waiting request holds no thread (the waits are ``asyncio`` sleeps between short reads), but it does hold a
connection and a poll of the database every few hundred milliseconds; the cap keeps one user from turning that
into a load the others feel.

Usage::

    slots = WaitSlots(per_user=16)
    if slots.acquire(user_id):
        try:
            ...  # wait
        finally:
            slots.release(user_id)
"""

from __future__ import annotations

import threading
import uuid
from collections import Counter


class WaitSlots:
    def __init__(self, per_user: int) -> None:
        self.per_user = per_user
        self._held: Counter[uuid.UUID] = Counter()
        self._lock = threading.Lock()

    def acquire(self, user_id: uuid.UUID) -> bool:
        with self._lock:
            if self._held[user_id] >= self.per_user:
                return False
            self._held[user_id] += 1
            return True

    def release(self, user_id: uuid.UUID) -> None:
        with self._lock:
            self._held[user_id] -= 1
            if self._held[user_id] <= 0:
                del self._held[user_id]

    def held(self, user_id: uuid.UUID) -> int:
        with self._lock:
            return self._held[user_id]
