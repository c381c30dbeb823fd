"""Teams and roles: what each role covers, the rules for changing members, the table of the role each route needs
(every route reaching a collection or a job in it), and the API's answers to each kind of member (in-process app,
SQLite)."""

from __future__ import annotations

import ast
import inspect
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
from fastapi import Request

import agentsearch.api.routes
from agentsearch.api import route_rules
from agentsearch.api.roles import role_needed
from agentsearch.api.route_rules import ROUTE_RULES
from agentsearch.api.scopes import need_of
from agentsearch.pipeline.security.roles import ROLES, RoleError, change_problem, checked_role, covers
from agentsearch.pipeline.security.users import UserStore
from tests.unit.api.test_key_scopes import _module_routes

ADMIN, BOB = uuid.uuid4(), uuid.uuid4()

# -- the rules ----------------------------------------------------------------------------------------------------


def test_each_role_covers_those_below_it_and_owner_covers_all():
    assert [covers(held, "editor") for held in ROLES] == [False, True, True]
    assert all(covers("owner", needed) for needed in ROLES)
    assert not covers(None, "viewer")
    assert checked_role(" Editor ") == "editor"
    with pytest.raises(RoleError, match="unknown role 'owner'; roles: viewer, editor, admin"):
        checked_role("owner")


@pytest.mark.parametrize(("actor_role", "target", "current", "wanted", "admins", "status", "words"), [
    ("viewer", BOB, "viewer", "admin", 2, 403, "needs the role 'admin'"),
    ("editor", BOB, None, "viewer", 1, 403, "needs the role 'admin'"),
    ("editor", ADMIN, "editor", "admin", 1, 403, "your own role"),  # raising oneself
    ("admin", ADMIN, "admin", "viewer", 3, 403, "your own role"),   # not even down
    ("admin", BOB, "admin", "editor", 1, 409, "last admin"),
    ("admin", BOB, "admin", None, 1, 409, "last admin"),
    ("admin", ADMIN, "admin", None, 1, 409, "last admin"),           # the last admin cannot leave either
    ("admin", BOB, None, None, 1, 404, "not a member"),
])
def test_a_change_beyond_the_rules_is_refused_saying_why(actor_role, target, current, wanted, admins, status, words):
    problem = change_problem(ADMIN, actor_role, target, current, wanted, admins)
    assert problem is not None and problem.status == status and words in problem.detail


@pytest.mark.parametrize(("actor_role", "target", "current", "wanted", "admins"), [
    ("admin", BOB, None, "viewer", 1),      # add
    ("admin", BOB, "viewer", "admin", 1),   # promote
    ("admin", BOB, "admin", "viewer", 2),   # demote one of two admins
    ("viewer", ADMIN, "viewer", None, 1),   # leave
    ("admin", ADMIN, "admin", None, 2),     # an admin leaves, another stays
])
def test_a_change_within_the_rules_passes(actor_role, target, current, wanted, admins):
    assert change_problem(ADMIN, actor_role, target, current, wanted, admins) is None


# -- the table ------------------------------------------------------------------------------------------------------


def test_every_route_reaching_a_collection_or_a_job_declares_its_role():
    routes = {(m, r.path.replace("{document_id:path}", "{document_id}")) for r in _module_routes() for m in r.methods}
    reaching = {route for route in routes if "{collection_id}" in route[1] or "{job_id}" in route[1]}
    assert ("POST", "/v1/collections/{collection_id}/documents") in reaching
    roles = {route: rule.role for route, rule in ROUTE_RULES.items() if rule.role is not None}
    assert sorted(reaching - set(roles)) == [], "routes with no role in src/agentsearch/api/route_rules.py ROUTE_RULES"
    assert sorted(set(roles) - routes) == []  # each role is of a route the app has


