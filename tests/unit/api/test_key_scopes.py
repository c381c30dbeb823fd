"""Scoped API keys: durations and scopes as given, the limits as stored, the table of what each route needs (every
route of the app in it), and the API's answers to limited keys (in-process app, SQLite)."""

from __future__ import annotations

import importlib
import pkgutil
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from fastapi.routing import APIRoute
from starlette.routing import Route

import agentsearch.api.routes
from agentsearch.api.auth import current_user
from agentsearch.api.route_rules import FRAMEWORK_PATHS, ROUTE_RULES, template
from agentsearch.api.scopes import need_of
from agentsearch.pipeline.platform.tables.jobs import JobRow
from agentsearch.pipeline.security.key_limits import (
    KeyLimitError,
    KeyLimits,
    checked_scopes,
    parse_duration,
    searched_collections,
)
from agentsearch.pipeline.security.users import SHOWN_CHARS, UserStore

# -- durations and scopes ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "span"), [
    ("30d", timedelta(days=30)), ("12h", timedelta(hours=12)), ("90m", timedelta(minutes=90)),
    ("2w", timedelta(weeks=2)), (" 45s ", timedelta(seconds=45)), ("3650d", timedelta(days=3650)),
])
def test_a_duration_is_a_number_and_a_unit(text, span):
    assert parse_duration(text) == span


@pytest.mark.parametrize(("text", "words"), [
    ("0d", "longer than nothing"), ("-3d", "a positive whole number"), ("30", "a positive whole number"),
    ("1.5h", "a positive whole number"), ("3y", "a positive whole number"), ("", "a positive whole number"),
    ("3651d", "at most 3650 days"),
])
def test_a_bad_duration_is_refused_saying_why(text, words):
    with pytest.raises(KeyLimitError, match=words):
        parse_duration(text)


def test_scopes_are_the_known_three_and_at_least_one():
    assert checked_scopes(["read", " search"]) == {"read", "search"}
    with pytest.raises(KeyLimitError, match="unknown scope 'admin'; known: search, read, write"):
        checked_scopes(["read", "admin"])
    with pytest.raises(KeyLimitError, match="at least one scope"):
        checked_scopes([])


def test_limits_read_back_from_their_columns_as_they_were_given():
    now = datetime(2026, 11, 27, 10, 0, tzinfo=UTC)
    a, b = uuid.uuid4(), uuid.uuid4()
    limits = KeyLimits.of(scopes=["write", "read"], collections=[str(b), a], expires_in=timedelta(days=30), now=now)
    columns = limits.columns()
    assert columns["scopes"] == ["read", "write"] and columns["collections"] == sorted([str(a), str(b)])
    # SQLite gives the timestamp back without its zone: read as UTC.
    again = KeyLimits.from_row(columns["scopes"], columns["collections"], columns["expires_at"].replace(tzinfo=None))
    assert again == limits
    assert not limits.unlimited and limits.sees(a) and not limits.sees(uuid.uuid4())
    assert limits.allows("read") and not limits.allows("search")
    assert not limits.expired(now + timedelta(days=29)) and limits.expired(now + timedelta(days=30))
    assert KeyLimits().unlimited and KeyLimits().sees(uuid.uuid4()) and not KeyLimits().expired(now)
    assert not KeyLimits.of(expires_in=timedelta(hours=1)).unlimited  # an expiring key manages no keys


def test_the_collections_a_job_searched_come_from_its_request_and_its_state():
    a, b, c = (uuid.uuid4() for _ in range(3))
    job = JobRow(collection_id=a, request={"also_search": [str(b)], "profiles": [{"collections": [str(c)]}]})
    assert searched_collections(job) == {a, b, c}
    run = JobRow(collection_id=a, request={"profile_set_id": str(uuid.uuid4())}, initial_state=None)
    assert searched_collections(run) is None  # not said: seen only by a key of every collection
    run.initial_state = {"collections": {str(a): 0, str(c): 3}}
    assert searched_collections(run) == {a, c}


