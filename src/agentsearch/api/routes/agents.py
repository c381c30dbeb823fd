"""The agent registry, agent configs, and which configs a collection runs."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, Depends, Query, Request
from pydantic import ValidationError
from sqlalchemy.orm import Session

from agentsearch.api.audit import audit
from agentsearch.api.auth import CurrentUser, current_user
from agentsearch.api.errors import from_validation_error, unprocessable
from agentsearch.api.request_guard import GuardedRoute
from agentsearch.api.roles import Reach
from agentsearch.api.routes.quality import asked_of, decided, staged_gate, tolerance_of
from agentsearch.api.schemas import AgentConfigCreate, AgentConfigOut, CollectionAgentIn, CollectionAgentsIn
from agentsearch.api.services import AppServices
from agentsearch.pipeline.agents.base import Stage
from agentsearch.pipeline.agents.configs import (
    collection_agents,
    configs_by_id,
    configs_of,
    linkable_stages,
    replace_collection_agents,
)
from agentsearch.pipeline.agents.references import UnresolvedReference, UserResources, resolve_config_references
from agentsearch.pipeline.agents.registry import AgentRegistry
from agentsearch.pipeline.eval.gate import run_settings
from agentsearch.pipeline.eval.quality_runs import RunSettings
from agentsearch.pipeline.job.routing import table_problem
from agentsearch.pipeline.job.submit import collection_specs
from agentsearch.pipeline.platform.tables.agents import AgentConfigRow, CollectionAgentRow
from agentsearch.pipeline.platform.tables.collections import CollectionRow
from agentsearch.pipeline.services import Services

router = APIRouter(tags=["agents"], route_class=GuardedRoute)


@router.get("/v1/agents", dependencies=[Depends(current_user)])
def list_agents(services: AppServices) -> list[dict]:
    return services.registry.describe()


def _out(row: AgentConfigRow) -> AgentConfigOut:
    return AgentConfigOut.model_validate(row, from_attributes=True)


@router.post("/v1/agent-configs", status_code=201, response_model=AgentConfigOut)
def create_agent_config(body: AgentConfigCreate, user_id: CurrentUser, request: Request,
                        services: AppServices) -> AgentConfigOut:
    registry = services.registry
    if body.agent_id not in registry:
        known = ", ".join(a.agent_id for a in registry)
        raise unprocessable(("body", "agent_id"), f"unknown agent id {body.agent_id!r}; known: {known}")
    cls = registry.get(body.agent_id)
    if body.trigger_stage is not None and body.trigger_stage != cls.stage:
        raise unprocessable(("body", "trigger_stage"),
                            f"{body.agent_id} runs at {cls.stage.value}, not {body.trigger_stage.value}")
    try:
        validated = cls.Config.model_validate(body.config)
    except ValidationError as exc:
        raise from_validation_error(("body", "config"), exc) from None
    config = validated.model_dump(mode="json")
    # Fields naming a registered tool or a collection must name one that exists (and, for a collection, is this
    # user's); the agent checks them again when it runs.
    try:
        resolve_config_references(cls, validated, UserResources(services.db, user_id))
    except UnresolvedReference as exc:
        raise unprocessable(("body", "config", exc.field), exc.message) from None
    with services.db.session() as s:
        row = AgentConfigRow(
            user_id=user_id,
            agent_id=body.agent_id,
            name=body.name or body.agent_id,
            description=body.description,
            config=config,
            enabled=body.enabled,
            trigger_stage=cls.stage.value,
            priority=body.priority,
            timeout_s=body.timeout_s,
            cache_ttl_s=body.cache_ttl_s,
            breaker_fail_max=body.breaker_fail_max,
            breaker_reset_timeout_s=body.breaker_reset_timeout_s,
        )
        s.add(row)
        s.flush()
        audit(request, s, "agent_config.create", target=("agent_config", row.id),
              details={"agent_id": row.agent_id, "name": row.name})
        return _out(row)


@router.get("/v1/agent-configs", response_model=list[AgentConfigOut])
def list_agent_configs(user_id: CurrentUser, services: AppServices) -> list[AgentConfigOut]:
    with services.db.session() as s:
        return [_out(r) for r in configs_of(s, user_id)]


@router.get("/v1/agent-configs/{config_id}", response_model=AgentConfigOut)
def read_agent_config(config_id: uuid.UUID, user_id: CurrentUser, request: Request,
                      services: AppServices) -> AgentConfigOut:
    with services.db.session() as s:
        return _out(Reach(request, s, user_id).owned(AgentConfigRow, config_id, "agent config"))


def fallback_problem(item: CollectionAgentIn, stages: dict[uuid.UUID, str]) -> str | None:
    """What is wrong with an entry's fallback, or None. ``stages`` holds the caller's configs named by the request.

    The fallback need not be in the collection's set itself; it stands in with the failed agent's input, so it must
    be of the same stage.
    """
    fallback = item.fallback_agent_config_id
    if fallback is None:
        return None
    if fallback == item.agent_config_id:
        return "an agent config cannot be its own fallback"
    if fallback not in stages:
        return f"agent config {fallback} not found"
    if stages[fallback] != stages[item.agent_config_id]:
        return (f"the fallback runs at stage {stages[fallback]}, the agent at {stages[item.agent_config_id]}: "
                "they must match")
    return None


def routing_problems(items: list[CollectionAgentIn], configs: dict[uuid.UUID, AgentConfigRow],
                     registry: AgentRegistry) -> list[tuple[int, str]]:
    """Entries whose routing table (an agent's ``routing_field``, e.g. the intent classifier's ``routes``) names an
    agent the set does not run after it in its stage, with why: known now, so refused now rather than recorded as
    that agent's error in every job."""
    running = [(item, configs[item.agent_config_id]) for item in items
               if item.enabled and configs[item.agent_config_id].enabled]

    def priority(item: CollectionAgentIn, cfg: AgentConfigRow) -> int:
        return item.priority if item.priority is not None else cfg.priority

    problems = []
    for i, item in enumerate(items):
        cfg = configs[item.agent_config_id]
        field = registry.get(cfg.agent_id).routing_field if cfg.agent_id in registry else None
        table = (cfg.config or {}).get(field) if field else None
        if not table or not item.enabled or not cfg.enabled:
            continue
        stage = Stage(cfg.trigger_stage)
        order = [(c.agent_id, str(c.id)) for it, c in sorted(
            ((it, c) for it, c in running if c.trigger_stage == cfg.trigger_stage),
            key=lambda pair: (priority(*pair), pair[1].agent_id))]
        if (problem := table_problem(table, str(cfg.id), order, stage)) is not None:
            problems.append((i, f"{field}: {problem}"))
    return problems