def test_the_scope_check_and_the_role_check_read_one_line_per_route(monkeypatch):
    route = ("PATCH", "/v1/collections/{collection_id}")
    monkeypatch.setitem(ROUTE_RULES, route, route_rules.RouteRule(route_rules.READ, "admin"))
    request = Request({"type": "http", "method": "PATCH", "path": "/v1/collections/c", "headers": [],
                       "query_string": b"", "route": SimpleNamespace(path=route[1])})
    assert need_of(*route) == route_rules.READ and role_needed(request) == "admin"


def _route_keyed(node: ast.AST) -> bool:
    """A dict literal keyed by (method, path) pairs: a table of routes."""
    return isinstance(node, ast.Dict) and any(
        isinstance(key, ast.Tuple) and len(key.elts) == 2 and isinstance(key.elts[0], ast.Constant)
        and str(key.elts[0].value) in {"GET", "POST", "PUT", "PATCH", "DELETE", "*"} for key in node.keys)


def test_routes_are_declared_in_one_table_only():
    """A second table of routes (a scope here, a role there) drifts from the first: there is one, route_rules."""
    api_dir = Path(route_rules.__file__).parent
    tables = sorted(str(path.relative_to(api_dir)) for path in api_dir.rglob("*.py")
                    if any(_route_keyed(node) for node in ast.walk(ast.parse(path.read_text()))))
    assert tables == ["route_rules.py"]


def test_no_route_checks_a_collections_owner_itself():
    """Every route finds collections and jobs through ``agentsearch.api.roles``: a check of its own would skip the
    roles."""
    import importlib
    import pkgutil

    for info in pkgutil.iter_modules(agentsearch.api.routes.__path__):
        source = inspect.getsource(importlib.import_module(f"agentsearch.api.routes.{info.name}"))
        for pattern in ("Collection.user_id ==", "collection.user_id !=", "job.user_id != user_id",
                        "s.get(Collection, collection_id)"):
            assert pattern not in source.replace("s.get(Collection, collection_id).user_id", ""), (info.name, pattern)


def test_each_role_reaches_what_it_should():
    assert ROUTE_RULES[("GET", "/v1/collections/{collection_id}/documents")].role == "viewer"
    assert ROUTE_RULES[("POST", "/v1/search")].role == "viewer"
    collection = "/v1/collections/{collection_id}"
    for writes in (("POST", f"{collection}/documents"), ("PUT", f"{collection}/agents"), ("POST", "/v1/webhooks"),
                   ("DELETE", f"{collection}/documents/{{document_id}}"), ("PATCH", collection)):
        assert ROUTE_RULES[writes].role == "editor", writes
    assert ROUTE_RULES[("POST", "/v1/collections")].role == "admin"


# -- the API ------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def team(app, client):
    """The client's user as admin of a team with a collection; an editor, a viewer and an outsider with keys."""
    store = UserStore(app.state.services.db)
    keys = {role: store.create(f"{role}-{uuid.uuid4().hex[:6]}") for role in ("editor", "viewer", "outsider")}
    made = client.post("/v1/teams", json={"name": f"t-{uuid.uuid4().hex[:6]}"})
    assert made.status_code == 201 and made.json()["role"] == "admin", made.text
    team_id = made.json()["id"]
    for role in ("editor", "viewer"):
        put = client.put(f"/v1/teams/{team_id}/members/{keys[role][0]}", json={"role": role})
        assert put.status_code == 200 and put.json()["role"] == role, put.text
    shared = client.post("/v1/collections", json={"name": "handbook", "team_id": team_id})
    assert shared.status_code == 201 and shared.json()["role"] == "admin", shared.text
    return {"id": team_id, "collection": shared.json()["id"],
            **{role: {"Authorization": f"Bearer {key}"} for role, (_, key) in keys.items()},
            **{f"{role}_id": str(user_id) for role, (user_id, _) in keys.items()}}


