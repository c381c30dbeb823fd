"""The retrievers of one search run side by side (``agentsearch.pipeline.retrieval.retriever``): each on a thread of its
own, kept when done by the stage's deadline, left behind with a warning when not.

Usage::

    retrievers = ParallelRetrievers(metrics)           # metrics: {"errors": [], ...}, the search's own
    retrievers.start("dense", lambda: store.dense_search(name, vector, limit=100))
    retrievers.start("keyword", lambda: store.keyword_search(name, analyzed, limit=100))
    hits = retrievers.wait(timeout_s=2.0, warnings=warnings)   # {"dense": [...]} when keyword was late
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from agentsearch.pipeline.retrieval.stored_chunks import Hit


class ParallelRetrievers:
    """The retrievers of one search, each on a thread of its own from the moment it can start; ``wait`` keeps what
    is done by the deadline and records the others in ``metrics["timed_out"]`` (errors in ``metrics["errors"]``)."""

    def __init__(self, metrics: dict) -> None:
        self._metrics = metrics
        self._results: dict[str, list[Hit]] = {}
        self._pending: set[str] = set()
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._done.set()

    def start(self, name: str, job: Callable[[], list[Hit]]) -> None:
        with self._lock:
            self._pending.add(name)
            self._done.clear()
        threading.Thread(target=self._run, args=(name, job), daemon=True, name=f"search-{name}").start()

    def _run(self, name: str, job: Callable[[], list[Hit]]) -> None:
        try:
            found = job()
            with self._lock:
                self._results[name] = found
        except Exception as exc:  # noqa: BLE001 - recorded; the other retriever may still answer
            with self._lock:
                self._metrics["errors"].append(f"{name} search failed: {type(exc).__name__}: {exc}")
        finally:
            with self._lock:
                self._pending.discard(name)
                if not self._pending:
                    self._done.set()

    def wait(self, timeout_s: float, warnings: list[str]) -> dict[str, list[Hit]]:
        if not self._done.wait(timeout_s):
            with self._lock:
                late = sorted(self._pending)
            if late:
                warnings.append(f"stage deadline of {timeout_s:g} s passed; partial results without {', '.join(late)}")
                self._metrics["timed_out"] = late
        with self._lock:
            return dict(self._results)
