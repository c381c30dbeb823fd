"""A profile set's briefing: the response agents its runs end with (the PDF report, the e-mail draft, a summary),
so that a scheduled set over a collection its sources keep in step delivers the original design's daily briefing
rather than a list of results alone.

A set names them as ``agents: [{"agent_id": "pdf_report"}, {"agent_id": "email_draft", "config": {...}}]``; each is
a response agent of the registry, its config checked by the agent's own model when the set is made, so a run never
meets a config its agent refuses. Each run's job runs them after its answer, as a search naming them would.

Usage::

    agents = checked_agents([{"agent_id": "pdf_report"}], registry)     # Refusal (422) naming the field at fault
    specs = briefing_specs(agents, registry)                           # [AgentSpec] for the run's job
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from agentsearch.pipeline.agents.registry import AgentRegistry
from agentsearch.pipeline.records.agent_runs import AgentSpec, Stage
from agentsearch.pipeline.refusal import invalid, invalid_fields

LOC = ("body", "agents")


def checked_agents(agents: list[Any] | None, registry: AgentRegistry) -> list[dict[str, Any]]:
    """The set's response agents as stored (``{"agent_id", "config"}`` each, the config as its model reads it), or a
    ``Refusal`` naming ``["body", "agents", i, ...]``."""
    checked: list[dict[str, Any]] = []
    for i, entry in enumerate(agents or []):
        if not isinstance(entry, dict) or set(entry) - {"agent_id", "config"}:
            raise invalid((*LOC, i), "each agent is {\"agent_id\": ..., \"config\"?: {...}}")
        agent_id, config = entry.get("agent_id"), entry.get("config") or {}
        if not isinstance(agent_id, str) or agent_id not in registry:
            raise invalid((*LOC, i, "agent_id"), f"no agent {agent_id!r}: GET /v1/agents lists them")
        cls = registry.get(agent_id)
        if cls.stage != Stage.RESPONSE or cls.references:
            raise invalid((*LOC, i, "agent_id"), f"{agent_id} is not a response agent a briefing can run "
                                                 "(pdf_report, email_draft, executive_summary, ...)")
        if not isinstance(config, dict):
            raise invalid((*LOC, i, "config"), "config must be an object")
        try:
            model = cls.Config.model_validate(config)
        except ValidationError as exc:
            raise invalid_fields((*LOC, i, "config"), exc) from None
        if agent_id in {a["agent_id"] for a in checked}:
            raise invalid((*LOC, i, "agent_id"), f"{agent_id} is named twice")
        checked.append({"agent_id": agent_id, "config": model.model_dump(mode="json", exclude_unset=True)})
    return checked


def briefing_specs(agents: list[dict[str, Any]] | None, registry: AgentRegistry) -> list[AgentSpec]:
    """The run's response agents in the order the set names them; one the registry no longer has is left out (a
    run still delivers its results)."""
    specs = []
    for i, entry in enumerate(agents or []):
        if entry.get("agent_id") not in registry:
            continue
        cls = registry.get(entry["agent_id"])
        specs.append(AgentSpec(agent_id=cls.agent_id, stage=cls.stage, config=entry.get("config") or {},
                               priority=i * 10, timeout_s=cls.default_timeout_s))
    return specs