def test_a_viewer_reads_and_searches_but_is_refused_writes_naming_editor(client, team):
    c, viewer = team["collection"], team["viewer"]
    listed = {x["id"]: x for x in client.get("/v1/collections", headers=viewer).json()}
    assert listed[c]["role"] == "viewer" and listed[c]["team_id"] == team["id"]
    assert client.get(f"/v1/collections/{c}/documents", headers=viewer).status_code == 200
    assert client.post("/v1/search", headers=viewer, json={"collection_id": c, "query": "x", "agents": []}
                       ).status_code == 202
    for method, path, body in (("POST", f"/v1/collections/{c}/documents",
                                {"documents": [{"id": "d", "title": "t", "text": "x"}]}),
                               ("PUT", f"/v1/collections/{c}/agents", {"agents": []}),
                               ("PATCH", f"/v1/collections/{c}", {"stage_timeouts": None}),
                               ("POST", "/v1/webhooks", {"url": "https://example.com/h", "events": ["job.failed"],
                                                         "collection_id": c})):
        refused = client.request(method, path, headers=viewer, json=body)
        assert refused.status_code == 403 and "needs the role 'editor'" in refused.json()["detail"], path
        assert "your role there is 'viewer'" in refused.json()["detail"]
    assert client.put(f"/v1/collections/{c}/agents", headers=team["editor"], json={"agents": []}).status_code == 200


def test_a_non_member_sees_the_team_and_its_collection_as_missing(client, team):
    c, outsider = team["collection"], team["outsider"]
    nobody = str(uuid.uuid4())
    for path in (f"/v1/collections/{c}", f"/v1/teams/{team['id']}"):
        theirs, missing = client.get(path, headers=outsider), client.get(path.replace(c, nobody).replace(
            team["id"], nobody), headers=outsider)
        assert theirs.status_code == missing.status_code == 404
    assert c not in {x["id"] for x in client.get("/v1/collections", headers=outsider).json()}
    put = client.put(f"/v1/teams/{team['id']}/members/{team['outsider_id']}", headers=outsider, json={"role": "admin"})
    assert put.status_code == 404 and put.json()["detail"] == f"team {team['id']} not found"
    assert client.post("/v1/search", headers=outsider, json={"collection_id": c, "query": "x"}).status_code == 404


def test_members_cannot_raise_themselves_and_the_last_admin_stays(client, team):
    viewer_id = team["viewer_id"]
    raised = client.put(f"/v1/teams/{team['id']}/members/{viewer_id}", headers=team["viewer"], json={"role": "admin"})
    assert raised.status_code == 403 and "your own role" in raised.json()["detail"]
    other = client.put(f"/v1/teams/{team['id']}/members/{team['outsider_id']}", headers=team["editor"],
                       json={"role": "viewer"})
    assert other.status_code == 403 and "needs the role 'admin'" in other.json()["detail"]
    me_id = client.get("/v1/me").json()["user"]["id"]
    assert client.delete(f"/v1/teams/{team['id']}/members/{me_id}").status_code == 409
    members = {m["user_id"]: m["role"] for m in client.get(f"/v1/teams/{team['id']}").json()["members"]}
    assert members == {me_id: "admin", team["editor_id"]: "editor", viewer_id: "viewer"}


def test_a_team_collection_may_share_a_personal_ones_name_and_a_removed_member_loses_it(client, team):
    mine = client.post("/v1/collections", json={"name": "handbook"})
    assert mine.status_code == 201 and (mine.json()["team_id"], mine.json()["role"]) == (None, "owner")
    again = client.post("/v1/collections", json={"name": "handbook", "team_id": team["id"]})
    assert again.status_code == 422  # but once per team
    by_editor = client.post("/v1/collections", headers=team["editor"], json={"name": "x", "team_id": team["id"]})
    assert by_editor.status_code == 403 and "needs the role 'admin'" in by_editor.json()["detail"]
    c = team["collection"]
    extra = UserStore(client.app.state.services.db).create(f"temp-{uuid.uuid4().hex[:6]}")
    headers = {"Authorization": f"Bearer {extra[1]}"}
    assert client.put(f"/v1/teams/{team['id']}/members/{extra[0]}", json={"role": "editor"}).status_code == 200
    assert client.get(f"/v1/collections/{c}", headers=headers).status_code == 200
    assert client.delete(f"/v1/teams/{team['id']}/members/{extra[0]}").status_code == 204
    assert client.get(f"/v1/collections/{c}", headers=headers).status_code == 404


