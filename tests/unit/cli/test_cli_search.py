"""``agentsearch search`` options that shape the job it submits, with the API session replaced by a recorder."""

from __future__ import annotations

from contextlib import contextmanager

from click.testing import CliRunner

import agentsearch.cli.search as search_module
from agentsearch.pipeline.platform.settings import Settings


class RecordingClient:
    def __init__(self) -> None:
        self.submitted: dict = {}

    def find_collection(self, name: str) -> dict:
        return {"id": "c1", "name": name}

    def submit(self, collection_id: str, query: str, **options) -> str:
        self.submitted = {"collection_id": collection_id, "query": query, **options}
        return "job-1"


def run(monkeypatch, *args: str):
    client = RecordingClient()

    @contextmanager
    def session(settings):
        yield client

    monkeypatch.setattr(search_module, "api_session", session)
    # --no-wait asks for an API of its own; the recorder stands in for it.
    monkeypatch.setattr(search_module, "get_settings", lambda: Settings(api_url="http://api.test"))
    result = CliRunner().invoke(search_module.search, ["what?", "--collection", "docs", "--no-wait", *args])
    return result, client


def test_stage_budgets_are_sent_with_the_job(monkeypatch):
    result, client = run(monkeypatch, "--stage-timeout", "pre_search=2", "--stage-timeout", "response=7.5")
    assert result.exit_code == 0, result.output
    assert client.submitted["stage_timeouts"] == {"pre_search": 2.0, "response": 7.5}
    result, client = run(monkeypatch)
    assert client.submitted["stage_timeouts"] is None  # none given: the collection's budgets apply


def test_a_malformed_stage_budget_is_refused_before_anything_is_sent(monkeypatch):
    # nan and inf are floats to Python but no JSON body can carry them: they failed in the HTTP client, unexplained.
    for bad in ("response", "response=soon", "=3", "response=nan", "response=inf", "response=-inf"):
        result, client = run(monkeypatch, "--stage-timeout", bad)
        assert result.exit_code != 0 and "expected STAGE=SECONDS" in result.output, result.output
        assert client.submitted == {}
