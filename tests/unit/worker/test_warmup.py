"""Agents warmed up as a worker starts: each agent with something to load, once, only those the worker runs."""

from __future__ import annotations

from typing import ClassVar

from agentsearch.pipeline.agents.base import PostSearchAgent, PreSearchAgent, ResponseAgent, Stage
from agentsearch.pipeline.agents.registry import AgentRegistry
from agentsearch.worker.warmup import stages_served, warm_agents


class Loads(PreSearchAgent):
    agent_id = "loads"
    calls: ClassVar[list[str]] = []

    def warm_up(self) -> None:
        self.calls.append(self.agent_id)


class Fails(PostSearchAgent):
    agent_id = "fails"

    def warm_up(self) -> None:
        raise OSError("dictionary missing")


class Renders(ResponseAgent):
    agent_id = "renders"
    calls: ClassVar[list[str]] = []

    def warm_up(self) -> None:
        self.calls.append(self.agent_id)


class Nothing(PreSearchAgent):
    agent_id = "nothing"


def test_every_agent_with_a_warm_up_is_warmed_and_a_failure_is_left_to_its_first_run():
    Loads.calls.clear()
    Renders.calls.clear()
    took = warm_agents(AgentRegistry([Loads, Fails, Renders, Nothing]))
    assert set(took) == {"loads", "renders"}  # "fails" logged, "nothing" has nothing to load
    assert Loads.calls == ["loads"] and Renders.calls == ["renders"]


def test_a_worker_warms_only_the_stages_its_queues_bring():
    assert stages_served({"celery"}) == {Stage.PRE_SEARCH, Stage.POST_SEARCH}
    assert stages_served({"artifacts"}) == {Stage.RESPONSE}
    assert stages_served({"celery", "artifacts"}) == set(Stage)
    assert stages_served({"ingest"}) == set()
    assert stages_served(None) is None and stages_served(set()) is None
    Loads.calls.clear()
    Renders.calls.clear()
    warm_agents(AgentRegistry([Loads, Renders]), stages_served({"artifacts"}))
    assert Loads.calls == [] and Renders.calls == ["renders"]


def test_the_language_model_is_loaded_at_start_and_a_failure_left_to_the_first_text(monkeypatch, caplog):
    from agentsearch.pipeline.retrieval import language
    from agentsearch.worker.warmup import warm_language_model

    loaded: list[bool] = []
    monkeypatch.setattr(language, "warm_up", lambda: loaded.append(True))
    warm_language_model()
    assert loaded == [True]

    def missing() -> None:
        raise OSError("model file missing")

    monkeypatch.setattr(language, "warm_up", missing)
    warm_language_model()  # logged, not raised: the first text tries again
    assert "language model not loaded at start" in caplog.text