def test_another_members_job_is_read_by_a_viewer_and_cancelled_by_an_editor_only(client, team):
    c = team["collection"]
    submitted = client.post("/v1/search", headers=team["viewer"], json={"collection_id": c, "query": "y", "agents": []})
    assert submitted.status_code in (200, 202), submitted.text
    job_id = submitted.json()["job_id"]
    assert client.get(f"/v1/jobs/{job_id}").status_code == 200  # the admin reads the viewer's job
    assert job_id in {j["job_id"] for j in client.get("/v1/jobs", params={"limit": 200}).json()["items"]}
    mine = client.post("/v1/search", headers=team["editor"], json={"collection_id": c, "query": "z", "agents": []})
    refused = client.delete(f"/v1/jobs/{mine.json()['job_id']}", headers=team["viewer"])
    assert refused.status_code == 403 and "needs the role 'editor'" in refused.json()["detail"]
    assert client.delete(f"/v1/jobs/{job_id}", headers=team["editor"]).status_code in (202, 409)  # 409: it ended
    assert client.get(f"/v1/jobs/{job_id}", headers=team["outsider"]).status_code == 404


def test_a_collections_webhook_hears_every_members_jobs_while_its_user_may_edit_it(migrated_db):
    from agentsearch.pipeline.job.job_store import JobStore
    from agentsearch.pipeline.platform.tables.collections import CollectionRow
    from agentsearch.pipeline.platform.tables.webhooks import WebhookDeliveryRow, WebhookRow
    from agentsearch.pipeline.security.teams import create_team, set_role

    store = UserStore(migrated_db)
    admin, editor, viewer = (store.create(f"{role}-{uuid.uuid4().hex[:6]}")[0] for role in ("a", "e", "v"))
    with migrated_db.session() as s:
        team_id = create_team(s, "hooks", admin).id
        set_role(s, team_id, admin, editor, "editor")
        set_role(s, team_id, admin, viewer, "viewer")
        collection = CollectionRow(name="shared", user_id=admin, team_id=team_id, embedding_model="m")
        s.add(collection)
        s.flush()
        hook = WebhookRow(user_id=editor, collection_id=collection.id, url="https://h.example/x",
                          events=["job.failed"], secret="whsec_x", status="active")
        own = WebhookRow(user_id=editor, url="https://h.example/own", events=["job.failed"], secret="whsec_y",
                         status="active")
        s.add_all([hook, own])
        s.flush()
        collection_id, hook_id = collection.id, hook.id
    jobs = JobStore(migrated_db)

    def ended_by_viewer() -> set:
        job_id = uuid.uuid4()
        with migrated_db.session() as s:
            jobs.create(s, job_id, viewer, collection_id, "q", request={}, deadline_s=600)
        jobs.fail(str(job_id), "boom")
        with migrated_db.session() as s:
            return {r.webhook_id for r in s.query(WebhookDeliveryRow).filter_by(job_id=job_id).all()}

    assert ended_by_viewer() == {hook_id}  # not the editor's own webhook: the job is the viewer's
    with migrated_db.session() as s:
        set_role(s, team_id, admin, editor, "viewer")
    assert ended_by_viewer() == set()  # made a viewer: it hears no more