def _replace_agents(s: Session, collection_id: uuid.UUID, body: CollectionAgentsIn, user_id: uuid.UUID,
                    registry: AgentRegistry) -> None:
    """The collection's set replaced by the body's, each entry checked (422 naming it)."""
    wanted = [a.agent_config_id for a in body.agents]
    named = wanted + [a.fallback_agent_config_id for a in body.agents if a.fallback_agent_config_id is not None]
    stages = linkable_stages(s, collection_id, user_id, named)
    for i, item in enumerate(body.agents):
        if item.agent_config_id not in stages:
            raise unprocessable(("body", "agents", i, "agent_config_id"),
                                f"agent config {item.agent_config_id} not found")
        if wanted.index(item.agent_config_id) != i:
            raise unprocessable(("body", "agents", i, "agent_config_id"), "listed twice")
        if (problem := fallback_problem(item, stages)) is not None:
            raise unprocessable(("body", "agents", i, "fallback_agent_config_id"), problem)
    configs = configs_by_id(s, wanted)
    for i, problem in routing_problems(body.agents, configs, registry)[:1]:
        raise unprocessable(("body", "agents", i, "agent_config_id"), problem)
    replace_collection_agents(s, collection_id, [
        CollectionAgentRow(collection_id=collection_id, agent_config_id=item.agent_config_id, priority=item.priority,
                           enabled=item.enabled, fallback_agent_config_id=item.fallback_agent_config_id,
                           critical=item.critical)
        for item in body.agents
    ])


