"""Agent-chosen next agents: an agent's result names ``next_agent_id``, the agent of the same stage to run next.

A stage runs its agents in order (priority, then agent id). An agent may name one that comes after it (by agent id
or config id; with two configs of one agent, the first after it): the agents between are passed over, each recorded
``skipped`` with the reason ``routed``, and the stage goes on in order from the one named. A stage never runs an
agent twice and never goes back, so a name that is not an agent of the stage, the agent itself, or one before it is
an error of the agent that named it (recorded; its output is not used; the job goes on).

The canvas stays one task per agent: the route lives in the job's state (``JobState.routes``), and each agent's
step asks ``passed_over`` first. Response agents run side by side: they do not route.

Usage::

    stage_agents = [("intent_classifier", "c1"), ("query_expander", "c2"), ("acronym_resolver", "c3")]
    problem = follow(state, spec, stage_agents, "acronym_resolver")   # None: routed
    skip = passed_over(state, spec, stage_agents)   # the record of an agent the route passes over, else None
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from agentsearch.pipeline.agents.base import Stage
from agentsearch.pipeline.job.job_state import JobState
from agentsearch.pipeline.records.agent_runs import AgentRun, AgentSpec

ROUTED = "routed"
StageAgent = tuple[str, str | None]  # (agent_id, config_id)


class RouteRefused(ValueError):
    """What is wrong with a ``next_agent_id``: recorded as the naming agent's error."""


def ordered(specs: Iterable[AgentSpec], stage: Stage) -> list[AgentSpec]:
    """The agents of one stage in the order the job runs them: by priority, then agent id."""
    return sorted((s for s in specs if s.stage == stage), key=lambda s: (s.priority, s.agent_id))


def position(stage_agents: Sequence[StageAgent], spec: AgentSpec) -> int | None:
    try:
        return list(stage_agents).index((spec.agent_id, spec.config_id))
    except ValueError:
        return None


def target(stage_agents: Sequence[StageAgent], current: int | None, name: str, stage: Stage) -> int:
    """The index of the agent ``name`` routes to from ``current``; raises ``RouteRefused`` if it may not."""
    matches = [i for i, (agent_id, config_id) in enumerate(stage_agents) if name in (agent_id, config_id)]
    if not matches:
        known = ", ".join(agent_id for agent_id, _ in stage_agents) or "none"
        raise RouteRefused(f"next_agent_id {name!r} is not an agent of the {stage.value} stage ({known})")
    ahead = [i for i in matches if current is not None and i > current]
    if not ahead:
        raise RouteRefused(f"next_agent_id {name!r} does not come after this agent in the {stage.value} stage: "
                           "a stage runs each agent at most once, in order")
    return ahead[0]


def follow(state: JobState, spec: AgentSpec, stage_agents: Sequence[StageAgent], name: str) -> str | None:
    """Record in ``state`` that ``spec``'s agent routed to ``name``; the refusal's words when it may not."""
    try:
        chosen = target(stage_agents, position(stage_agents, spec), name, spec.stage)
    except RouteRefused as exc:
        return str(exc)
    agent_id, config_id = stage_agents[chosen]
    state.routes[spec.stage.value] = {"by": spec.agent_id, "to": agent_id, "to_config": config_id}
    return None


def passed_over(state: JobState, spec: AgentSpec) -> AgentRun | None:
    """The record of ``spec``'s agent when its stage's route passes it over; None when it runs (the agent routed
    to ends the route: the stage goes on in order after it)."""
    route = state.routes.get(spec.stage.value)
    if route is None:
        return None
    if (route["to"], route.get("to_config")) == (spec.agent_id, spec.config_id):
        del state.routes[spec.stage.value]
        return None
    return AgentRun(agent_id=spec.agent_id, config_id=spec.config_id, stage=spec.stage, success=False,
                    status="skipped", errors=[ROUTED], metadata={"routed_by": route["by"], "routed_to": route["to"]})


def table_problem(table: dict[str, str], router: str, order: Sequence[tuple[str, str]], stage: Stage) -> str | None:
    """What is wrong with a routing table (label -> agent id or config id) of the agent ``router`` (a config id)
    in a set whose stage runs ``order`` ((agent_id, config_id), in order); None when every entry may be followed."""
    current = next((i for i, (_, config_id) in enumerate(order) if config_id == router), None)
    for label, name in table.items():
        try:
            target(order, current, name, stage)
        except RouteRefused as exc:
            return f"its config's {label!r} route: {exc}"
    return None
