"""The audit trail (src/agentsearch/pipeline/security/audit.py) on SQLite and through the embedded API: what a row
holds, the filters and the cursor, the team's route for its admins only, an UPDATE refused by the table's trigger, the
operator's command."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta

import pytest
from click.testing import CliRunner
from sqlalchemy import func, select, text, update
from sqlalchemy.exc import DatabaseError

from agentsearch.cli import main
from agentsearch.cli.audit import since_of
from agentsearch.pipeline.platform.db import utcnow
from agentsearch.pipeline.platform.settings import get_settings
from agentsearch.pipeline.platform.tables.audit import AuditEventRow
from agentsearch.pipeline.platform.tables.collections import CollectionRow
from agentsearch.pipeline.platform.tables.teams import TeamRow
from agentsearch.pipeline.platform.tables.users import DEFAULT_USER_ID
from agentsearch.pipeline.security.audit import MAX_LIMIT, Actor, events, record
from agentsearch.pipeline.security.users import UserStore


@pytest.fixture
def team_collection(migrated_db) -> tuple[uuid.UUID, uuid.UUID]:
    with migrated_db.session() as s:
        team = TeamRow(name="legal", created_by=DEFAULT_USER_ID)
        s.add(team)
        s.flush()
        collection = CollectionRow(name="c", user_id=DEFAULT_USER_ID, team_id=team.id, embedding_model="m")
        s.add(collection)
        s.flush()
        return team.id, collection.id


def test_a_row_holds_who_what_and_the_team_of_its_collection(migrated_db, team_collection):
    team_id, collection_id = team_collection
    actor = Actor(DEFAULT_USER_ID, "as_abcdefgh", "req-1", "10.0.0.7")
    with migrated_db.session() as s:
        record(s, actor, "document.add", collection_id=collection_id, target=("documents", 2),
               details={"ids": ["a", "b"], "note": "x" * 500})
        record(s, actor, "search", collection_id=uuid.uuid4(), target=("job", "j"))  # a personal one: no team
    with migrated_db.session() as s:
        added, searched = sorted(s.scalars(select(AuditEventRow)), key=lambda e: e.id)
    assert (added.actor_id, added.key_prefix, added.action, added.team_id) == (DEFAULT_USER_ID, "as_abcdefgh",
                                                                                "document.add", team_id)
    assert (added.target_type, added.target_id, added.request_id, added.ip) == ("documents", "2", "req-1",
                                                                                  "10.0.0.7")
    assert added.details["ids"] == ["a", "b"] and len(added.details["note"]) == 200
    assert searched.team_id is None and searched.id > added.id


def test_a_change_and_its_row_roll_back_together(migrated_db, team_collection):
    with pytest.raises(RuntimeError), migrated_db.session() as s:
        record(s, Actor(DEFAULT_USER_ID, "as_x"), "collection.update", collection_id=team_collection[1])
        raise RuntimeError("the change failed")
    with migrated_db.session() as s:
        assert s.scalar(select(func.count()).select_from(AuditEventRow)) == 0


def test_filters_and_the_cursor_page_newest_first(migrated_db, team_collection):
    team_id, _collection_id = team_collection
    other = uuid.uuid4()
    with migrated_db.session() as s:
        for i in range(7):
            record(s, Actor(DEFAULT_USER_ID if i % 2 else other, "as_k"), "team.member.set" if i < 3 else "search",
                   team_id=team_id, target=("n", i))
        record(s, Actor(other, "as_k"), "search", collection_id=uuid.uuid4())  # another team's or nobody's
    with migrated_db.session() as s:
        first = events(s, team_id=team_id, limit=3)
        second = events(s, team_id=team_id, limit=3, before=first[-1].id)
        third = events(s, team_id=team_id, limit=3, before=second[-1].id)
        assert [e.target_id for e in first + second + third] == [str(i) for i in range(6, -1, -1)]
        assert {e.target_id for e in events(s, team_id=team_id, actor_id=DEFAULT_USER_ID)} == {"1", "3", "5"}
        assert [e.target_id for e in events(s, team_id=team_id, action="team.*")] == ["2", "1", "0"]
        assert [e.target_id for e in events(s, team_id=team_id, action="team.member.set", actor_id=other)] == [
            "2", "0"]
        assert events(s, action="team") == []  # no family without ".*"
        assert len(events(s, limit=10_000)) == 8 and MAX_LIMIT == 200
        later = utcnow() + timedelta(minutes=1)
        assert events(s, since=later) == [] and len(events(s, team_id=team_id, until=later)) == 7


def test_an_update_of_an_audit_row_is_refused_by_the_table(migrated_db, team_collection):
    with migrated_db.session() as s:
        record(s, Actor(DEFAULT_USER_ID, "as_k"), "search", collection_id=team_collection[1])
    with pytest.raises(DatabaseError, match="append-only"), migrated_db.session() as s:
        s.execute(update(AuditEventRow).values(action="nothing"))
    with migrated_db.session() as s:
        assert s.scalar(select(AuditEventRow.action)) == "search"
        assert s.scalar(text("SELECT count(*) FROM sqlite_master WHERE type = 'trigger' "
                             "AND name = 'audit_events_append_only'")) == 1


def test_the_teams_audit_route_is_for_its_admins_with_every_change_and_search(app, client):
    store = UserStore(app.state.services.db)
    viewer_id, viewer_key = store.create(f"v-{uuid.uuid4().hex[:6]}")
    _, outsider_key = store.create(f"o-{uuid.uuid4().hex[:6]}")
    viewer = {"Authorization": f"Bearer {viewer_key}"}
    team_id = client.post("/v1/teams", json={"name": f"a-{uuid.uuid4().hex[:6]}"}).json()["id"]
    assert client.put(f"/v1/teams/{team_id}/members/{viewer_id}", json={"role": "viewer"}).status_code == 200
    c = client.post("/v1/collections", json={"name": "h", "team_id": team_id}).json()["id"]
    assert client.post(f"/v1/collections/{c}/documents", json={"documents": [{"id": "d", "text": "x"}]}
                       ).status_code == 202
    job = client.post("/v1/search", headers=viewer, json={"collection_id": c, "query": "x", "agents": []}).json()
    assert client.delete(f"/v1/collections/{c}/documents/d").status_code == 202

    page = client.get(f"/v1/teams/{team_id}/audit")
    assert page.status_code == 200, page.text
    actions = [e["action"] for e in page.json()["items"]]
    assert actions == ["document.delete", "search", "document.add", "collection.create", "team.member.set",
                       "team.create"]
    searched = page.json()["items"][1]
    assert (searched["actor_id"], searched["key_prefix"], searched["target_id"]) == (
        str(viewer_id), viewer_key[:11], job["job_id"])
    assert searched["actor"].startswith("v-") and searched["details"]["query"] == "x"
    two = client.get(f"/v1/teams/{team_id}/audit", params={"limit": 2}).json()
    rest = client.get(f"/v1/teams/{team_id}/audit", params={"cursor": two["next_cursor"]}).json()
    assert [e["action"] for e in two["items"] + rest["items"]] == actions and rest["next_cursor"] is None
    assert [e["action"] for e in client.get(f"/v1/teams/{team_id}/audit",
                                            params={"actor": str(viewer_id)}).json()["items"]] == ["search"]
    refused = client.get(f"/v1/teams/{team_id}/audit", headers=viewer)
    assert refused.status_code == 403 and "'admin'" in refused.json()["detail"]
    assert client.get(f"/v1/teams/{team_id}/audit", headers={"Authorization": f"Bearer {outsider_key}"}
                      ).status_code == 404
    for name, value in (("limit", "0"), ("limit", "201"), ("since", "yesterday"), ("cursor", "x")):
        bad = client.get(f"/v1/teams/{team_id}/audit", params={name: value})
        assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["query", name], (name, bad.text)


def test_since_takes_a_span_or_a_time():
    now = utcnow()
    assert since_of("2d", now) == now - timedelta(days=2)
    assert since_of("2026-11-01T00:00:00", now).isoformat() == "2026-11-01T00:00:00+00:00"


def test_the_command_line_shows_the_trail_filtered(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTSEARCH_DATA_DIR", str(tmp_path))
    get_settings.cache_clear()
    try:
        runner = CliRunner()
        assert runner.invoke(main, ["users", "create", "ann"]).exit_code == 0
        assert runner.invoke(main, ["tools", "add", "wiki", "--kind", "http", "--url", "https://w.example/{query}"]
                             ).exit_code == 0
        assert runner.invoke(main, ["tools", "remove", "wiki"]).exit_code == 0
        shown = runner.invoke(main, ["audit"])
        assert shown.exit_code == 0, shown.output
        lines = shown.output.splitlines()
        assert "tool.remove" in lines[0] and "tool.add" in lines[1] and "operator" in lines[0]
        rows = [json.loads(line) for line in runner.invoke(main, ["audit", "--action", "tool.add", "--json"]
                                                           ).output.splitlines()]
        assert [(r["action"], r["target_id"], r["actor"]) for r in rows] == [("tool.add", "wiki", "operator")]
        assert runner.invoke(main, ["audit", "--actor", "ann"]).output.strip() == "no events"
        assert runner.invoke(main, ["teams", "create", "legal", "--admin", "ann"]).exit_code == 0
        team_rows = [json.loads(line) for line in runner.invoke(main, ["audit", "--team", "legal", "--json"]
                                                                ).output.splitlines()]
        assert [(r["action"], r["actor"], r["details"]["name"]) for r in team_rows] == [
            ("team.create", "operator", "legal")]
        assert runner.invoke(main, ["audit", "--since", "1h", "--limit", "2"]).output.count("\n") == 2
        missing = runner.invoke(main, ["audit", "--team", "nope"])
        assert missing.exit_code == 2 and "no team named 'nope'" in missing.output
        bad = runner.invoke(main, ["audit", "--since", "soon"])
        assert bad.exit_code == 2 and "--since" in bad.output
    finally:
        get_settings.cache_clear()


def test_the_operators_changes_to_users_and_keys_are_in_the_trail(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTSEARCH_DATA_DIR", str(tmp_path))
    get_settings.cache_clear()
    try:
        runner = CliRunner()
        assert runner.invoke(main, ["users", "create", "bea"]).exit_code == 0
        made = runner.invoke(main, ["users", "new-key", "bea", "--label", "ci", "--scope", "search"])
        prefix = made.output.strip().splitlines()[-1][:11]
        assert runner.invoke(main, ["users", "revoke", prefix]).exit_code == 0
        assert runner.invoke(main, ["users", "limits", "bea", "--max-running-jobs", "2"]).exit_code == 0
        assert runner.invoke(main, ["users", "revoke", "as_nothing"]).exit_code != 0  # nothing done, nothing kept
        rows = [json.loads(line) for line in runner.invoke(main, ["audit", "--json"]).output.splitlines()]
        assert [(r["action"], r["actor"]) for r in rows] == [
            ("user.limits", "operator"), ("key.revoke", "operator"), ("key.create", "operator"),
            ("user.create", "operator")]
        limits, revoked, created = rows[0], rows[1], rows[2]
        assert limits["details"] == {"reset": False, "max_running_jobs": 2} and limits["target_id"] == "bea"
        assert revoked["target_id"] == created["target_id"] == prefix
        assert created["details"]["label"] == "ci" and created["details"]["scopes"] == ["search"]
    finally:
        get_settings.cache_clear()


def test_a_profile_sets_run_is_a_search_in_the_trail(app, client):
    c = client.post("/v1/collections", json={"name": f"p-{uuid.uuid4().hex[:6]}"}).json()["id"]
    made = client.post("/v1/profile-sets", json={"name": f"s-{uuid.uuid4().hex[:6]}", "collection_id": c,
                                                 "query": "solar", "profiles": [{"name": "research"}]})
    assert made.status_code == 201, made.text
    run = client.post(f"/v1/profile-sets/{made.json()['id']}/runs")
    assert run.status_code == 202, run.text
    with app.state.services.db.session() as s:
        row = s.scalars(select(AuditEventRow).where(AuditEventRow.target_id == run.json()["job_id"])).one()
        assert (row.action, str(row.collection_id), row.details) == ("search", c, {"profile_set": made.json()["id"]})
        assert row.key_prefix == client.headers["Authorization"].removeprefix("Bearer ")[:11]