# -- the table: every route in it -------------------------------------------------------------------------------


def _module_routes() -> list[APIRoute]:
    """Every route of every module of agentsearch.api.routes (a new module is walked too), those left out of the schema
    too."""
    found = []
    for info in pkgutil.iter_modules(agentsearch.api.routes.__path__):
        router = getattr(importlib.import_module(f"agentsearch.api.routes.{info.name}"), "router", None)
        found.extend(r for r in getattr(router, "routes", []) if isinstance(r, APIRoute))
    return found


def _authenticates(route: APIRoute) -> bool:
    pending, seen = [route.dependant], False
    while pending:
        dependant = pending.pop()
        seen = seen or dependant.call is current_user
        pending.extend(dependant.dependencies)
    return seen


def test_every_route_of_the_app_has_a_declared_need(app):
    routes = {(method.upper(), path) for path, item in app.openapi()["paths"].items() for method in item}
    routes |= {(m, template(r.path)) for r in _module_routes() for m in r.methods}
    routes |= {("*", r.path) for r in app.routes if type(r) is Route and r.path not in FRAMEWORK_PATHS}
    assert ("POST", "/v1/keys") in routes and ("*", "/mcp") in routes and ("GET", "/metrics") in routes
    undeclared = sorted(route for route in routes if need_of(*route) is None)
    assert undeclared == [], f"routes with no line in src/agentsearch/api/route_rules.py ROUTE_RULES: {undeclared}"
    # And the table names no route the app does not have (a renamed route would leave a stale line).
    assert sorted(set(ROUTE_RULES) - routes) == []


def test_a_route_is_public_exactly_when_it_takes_no_key():
    for route in _module_routes():
        for method in route.methods:
            need = need_of(method, route.path)
            assert need.public is not _authenticates(route), (method, route.path)


def test_each_scope_reaches_what_it_should():
    assert need_of("POST", "/v1/search").scopes == {"search"}
    assert need_of("POST", "/v1/collections/{collection_id}/documents").scopes == {"write"}
    assert need_of("DELETE", "/v1/collections/{collection_id}/documents/{document_id:path}").scopes == {"write"}
    assert need_of("GET", "/v1/jobs/{job_id}/events").scopes == {"search", "read"}
    assert need_of("HEAD", "/v1/collections").scopes == {"search", "read"}
    assert need_of("POST", "/v1/webhooks").every_collection
    assert all(need_of(m, "/v1/keys").unlimited_key for m in ("GET", "POST"))
    assert need_of("GET", "/v1/nowhere") is None  # refused to a limited key (fail closed)


# -- the API with limited keys ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def owner(app, client):
    """The client's user: its key, id and two collections of its own."""
    key = client.headers["Authorization"].removeprefix("Bearer ")
    ids = [client.post("/v1/collections", json={"name": f"k-{name}-{uuid.uuid4().hex[:6]}"}).json()["id"]
           for name in ("a", "b")]
    return {"key": key, "user_id": UserStore(app.state.services.db).grant(key).user_id, "collections": ids}


def _key(app, owner, **limits) -> dict[str, str]:
    key = UserStore(app.state.services.db).issue_key_for(owner["user_id"], "test", KeyLimits.of(**limits))
    return {"Authorization": f"Bearer {key}"}


def test_a_read_key_is_refused_a_write_naming_the_scope(app, client, owner):
    headers = _key(app, owner, scopes=["read"])
    a = owner["collections"][0]
    added = client.post(f"/v1/collections/{a}/documents", headers=headers,
                        json={"documents": [{"id": "d", "title": "t", "text": "x"}]})
    assert added.status_code == 403 and "'write'" in added.json()["detail"], added.text
    assert "its scopes: read" in added.json()["detail"]
    assert client.get(f"/v1/collections/{a}", headers=headers).status_code == 200
    assert client.post("/v1/search", headers=headers, json={"collection_id": a, "query": "x"}).status_code == 403


