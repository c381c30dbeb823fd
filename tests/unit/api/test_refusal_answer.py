"""A pipeline's refusal reaches the client through one handler of the app: its status and words, or FastAPI's 422
naming the fields at fault; no route converts a refusal itself (in-process app, SQLite)."""

from __future__ import annotations

import ast
import asyncio
import json
import uuid
from pathlib import Path

from fastapi import Request

from agentsearch.api.errors import refusal_answer
from agentsearch.pipeline.refusal import Refusal, invalid, missing

API = Path(__file__).resolve().parents[3] / "src" / "agentsearch" / "api"


def _answered(app, refusal: Refusal) -> tuple[int, dict]:
    handler = app.exception_handlers[Refusal]
    request = Request({"type": "http", "method": "GET", "path": "/", "headers": [], "query_string": b""})
    response = asyncio.run(handler(request, refusal))
    return response.status_code, json.loads(response.body)


def test_the_app_answers_a_refusal_with_its_status_and_words(app):
    assert app.exception_handlers[Refusal] is refusal_answer
    assert _answered(app, Refusal(409, "a job with this Idempotency-Key is being created")) == (
        409, {"detail": "a job with this Idempotency-Key is being created"})
    assert _answered(app, missing("collection", "C")) == (404, {"detail": "collection C not found"})
    # Fields at fault: FastAPI's own 422 shape, as pydantic's errors are answered (no input echoed).
    assert _answered(app, invalid(("body", "query"), "query must not be empty")) == (
        422, {"detail": [{"loc": ["body", "query"], "msg": "query must not be empty", "type": "value_error"}]})


def test_refusals_from_the_routes_reach_the_client_as_before(client):
    nobody = uuid.uuid4()
    searched = client.post("/v1/search", json={"collection_id": str(nobody), "query": "x"})
    assert (searched.status_code, searched.json()) == (404, {"detail": f"collection {nobody} not found"})
    team = client.get(f"/v1/teams/{nobody}/audit")
    assert (team.status_code, team.json()) == (404, {"detail": f"team {nobody} not found"})
    mine = client.post("/v1/collections", json={"name": f"r-{uuid.uuid4().hex[:6]}"}).json()["id"]
    hidden = client.post(f"/v1/collections/{mine}/documents", json={"documents": [
        {"id": "d", "title": "t", "text": "x", "access": {"groups": ["nope"]}}]})
    assert (hidden.status_code, hidden.json()) == (422, {"detail": [{
        "loc": ["body", "documents", 0, "access"], "type": "value_error",
        "msg": "access groups restrict a team collection's documents; this collection is personal"}]})


def _converting_handlers(tree: ast.AST) -> list[int]:
    """Lines of ``except Refusal as exc: raise something(exc)``: a route's own copy of the app's handler."""
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.ExceptHandler) and node.name and "Refus" in ast.unparse(node.type or ast.Pass())):
            continue
        for raised in (n for n in ast.walk(node) if isinstance(n, ast.Raise) and isinstance(n.exc, ast.Call)):
            if any(isinstance(arg, ast.Name) and arg.id == node.name for arg in raised.exc.args):
                found.append(node.lineno)
    return found


def test_no_module_of_the_api_turns_a_refusal_into_an_http_error_itself():
    copies = {str(path.relative_to(API.parent)): lines for path in sorted(API.rglob("*.py"))
              if (lines := _converting_handlers(ast.parse(path.read_text())))}
    assert copies == {}, "let the Refusal go: agentsearch.api.errors.refusal_answer answers it for every route"
