"""The audit trail on the real stack: an admin's team changes, an editor's ingest and agent set, a viewer's search
and key are recorded with actor, key prefix and action; the team's admin reads them filtered and paged, a viewer
or an editor gets 403 naming ``admin``, a non-member 404; the service's own database connection can neither change
nor delete a row; the retention run prunes rows past ``retention_audit_days`` and counts them in /metrics."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import delete, update
from sqlalchemy.exc import DatabaseError

from agentsearch.pipeline.platform.db import Database
from agentsearch.pipeline.platform.tables.audit import AuditEventRow
from tests.integration.conftest import own_collection, search, wait_indexed
from tests.integration.test_metrics import scrape, total

pytestmark = pytest.mark.integration

ROLES = ("admin", "editor", "viewer", "outsider")
DOCS = [{"id": "leave", "title": "Leave policy", "text": "The notice period is four weeks for every employee."}]


@pytest.fixture(scope="module")
def trail(stack) -> dict:
    """A team whose admin added an editor and a viewer and made a collection; the editor ingested into it and set
    its agents, the viewer searched it and made a key of its own."""
    tag = uuid.uuid4().hex[:6]
    names = {role: f"audit-{role}-{tag}" for role in ROLES}
    keys = {role: stack.create_user(name) for role, name in names.items()}
    with stack.http(keys["admin"]) as admin:
        team_id = admin.post("/v1/teams", json={"name": f"audited-{tag}"}).json()["id"]
        for role in ("editor", "viewer"):
            assert admin.put(f"/v1/teams/{team_id}/members/{names[role]}", json={"role": role}).status_code == 200
        collection = admin.post("/v1/collections", json={"name": "handbook", "team_id": team_id}).json()["id"]
    with stack.http(keys["editor"]) as editor:
        assert editor.post(f"/v1/collections/{collection}/documents", json={"documents": DOCS}).status_code == 202
        config = editor.post("/v1/agent-configs", json={"agent_id": "deduplicator"})
        assert config.status_code == 201, config.text
        assert editor.put(f"/v1/collections/{collection}/agents",
                          json={"agents": [{"agent_config_id": config.json()["id"]}]}).status_code == 200
    with stack.http(keys["viewer"]) as viewer:
        job = search(viewer, collection, "How long is the notice period?", agents=[], use_cache=False)
        made = viewer.post("/v1/keys", json={"label": "bot", "scopes": ["search"]})
        assert made.status_code == 201, made.text
    return {"id": team_id, "name": f"audited-{tag}", "collection": collection, "keys": keys, "names": names,
            "job": job["job_id"], "new_key": made.json()["prefix"]}


def _audit(stack, trail: dict, role: str = "admin", **params):
    with stack.http(trail["keys"][role]) as http:
        return http.get(f"/v1/teams/{trail['id']}/audit", params=params)


def test_each_change_and_search_is_recorded_with_actor_key_and_action(stack, trail):
    page = _audit(stack, trail, limit=200)
    assert page.status_code == 200, page.text
    seen = [(e["actor"], e["key_prefix"], e["action"]) for e in reversed(page.json()["items"])]
    prefix = {role: key[:11] for role, key in trail["keys"].items()}
    n = trail["names"]
    assert seen == [(n["admin"], prefix["admin"], "team.create"),
                    (n["admin"], prefix["admin"], "team.member.set"),
                    (n["admin"], prefix["admin"], "team.member.set"),
                    (n["admin"], prefix["admin"], "collection.create"),
                    (n["editor"], prefix["editor"], "document.add"),
                    (n["editor"], prefix["editor"], "collection.agents.set"),
                    (n["viewer"], prefix["viewer"], "search")]
    searched = page.json()["items"][0]
    assert (searched["target_id"], searched["collection_id"]) == (trail["job"], trail["collection"])
    assert searched["ip"] == "127.0.0.1"
    # The key and the agent config are the user's own, not the team's: the operator's trail has them.
    mine = [json.loads(line) for line in stack.cli("audit", "--actor", n["viewer"], "--json").splitlines()]
    assert [(e["action"], e["target_id"], e["key_prefix"]) for e in mine] == [
        ("key.create", trail["new_key"], prefix["viewer"]), ("search", trail["job"], prefix["viewer"])]
    assert mine[0]["details"]["scopes"] == ["search"]
    editor_lines = stack.cli("audit", "--actor", n["editor"], "--action", "agent_config.create").splitlines()
    assert len(editor_lines) == 1 and "agent_config.create" in editor_lines[0]
    assert "team.member.set" in stack.cli("audit", "--team", trail["name"], "--action", "team.*")


def test_only_the_teams_admins_read_it(stack, trail):
    for role in ("editor", "viewer"):
        refused = _audit(stack, trail, role)
        assert refused.status_code == 403 and "needs the role 'admin'" in refused.json()["detail"], role
    assert _audit(stack, trail, "outsider").status_code == 404


def test_filters_and_pages(stack, trail):
    everything = [e["id"] for e in _audit(stack, trail).json()["items"]]
    pages, cursor = [], None
    while True:
        page = _audit(stack, trail, limit=3, **({"cursor": cursor} if cursor else {})).json()
        pages += [e["id"] for e in page["items"]]
        if (cursor := page["next_cursor"]) is None:
            break
    assert pages == everything and len(everything) == 7
    by_editor = _audit(stack, trail, actor=trail["names"]["editor"]).json()["items"]
    assert [e["action"] for e in by_editor] == ["collection.agents.set", "document.add"]
    assert [e["action"] for e in _audit(stack, trail, action="team.*").json()["items"]] == [
        "team.member.set", "team.member.set", "team.create"]
    future = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    assert _audit(stack, trail, since=future).json()["items"] == []
    assert len(_audit(stack, trail, until=future).json()["items"]) == 7
    bad = _audit(stack, trail, limit=500)
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["query", "limit"]


def test_the_services_database_connection_can_neither_change_nor_delete_a_row(stack, trail):
    db = Database(stack.database_url)  # the URL and role the API and the workers connect with
    try:
        for statement in (update(AuditEventRow).values(action="nothing"), delete(AuditEventRow)):
            with pytest.raises(DatabaseError, match="append-only"), db.session() as s:
                s.execute(statement.where(AuditEventRow.team_id == uuid.UUID(trail["id"])))
    finally:
        db.dispose()
    assert len(_audit(stack, trail).json()["items"]) == 7


def test_the_retention_run_prunes_audit_rows_past_their_days(stack, trail):
    old = datetime.now(UTC) - timedelta(days=400)
    (old_id,), = stack.sql("INSERT INTO audit_events (at, key_prefix, action, target_type, target_id, details, "
                           "team_id) VALUES (%s, 'as_old', 'search', '', '', '{}', %s) RETURNING id", old, trail["id"])
    _, before = scrape(stack)
    report = json.loads(stack.cli("retention", "run", "--json"))
    _, after = scrape(stack)
    assert report["counts"]["audit_events"] >= 1
    assert stack.sql("SELECT id FROM audit_events WHERE id = %s", old_id) == []
    assert len(_audit(stack, trail).json()["items"]) == 7  # the recent ones stay
    pruned = total(after, "agentsearch_retention_pruned_total", kind="audit_events") - total(
        before, "agentsearch_retention_pruned_total", kind="audit_events")
    assert pruned == report["counts"]["audit_events"]


def test_a_search_of_a_members_own_collection_beside_the_teams_is_in_the_teams_trail(stack):
    """Searched from the member's own collection with the team's in ``also_search``: the team's admin sees the
    search over its collection, the new job's and the one answered from its stored response alike; the member's own
    collection has its row too (the operator's trail), one per collection read."""
    tag = uuid.uuid4().hex[:6]
    names = {role: f"audit-also-{role}-{tag}" for role in ("admin", "member")}
    keys = {role: stack.create_user(name) for role, name in names.items()}
    with stack.http(keys["admin"]) as admin:
        team_id = admin.post("/v1/teams", json={"name": f"also-{tag}"}).json()["id"]
        assert admin.put(f"/v1/teams/{team_id}/members/{names['member']}",
                         json={"role": "viewer"}).status_code == 200
        shared = admin.post("/v1/collections", json={"name": "handbook", "team_id": team_id}).json()["id"]
        assert admin.post(f"/v1/collections/{shared}/documents", json={"documents": DOCS}).status_code == 202
        wait_indexed(admin, shared)
    with stack.http(keys["member"]) as member:
        mine = own_collection(member, "notes", [{"id": "n1", "title": "Notes", "text": "Notice is given in writing."}])
        asked = {"collection_id": mine, "query": "How long is the notice period?", "agents": [],
                 "also_search": [shared]}
        first = search(member, **asked)
        again = member.post("/v1/search", json=asked)  # answered from the first job's stored response
    assert first["status"] == "succeeded" and again.status_code == 200 and again.json()["cached"], again.text
    with stack.http(keys["admin"]) as admin:
        page = admin.get(f"/v1/teams/{team_id}/audit", params={"action": "search"})
    assert page.status_code == 200, page.text
    assert [(e["actor"], e["target_id"], e["collection_id"], e["details"]["cache_hit"])
            for e in reversed(page.json()["items"])] == [(names["member"], first["job_id"], shared, False),
                                                         (names["member"], again.json()["job_id"], shared, True)]
    rows = [json.loads(line) for line in stack.cli("audit", "--actor", names["member"], "--json").splitlines()]
    assert sorted((e["target_id"], e["collection_id"]) for e in rows if e["action"] == "search") == sorted(
        (job, collection) for job in (first["job_id"], again.json()["job_id"]) for collection in (mine, shared))