def test_a_name_finds_ones_own_collection_first_and_team_slash_name_the_teams(client, team):
    team_name = client.get(f"/v1/teams/{team['id']}").json()["name"]
    user_id, key = UserStore(client.app.state.services.db).create(f"n-{uuid.uuid4().hex[:6]}")
    headers = {"Authorization": f"Bearer {key}"}
    assert client.put(f"/v1/teams/{team['id']}/members/{user_id}", json={"role": "viewer"}).status_code == 200

    def named(name: str) -> list[str]:
        return [c["id"] for c in client.get("/v1/collections", headers=headers, params={"name": name}).json()]

    assert named("handbook") == [team["collection"]]  # none of its own: the team's
    own = client.post("/v1/collections", headers=headers, json={"name": "handbook"}).json()["id"]
    assert named("handbook") == [own] and named(f"{team_name}/handbook") == [team["collection"]]
    assert named("nobody/handbook") == [] and named(f"{team_name}/nothing") == []


def test_the_teams_commands_manage_a_team_and_refuse_bad_input_clearly(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from agentsearch.cli import main
    from agentsearch.pipeline.platform.settings import get_settings

    monkeypatch.setenv("AGENTSEARCH_DATA_DIR", str(tmp_path))
    get_settings.cache_clear()
    try:
        runner = CliRunner()
        for name in ("ann", "ben"):
            assert runner.invoke(main, ["users", "create", name]).exit_code == 0

        def run(*args: str, code: int = 0) -> str:  # fail() exits 2
            done = runner.invoke(main, ["teams", *args])
            assert done.exit_code == code, done.output
            return done.output

        assert "admin: ann" in run("create", "legal", "--admin", "ann")
        assert "already exists" in run("create", "legal", "--admin", "ben", code=2)
        assert "invalid team name" in run("create", "a/b", code=2)
        assert "ben is editor of team legal" in run("add-member", "legal", "ben", "--role", "editor")
        assert "ben is admin of team legal" in run("add-member", "legal", "ben", "--role", "admin")
        assert "user cat not found" in run("add-member", "legal", "cat", code=2)
        assert "no team named 'hr'" in run("show", "hr", code=2)
        assert "removed ann (admin)" in run("remove-member", "legal", "ann")
        assert "last admin" in run("remove-member", "legal", "ben", code=2)
        assert "legal" in run("list") and "1 member(s)" in run("list")
        shown = run("show", "legal")
        assert "admin    ben" in shown and "ann" not in shown
    finally:
        get_settings.cache_clear()


def test_a_team_collection_is_named_by_keys_and_configs_of_its_members_only(migrated_db):
    """``users new-key --collection TEAM/NAME`` and a config's collection (``fact_checker``'s trusted one) reach a
    team's collection for its members, the words of a missing one for anyone else."""
    from agentsearch.pipeline.agents.references import MissingResource, UserResources
    from agentsearch.pipeline.platform.tables.collections import CollectionRow
    from agentsearch.pipeline.security.teams import create_team, set_role
    from agentsearch.pipeline.security.users import UserError

    store = UserStore(migrated_db)
    admin, member, outsider = (store.create(f"{role}-{uuid.uuid4().hex[:6]}")[0] for role in ("a", "m", "o"))
    with migrated_db.session() as s:
        team_id = create_team(s, "library", admin).id
        set_role(s, team_id, admin, member, "viewer")
        shared = CollectionRow(name="books", user_id=admin, team_id=team_id, embedding_model="m")
        s.add(shared)
        s.flush()
        shared_id = shared.id
    assert store.collections_named(member, ["library/books"]) == [shared_id]
    assert store.collections_named(member, ["books"]) == [shared_id]  # none of its own of that name
    with pytest.raises(UserError, match="no collection named 'library/books'"):
        store.collections_named(outsider, ["library/books"])
    assert UserResources(migrated_db, member).owned_collection(str(shared_id)).id == shared_id
    with pytest.raises(MissingResource, match=f"collection {shared_id} not found"):
        UserResources(migrated_db, outsider).owned_collection(str(shared_id))