def test_a_key_of_one_collection_sees_only_it(app, client, owner):
    a, b = owner["collections"]
    headers = _key(app, owner, collections=[a])
    assert [c["id"] for c in client.get("/v1/collections", headers=headers).json()] == [a]
    other = client.get(f"/v1/collections/{b}", headers=headers)
    missing = client.get(f"/v1/collections/{uuid.uuid4()}", headers=headers)
    assert other.status_code == missing.status_code == 404
    assert other.json()["detail"].replace(b, "ID") == "collection ID not found"
    searched = client.post("/v1/search", headers=headers, json={"collection_id": a, "query": "x", "also_search": [b]})
    assert searched.status_code == 422 and searched.json()["detail"][0]["loc"] == ["body", "also_search", 0]
    assert client.post("/v1/webhooks", headers=headers, json={"url": "https://example.com/h"}).status_code == 403
    assert client.get("/v1/collections", headers=_key(app, owner, collections=[a, b])).status_code == 200
    # An Idempotency-Key the user's other key spent on B hands B's job to no key of A alone.
    idempotent = {"Idempotency-Key": f"k-{uuid.uuid4().hex}"}
    on_b = client.post("/v1/search", headers=idempotent, json={"collection_id": b, "query": "x", "agents": []})
    assert on_b.status_code == 202, on_b.text
    replayed = client.post("/v1/search", headers={**headers, **idempotent},
                           json={"collection_id": a, "query": "x", "agents": []})
    assert replayed.status_code == 409 and on_b.json()["job_id"] not in replayed.text
    assert client.get(f"/v1/jobs/{on_b.json()['job_id']}", headers=headers).status_code == 404


def test_an_expired_key_is_refused_saying_it_expired(app, client, owner):
    key = UserStore(app.state.services.db).issue_key_for(owner["user_id"], "old", KeyLimits(
        expires_at=datetime.now(UTC) - timedelta(seconds=1)))
    refused = client.get("/v1/me", headers={"Authorization": f"Bearer {key}"})
    assert refused.status_code == 401 and "expired" in refused.json()["detail"]
    assert UserStore(app.state.services.db).authenticate(key) is None


def test_me_shows_the_keys_limits(app, client, owner):
    a = owner["collections"][0]
    me = client.get("/v1/me", headers=_key(app, owner, scopes=["search"], collections=[a],
                                           expires_in=timedelta(days=2))).json()["key"]
    assert me["scopes"] == ["search"] and me["collections"] == [a] and me["label"] == "test"
    left = datetime.fromisoformat(me["expires_at"]) - datetime.now(UTC)
    assert timedelta(days=2) - timedelta(minutes=1) < left <= timedelta(days=2)
    assert client.get("/v1/me").json()["key"] | {"prefix": None} == {
        "prefix": None, "label": "initial", "scopes": None, "collections": None, "expires_at": None}


@pytest.mark.parametrize(("body", "loc"), [
    ({"scopes": ["search", "admin"]}, ["body", "scopes", 1]),
    ({"scopes": []}, ["body", "scopes"]),
    ({"collections": ["COLLECTION"]}, ["body", "collections", 0]),
    ({"expires_in_days": 0}, ["body", "expires_in_days"]),
    ({"expires_in_days": -5}, ["body", "expires_in_days"]),
    ({"expires_in_days": "30"}, ["body", "expires_in_days"]),
])
def test_a_key_asked_with_bad_limits_is_422_naming_the_field(client, body, loc):
    if body.get("collections"):
        body = {"collections": [str(uuid.uuid4())]}  # no collection of the caller's
    before = len(client.get("/v1/keys").json())
    refused = client.post("/v1/keys", json={"label": "bad", **body})
    assert refused.status_code == 422, refused.text
    assert [e["loc"] for e in refused.json()["detail"]] == [loc]
    assert len(client.get("/v1/keys").json()) == before


