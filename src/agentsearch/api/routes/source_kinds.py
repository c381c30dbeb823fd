"""The kinds of source and the JSON schema of each one's config: what the console's form for a new source is made
from (``src/agentsearch/api/console/sources.js``), and what a client reads to know a kind's settings.

A credential field (a ``SecretStr``: ``password``, ``secret_key``, ``token``) is named in ``credentials`` and marked
``"format": "password", "writeOnly": true`` in the schema, so a form asks for it as a password and never shows it.

Usage::

    GET /v1/source-kinds   -> {"items": [{"kind": "feed", "schema": {...}, "credentials": []}, ...]}
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from agentsearch.api.auth import CurrentUser
from agentsearch.api.request_guard import GuardedRoute
from agentsearch.pipeline.sources.kinds import KINDS

router = APIRouter(prefix="/v1/source-kinds", tags=["sources"], route_class=GuardedRoute)


def kind_schemas() -> list[dict[str, Any]]:
    """Every kind by name, its config's JSON schema and its credential fields."""
    items = []
    for name in sorted(KINDS):
        model = KINDS[name].config_model
        items.append({"kind": name, "schema": model.model_json_schema(), "credentials": model.secret_fields()})
    return items


@router.get("")
def list_source_kinds(user_id: CurrentUser) -> dict[str, Any]:
    return {"items": kind_schemas()}
