"""The micro-batcher: concurrent embed calls share forward passes, and each caller gets exactly its own rows."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from agentsearch.pipeline.retrieval.micro_batcher import MicroBatcher


class SlowModel:
    """Encodes a text as [its length, its number]; each pass takes a while, as a forward pass does."""

    def __init__(self, pass_s: float = 0.02) -> None:
        self.pass_s = pass_s
        self.batches: list[list[str]] = []
        self.running = 0
        self.most_at_once = 0
        self._lock = threading.Lock()

    def __call__(self, texts: list[str]) -> list[list[float]]:
        with self._lock:
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
        time.sleep(self.pass_s)
        with self._lock:
            self.running -= 1
            self.batches.append(list(texts))
        return [[float(len(t)), float(t.rsplit(" ", 1)[-1])] for t in texts]


def test_concurrent_calls_share_passes_and_get_their_own_rows():
    model = SlowModel()
    batcher = MicroBatcher(model, max_batch=64, max_wait_s=0.002)

    def call(i: int) -> list[list[float]]:
        return batcher.embed([f"text {i}", f"other text {i}"])

    with ThreadPoolExecutor(32) as pool:
        results = list(pool.map(call, range(96)))
    for i, vectors in enumerate(results):
        assert vectors == [[float(len(f"text {i}")), float(i)], [float(len(f"other text {i}")), float(i)]]
    # 96 calls, one pass at a time: served in far fewer passes than calls, none above the batch size.
    assert model.most_at_once == 1
    assert len(model.batches) < 96 / 4
    assert max(len(b) for b in model.batches) <= 64
    assert sum(len(b) for b in model.batches) == 192


def test_a_failed_pass_fails_each_of_its_calls_and_the_next_pass_runs():
    calls = {"n": 0}

    def flaky(texts: list[str]) -> list[list[float]]:
        calls["n"] += 1
        if calls["n"] == 1:
            time.sleep(0.05)
            raise RuntimeError("model broke")
        return [[1.0] for _ in texts]

    batcher = MicroBatcher(flaky, max_batch=8, max_wait_s=0.01)
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(batcher.embed, ["a 1"])
        with pytest.raises(RuntimeError, match="model broke"):
            first.result(timeout=5)
    assert batcher.embed(["b 2"]) == [[1.0]]


def test_a_call_larger_than_the_batch_goes_alone_and_whole():
    model = SlowModel(pass_s=0.0)
    batcher = MicroBatcher(model, max_batch=4)
    texts = [f"t {i}" for i in range(10)]
    assert [v[1] for v in batcher.embed(texts)] == [float(i) for i in range(10)]
    assert model.batches == [texts]
    assert batcher.embed([]) == []


def test_settings_are_checked():
    with pytest.raises(ValueError):
        MicroBatcher(SlowModel(), max_batch=0)


def test_runners_take_calls_side_by_side_and_each_caller_still_gets_its_rows():
    # Two passes must be inside the model at once to pass the barrier: one runner would wait on it alone and fail.
    barrier = threading.Barrier(2, timeout=10)

    def model(texts: list[str]) -> list[list[float]]:
        barrier.wait()
        return [[float(len(t))] for t in texts]

    batcher = MicroBatcher(model, max_batch=1, max_wait_s=0, runners=2)
    with ThreadPoolExecutor(2) as pool:
        got = list(pool.map(lambda text: batcher.embed([text]), ["ab", "abcd"]))
    assert got == [[[2.0]], [[4.0]]]
    assert batcher.passes == 2
    with pytest.raises(ValueError):
        MicroBatcher(model, runners=0)
