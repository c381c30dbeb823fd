"""The agent registry, agent configs, and which configs a collection runs."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, Depends, Request
from pydantic import ValidationError
from sqlalchemy import delete, select

from api.auth import CurrentUser, current_user
from api.errors import from_validation_error, not_found, unprocessable
from api.request_guard import GuardedRoute
from api.routes.collections import get_collection
from api.schemas import AgentConfigCreate, AgentConfigOut, CollectionAgentsIn
from pipeline.agents.references import UnresolvedReference, UserResources, resolve_config_references
from pipeline.platform.db import AgentConfigRow, CollectionAgent

router = APIRouter(tags=["agents"], route_class=GuardedRoute)


@router.get("/v1/agents", dependencies=[Depends(current_user)])
def list_agents(request: Request) -> list[dict]:
    return request.app.state.services.registry.describe()


def _out(row: AgentConfigRow) -> AgentConfigOut:
    return AgentConfigOut.model_validate(row, from_attributes=True)


@router.post("/v1/agent-configs", status_code=201, response_model=AgentConfigOut)
def create_agent_config(body: AgentConfigCreate, user_id: CurrentUser, request: Request) -> AgentConfigOut:
    registry = request.app.state.services.registry
    if body.agent_id not in registry:
        known = ", ".join(a.agent_id for a in registry)
        raise unprocessable(("body", "agent_id"), f"unknown agent id {body.agent_id!r}; known: {known}")
    cls = registry.get(body.agent_id)
    if body.trigger_stage is not None and body.trigger_stage != cls.stage:
        raise unprocessable(("body", "trigger_stage"), f"{body.agent_id} runs at {cls.stage.value}, not {body.trigger_stage.value}")
    try:
        validated = cls.Config.model_validate(body.config)
    except ValidationError as exc:
        raise from_validation_error(("body", "config"), exc) from None
    config = validated.model_dump(mode="json")
    # Fields naming a registered tool or a collection must name one that exists (and, for a collection, is this
    # user's); the agent checks them again when it runs.
    try:
        resolve_config_references(cls, validated, UserResources(request.app.state.services.db, user_id))
    except UnresolvedReference as exc:
        raise unprocessable(("body", "config", exc.field), exc.message) from None
    with request.app.state.services.db.session() as s:
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
        return _out(row)


@router.get("/v1/agent-configs", response_model=list[AgentConfigOut])
def list_agent_configs(user_id: CurrentUser, request: Request) -> list[AgentConfigOut]:
    with request.app.state.services.db.session() as s:
        rows = s.scalars(
            select(AgentConfigRow).where(AgentConfigRow.user_id == user_id).order_by(AgentConfigRow.created_at)
        ).all()
        return [_out(r) for r in rows]


@router.get("/v1/agent-configs/{config_id}", response_model=AgentConfigOut)
def read_agent_config(config_id: uuid.UUID, user_id: CurrentUser, request: Request) -> AgentConfigOut:
    with request.app.state.services.db.session() as s:
        row = s.get(AgentConfigRow, config_id)
        if row is None or row.user_id != user_id:
            raise not_found("agent config", config_id)
        return _out(row)


@router.put("/v1/collections/{collection_id}/agents")
def set_collection_agents(collection_id: uuid.UUID, body: CollectionAgentsIn, user_id: CurrentUser, request: Request) -> dict:
    """Replace the set of agent configs this collection runs (with per-collection priority and enabled).

    Concurrent replacements of one collection's set take turns on the collection's row lock: each deletes what
    the one before it committed and inserts its own, so the last one wins whole (never a unique-key clash).
    """
    with request.app.state.services.db.session() as s:
        get_collection(s, collection_id, user_id, lock=True)
        wanted = [a.agent_config_id for a in body.agents]
        found = set(
            s.scalars(
                select(AgentConfigRow.id).where(AgentConfigRow.id.in_(wanted), AgentConfigRow.user_id == user_id)
            ).all()
        )
        for i, item in enumerate(body.agents):
            if item.agent_config_id not in found:
                raise unprocessable(("body", "agents", i, "agent_config_id"), f"agent config {item.agent_config_id} not found")
            if wanted.index(item.agent_config_id) != i:
                raise unprocessable(("body", "agents", i, "agent_config_id"), "listed twice")
        s.execute(delete(CollectionAgent).where(CollectionAgent.collection_id == collection_id))
        for item in body.agents:
            s.add(
                CollectionAgent(
                    collection_id=collection_id,
                    agent_config_id=item.agent_config_id,
                    priority=item.priority,
                    enabled=item.enabled,
                )
            )
    return {"collection_id": str(collection_id), "agents": [a.model_dump(mode="json") for a in body.agents]}
