"""Agent-chosen next agents: routing decisions (forward, twice, unknown, backwards) and the steps that follow them,
with the real AgentRunner (fake Redis) and fake agents; the intent classifier's routing table."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agentsearch.pipeline.agents.base import AgentConfig, PreSearchAgent, PreSearchOutput, Stage
from agentsearch.pipeline.agents.builtin.intent_classifier import IntentClassifier
from agentsearch.pipeline.agents.fallback import CriticalAgentFailed
from agentsearch.pipeline.job.agent_call import post_search_step, pre_search_step
from agentsearch.pipeline.job.job_state import JobState
from agentsearch.pipeline.job.routing import ROUTED, RouteRefused, table_problem, target
from agentsearch.pipeline.records.agent_runs import AgentSpec

PEERS = [("router", "c-router"), ("a", "c-a"), ("b", "c-b"), ("c", "c-c")]


def test_target_goes_forward_by_agent_id_or_config_id():
    assert target(PEERS, 0, "c", Stage.PRE_SEARCH) == 3
    assert target(PEERS, 0, "c-b", Stage.PRE_SEARCH) == 2
    # Two configs of one agent: the first after the one routing.
    twice = [("a", "1"), ("router", "2"), ("a", "3"), ("a", "4")]
    assert target(twice, 1, "a", Stage.PRE_SEARCH) == 2


@pytest.mark.parametrize(("current", "name", "words"), [
    (0, "nobody", "not an agent of the pre_search stage (router, a, b, c)"),
    (2, "a", "does not come after this agent"),       # backwards
    (2, "b", "does not come after this agent"),       # itself: a stage never runs an agent twice
    (None, "a", "does not come after this agent"),    # the routing agent is not one of the stage's
])
def test_target_refuses_unknown_backwards_and_twice(current, name, words):
    with pytest.raises(RouteRefused, match=words.replace("(", r"\(").replace(")", r"\)")):
        target(PEERS, current, name, Stage.PRE_SEARCH)


def test_table_problem_names_the_route_at_fault():
    order = [("intent_classifier", "ic"), ("query_expander", "qe")]
    assert table_problem({"hr": "query_expander"}, "ic", order, Stage.PRE_SEARCH) is None
    problem = table_problem({"hr": "query_expander", "finance": "acronym_resolver"}, "ic", order, Stage.PRE_SEARCH)
    assert problem.startswith("its config's 'finance' route: next_agent_id 'acronym_resolver' is not an agent")
    assert "does not come after" in table_problem({"hr": "intent_classifier"}, "ic", order, Stage.PRE_SEARCH)


class Router(PreSearchAgent):
    agent_id = "router"
    cacheable = False

    class Config(AgentConfig):
        to: str | None = None

    def run(self, inp, ctx):
        return PreSearchOutput(query=f"{inp.query} +router", next_agent_id=self.config.to, metadata={"routed": 1})


def tagger(name: str) -> type[PreSearchAgent]:
    class Tagger(PreSearchAgent):
        agent_id = name
        cacheable = False

        def run(self, inp, ctx):
            return PreSearchOutput(query=f"{inp.query} +{name}")

    return Tagger


AGENTS = (Router, tagger("a"), tagger("b"), tagger("c"))


def spec(agent_id: str, **kw) -> AgentSpec:
    return AgentSpec(agent_id=agent_id, stage=Stage.PRE_SEARCH, config_id=f"c-{agent_id}", **kw)


def run_stage(runner, to: str | None, **router_kw) -> JobState:
    job = JobState(job_id="j1", collection_id="c1", user_id="u1", query="q")
    for s in (spec("router", config={"to": to}, **router_kw), spec("a"), spec("b"), spec("c")):
        job = pre_search_step(job, s, runner, stage_agents=PEERS)
    return job


def test_a_routed_stage_passes_over_the_agents_between_and_goes_on_in_order(make_runner):
    job = run_stage(make_runner(*AGENTS), "c-b")
    assert [(r.agent_id, r.status, (r.errors or [None])[0]) for r in job.agent_runs] == [
        ("router", "ok", None), ("a", "skipped", ROUTED), ("b", "ok", None), ("c", "ok", None)]
    assert job.query == "q +router +b +c"
    assert job.agent_runs[0].next_agent_id == "c-b"
    assert job.agent_runs[1].metadata == {"routed_by": "router", "routed_to": "b"}
    assert job.routes == {}  # the route ended at the agent it named


@pytest.mark.parametrize("to", ["nobody", "router"])
def test_an_unknown_or_repeated_name_is_the_router_s_error_and_the_stage_goes_on(make_runner, to):
    job = run_stage(make_runner(*AGENTS), to)
    first = job.agent_runs[0]
    assert first.status == "error" and first.next_agent_id == to
    assert "next_agent_id" in first.errors[-1]
    assert [r.status for r in job.agent_runs[1:]] == ["ok", "ok", "ok"]
    assert job.query == "q +a +b +c" and "routed" not in job.metadata  # its output went unused


def test_a_critical_router_naming_nobody_fails_the_job(make_runner):
    with pytest.raises(CriticalAgentFailed, match="next_agent_id 'nobody'"):
        run_stage(make_runner(*AGENTS), "nobody", critical=True)


def test_post_search_agents_route_the_same_way(make_runner):
    from agentsearch.pipeline.agents.base import PostSearchAgent, PostSearchOutput

    class PostRouter(PostSearchAgent):
        agent_id = "post_router"
        cacheable = False

        def run(self, inp, ctx):
            return PostSearchOutput(documents=inp.documents, next_agent_id="last")

    class Last(PostSearchAgent):
        agent_id = "last"
        cacheable = False

        def run(self, inp, ctx):
            return PostSearchOutput(documents=inp.documents, metadata={"last": True})

    runner = make_runner(PostRouter, Last)
    peers = [("post_router", None), ("middle", None), ("last", None)]
    job = JobState(job_id="j1", collection_id="c1", query="q")
    for agent_id in ("post_router", "middle", "last"):
        job = post_search_step(job, AgentSpec(agent_id=agent_id, stage=Stage.POST_SEARCH), runner, stage_agents=peers)
    assert [(r.agent_id, r.status) for r in job.agent_runs] == [
        ("post_router", "ok"), ("middle", "skipped"), ("last", "ok")]
    assert job.metadata["last"] is True


def test_intent_classifier_routes_by_intent_from_its_config():
    class Tools:
        def embed(self, texts):
            return [[1.0, 0.0] if "leave" in t or "holiday" in t else [0.0, 1.0] for t in texts]

    from agentsearch.pipeline.agents.base import AgentContext, PreSearchInput

    agent = IntentClassifier({"intents": {"hr": ["annual leave"], "finance": ["revenue"]}, "mode": "embedding",
                              "routes": {"hr": "query_expander"}})
    ctx = AgentContext(pipeline_stage=Stage.PRE_SEARCH, tools=Tools())
    assert agent.run(PreSearchInput(query="holiday days"), ctx).next_agent_id == "query_expander"
    assert agent.run(PreSearchInput(query="quarterly revenue"), ctx).next_agent_id is None  # no route: in order
    with pytest.raises(ValidationError, match="routes names the intent 'legal'"):
        IntentClassifier.Config(intents={"hr": ["leave"]}, routes={"legal": "x"})
    assert IntentClassifier.routing_field == "routes"


def test_the_canvas_stays_one_task_per_agent_each_told_its_stage_s_agents_in_order():
    from kombu.utils.json import dumps, loads

    from agentsearch.worker.job_tasks import build_job_canvas

    specs = [AgentSpec(agent_id="b", stage=Stage.PRE_SEARCH, priority=5, config_id="cb"),
             AgentSpec(agent_id="a", stage=Stage.PRE_SEARCH, priority=1, config_id="ca"),
             AgentSpec(agent_id="alone", stage=Stage.POST_SEARCH)]
    canvas = build_job_canvas("j1", specs)
    steps = [t for t in canvas.tasks if "spec" in t.kwargs]
    assert [s.kwargs["spec"]["agent_id"] for s in steps] == ["a", "b", "alone"]
    assert steps[0].kwargs["peers"] == steps[1].kwargs["peers"] == [["a", "ca"], ["b", "cb"]]
    assert "peers" not in steps[2].kwargs  # alone in its stage: nothing to route to
    # Plain data: what the broker carries is the same list.
    assert loads(dumps(steps[1]))["kwargs"]["peers"] == [["a", "ca"], ["b", "cb"]]
