"""Concurrent embed calls grouped into one forward pass.

A thread-pool worker runs many steps at once, and each may embed a query or a few sentences. One at a time behind a
lock, every call would wait for all the calls before it, each a forward pass of its own; a forward pass over 32
short texts costs little more than over one. So calls are queued and one thread runs them in batches: the texts of
every call waiting when a pass starts (up to ``max_batch``), after at most ``max_wait_s`` for company, then each
caller gets its own rows back. A failed pass fails every call in it, with the same error. A model that runs passes
side by side (``OnnxEngine(parallel=True)``) is given ``runners`` threads taking calls, so that one pass's results are
handed back while the next runs.

Usage::

    batcher = MicroBatcher(model_encode, max_batch=64, max_wait_s=0.002)
    MicroBatcher(model_encode, runners=2)            # two passes at once
    vectors = batcher.embed(["solar output"])       # from any thread; blocks until its batch has run
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

Vectors = list[list[float]]


@dataclass
class _Call:
    texts: list[str]
    done: threading.Event = field(default_factory=threading.Event)
    vectors: Vectors | None = None
    error: BaseException | None = None


class MicroBatcher:
    def __init__(self, encode: Callable[[list[str]], Vectors], max_batch: int = 64, max_wait_s: float = 0.002,
                 runners: int = 1) -> None:
        if max_batch < 1 or max_wait_s < 0 or runners < 1:
            raise ValueError("max_batch and runners must be at least 1 and max_wait_s not negative")
        self._encode, self.max_batch, self.max_wait_s, self.runners = encode, max_batch, max_wait_s, runners
        self._queue: deque[_Call] = deque()
        self._arrived = threading.Condition()
        self._runner_pid: int | None = None
        self.passes = 0  # forward passes run, for tests and benchmarks

    def embed(self, texts: list[str]) -> Vectors:
        if not texts:
            return []
        call = _Call(list(texts))
        with self._arrived:
            # A forked process has the queue but not the threads that served it.
            if self._runner_pid != os.getpid():
                self._queue.clear()
                self._runner_pid = os.getpid()
                for _ in range(self.runners):
                    threading.Thread(target=self._run, name="agentsearch-embed-batcher", daemon=True).start()
            self._queue.append(call)
            self._arrived.notify()
        call.done.wait()
        if call.error is not None:
            raise call.error
        assert call.vectors is not None
        return call.vectors

    def _take(self) -> list[_Call]:
        """The calls of the next pass: the first waiting one, and whoever arrives within ``max_wait_s`` while the
        batch has room. A call larger than the batch goes alone (the model splits it into batches itself)."""
        with self._arrived:
            while not self._queue:
                self._arrived.wait()
            taken = [self._queue.popleft()]
            size = len(taken[0].texts)
            waited = False
            while size < self.max_batch:
                if not self._queue:
                    if waited or not self.max_wait_s:
                        break
                    self._arrived.wait(self.max_wait_s)
                    waited = True
                    continue
                if size + len(self._queue[0].texts) > self.max_batch:
                    break
                call = self._queue.popleft()
                taken.append(call)
                size += len(call.texts)
            return taken

    def _run(self) -> None:
        while True:
            calls = self._take()
            try:
                vectors = self._encode([text for call in calls for text in call.texts])
                with self._arrived:  # runners count side by side
                    self.passes += 1
                start = 0
                for call in calls:
                    call.vectors = vectors[start:start + len(call.texts)]
                    start += len(call.texts)
            except BaseException as exc:  # noqa: BLE001 - handed to every caller of the pass
                for call in calls:
                    call.error = exc
            for call in calls:
                call.done.set()