def test_keys_are_made_listed_and_revoked_by_their_owner_only(app, client, owner):
    a = owner["collections"][0]
    made = client.post("/v1/keys", json={"label": "ci", "scopes": ["search"], "collections": [a],
                                         "expires_in_days": 7})
    assert made.status_code == 201, made.text
    body = made.json()
    assert body["key"].startswith(body["prefix"]) and len(body["prefix"]) == SHOWN_CHARS
    listed = {k["prefix"]: k for k in client.get("/v1/keys").json()}
    assert listed[body["prefix"]]["collections"] == [a] and listed[body["prefix"]]["scopes"] == ["search"]
    assert all("key" not in k and body["key"] not in str(k) for k in listed.values())
    assert [k["current"] for k in listed.values()].count(True) == 1
    # The new key cannot make keys, nor list or revoke them.
    scoped = {"Authorization": f"Bearer {body['key']}"}
    minted = client.post("/v1/keys", headers=scoped, json={"label": "wider"})
    assert minted.status_code == 403 and "without limits" in minted.json()["detail"]
    assert client.delete(f"/v1/keys/{body['prefix']}", headers=scoped).status_code == 403
    # Another user's prefix is as unknown as a made-up one.
    _, stranger = UserStore(app.state.services.db).create(f"stranger-{uuid.uuid4().hex[:6]}")
    theirs = client.delete(f"/v1/keys/{body['prefix']}", headers={"Authorization": f"Bearer {stranger}"})
    assert theirs.status_code == 404 and client.get("/v1/me", headers=scoped).status_code == 200
    assert client.delete(f"/v1/keys/{body['prefix']}").status_code == 204
    assert client.get("/v1/me", headers=scoped).status_code == 401
    assert client.delete(f"/v1/keys/{body['prefix']}").status_code == 404  # already revoked


def test_the_new_key_command_limits_the_key_and_refuses_bad_input_clearly(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from agentsearch.cli import main
    from agentsearch.pipeline.platform.db import Database
    from agentsearch.pipeline.platform.settings import get_settings
    from agentsearch.pipeline.platform.tables.collections import CollectionRow

    monkeypatch.setenv("AGENTSEARCH_DATA_DIR", str(tmp_path))
    get_settings.cache_clear()
    try:
        runner = CliRunner()
        assert runner.invoke(main, ["users", "create", "erin"]).exit_code == 0
        store = UserStore(Database(get_settings().database_url))
        collection_id = uuid.uuid4()
        with store.db.session() as s:
            s.add(CollectionRow(id=collection_id, user_id=store.user_id("erin"), name="handbook", embedding_model="m"))
        made = runner.invoke(main, ["users", "new-key", "erin", "--label", "bot", "--scope", "search,read",
                                    "--collection", "handbook", "--expires", "12h"])
        assert made.exit_code == 0, made.output
        limits = store.grant(made.output.strip().splitlines()[-1]).limits
        assert limits.scopes == {"search", "read"} and limits.collections == {collection_id}
        assert timedelta(hours=12) - timedelta(minutes=1) < limits.expires_at - datetime.now(UTC) <= timedelta(hours=12)
        listed = runner.invoke(main, ["users", "list"]).output
        assert "bot (scopes read,search; collections " + str(collection_id) in listed and "expires " in listed
        for args, words in ((["--scope", "search,admin"], "unknown scope 'admin'"),
                            (["--collection", "nothing"], "no collection named 'nothing'"),
                            (["--expires", "30"], "invalid duration '30'"),
                            (["--expires", "0h"], "longer than nothing")):
            refused = runner.invoke(main, ["users", "new-key", "erin", *args])
            assert refused.exit_code == 2 and words in refused.output, (args, refused.output)
        assert len(store.keys_of(store.user_id("erin"))) == 2  # the first key and the bot's, nothing refused
    finally:
        get_settings.cache_clear()
