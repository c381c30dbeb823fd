"""The command line waits for ingestion while it moves, and gives up only on ingestion that stalled."""

from __future__ import annotations

import pytest

from agentsearch.cli import client as client_module
from agentsearch.cli.client import ApiClient


class Clock:
    """Monotonic time that each poll's sleep moves forward by ``step_s``."""

    def __init__(self, step_s: float) -> None:
        self.now, self.step_s = 0.0, step_s

    def monotonic(self) -> float:
        return self.now

    def sleep(self, _seconds: float) -> None:
        self.now += self.step_s


def polling(monkeypatch, pendings: list[int], step_s: float) -> ApiClient:
    clock = Clock(step_s)
    monkeypatch.setattr(client_module.time, "monotonic", clock.monotonic)
    monkeypatch.setattr(client_module.time, "sleep", clock.sleep)
    client = ApiClient("http://127.0.0.1:9", "key")
    answers = iter(pendings)
    monkeypatch.setattr(client, "_call", lambda method, path: {"documents": {"pending": next(answers)}})
    return client


def test_a_wait_longer_than_the_timeout_goes_on_while_documents_finish(monkeypatch):
    # 20 polls 40 s apart (800 s in all) against a 100 s timeout: every poll sees another document finished.
    client = polling(monkeypatch, list(range(20, -1, -1)), step_s=40)
    assert client.wait_indexed("c1", timeout_s=100)["documents"]["pending"] == 0


def test_a_stalled_ingestion_gives_up_after_the_timeout_saying_what_is_left(monkeypatch):
    client = polling(monkeypatch, [9, 8, 8, 8, 8, 8, 8, 8], step_s=40)
    with pytest.raises(TimeoutError, match="8 documents still pending, none finished in the last 100 s"):
        client.wait_indexed("c1", timeout_s=100)