@router.put("/v1/collections/{collection_id}/agents")
def set_collection_agents(collection_id: uuid.UUID, body: CollectionAgentsIn, user_id: CurrentUser, request: Request,
                          services: AppServices, stage: bool = Query(False, description="Measure the new set on the "
                          "collection's question set beside the current one; apply it only if no figure falls past "
                          "the collection's tolerance (else 409 with both sets of figures).")) -> dict:
    """Replace the set of agent configs this collection runs (with per-collection priority and enabled).

    Concurrent replacements of one collection's set take turns on the collection's row lock: each deletes what
    the one before it committed and inserts its own, so the last one wins whole (never a unique-key clash).
    Staged, the new set is checked and read as a job would snapshot it, then measured (``routes/quality.py``).
    """
    gate = None
    if stage:
        with services.db.session() as s:
            collection = Reach(request, s, user_id).collection(collection_id)
            current, staged = staged_agent_sets(s, collection, body, user_id, services)
            questions, tolerance = asked_of(s, collection_id), tolerance_of(collection, services)
        decision = staged_gate(services, collection_id, staged, current, questions, tolerance)
        change = {"agent_config_ids": [str(a.agent_config_id) for a in body.agents[:20]]}
        decided(request, services, collection_id, change, decision, current, staged)
        gate = decision.as_json()
    with services.db.session() as s:
        Reach(request, s, user_id).collection(collection_id, lock=True)
        _replace_agents(s, collection_id, body, user_id, services.registry)
        audit(request, s, "collection.agents.set", collection_id=collection_id, target=("collection", collection_id),
              details={"agent_config_ids": [str(a.agent_config_id) for a in body.agents[:20]]})
    return {"collection_id": str(collection_id), "agents": [a.model_dump(mode="json") for a in body.agents],
            **({"gate": gate} if gate is not None else {})}


def staged_agent_sets(s: Session, collection: CollectionRow, body: CollectionAgentsIn, user_id: uuid.UUID,
                      services: Services) -> tuple[RunSettings, RunSettings]:
    """The collection's settings with its agent set now and with the body's, each as a job would snapshot it: the
    body's set is written in a savepoint, read, and taken back."""
    searched = run_settings(collection.search_settings, services.settings)
    now = collection_specs(s, collection.id, services.registry)
    savepoint = s.begin_nested()
    _replace_agents(s, collection.id, body, user_id, services.registry)
    s.flush()
    then = collection_specs(s, collection.id, services.registry)
    savepoint.rollback()
    return (RunSettings(searched.search, searched.top_k, tuple(now)),
            RunSettings(searched.search, searched.top_k, tuple(then)))


@router.get("/v1/collections/{collection_id}/agents")
def read_collection_agents(collection_id: uuid.UUID, user_id: CurrentUser, request: Request,
                           services: AppServices) -> dict:
    """The collection's agent set in the shape ``PUT`` takes (so a client can change one entry and send it back),
    in the order a job runs each stage: by priority (the collection's, else the config's), then agent id."""
    with services.db.session() as s:
        Reach(request, s, user_id).collection(collection_id)
        rows = collection_agents(s, collection_id)
        fields = list(CollectionAgentIn.model_fields)
        ordered = sorted(rows, key=lambda r: (r[0].priority if r[0].priority is not None else r[1].priority,
                                              r[1].agent_id))
        agents = [CollectionAgentIn.model_validate({f: getattr(link, f) for f in fields}).model_dump(mode="json")
                  for link, _config in ordered]
    return {"collection_id": str(collection_id), "agents": agents}
