"""Teams on the real stack: an admin makes a team and a team collection and adds an editor and a viewer; the viewer
lists and searches it but gets 403 naming ``editor`` for documents, agent sets and webhooks; a non-member gets 404
as for a missing id; the editor ingests through the command line by ``TEAM/NAME``; nobody raises its own role; a
removed member gets 404 from its next request (its open event stream ends with a 404 error), and a job of its that
was running finishes, unreadable to it; an admin manages members in the console's Teams view. Document groups: only
an admin (or the operator's command) puts a member of the team in one or takes it out, and a member leaving the
team leaves its groups."""

from __future__ import annotations

import json
import subprocess
import time
import uuid

import pytest

from agentsearch.devstack import BIN, REPO
from tests.integration.conftest import search, wait_job

pytestmark = pytest.mark.integration

DOCS = [{"id": "leave", "title": "Leave policy", "text": "The notice period is four weeks for every employee."},
        {"id": "travel", "title": "Travel", "text": "Trains are booked in second class for trips under four hours."}]
ROLES = ("admin", "editor", "viewer", "outsider", "leaver")


def _as(stack, key: str, *args: str) -> str:
    """The command line as the key's user, talking to the stack's API."""
    done = subprocess.run([str(BIN / "agentsearch"), *args], cwd=REPO, capture_output=True, text=True,
                          env={**stack.env, "AGENTSEARCH_API_KEY": key})
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def team(stack) -> dict:
    """A team of an admin, an editor, a viewer and a leaver (added by the operator's command), with a collection
    whose name the admin's personal collection also has; and an outsider."""
    tag = uuid.uuid4().hex[:6]
    names = {role: f"{role}-{tag}" for role in ROLES}
    keys = {role: stack.create_user(name) for role, name in names.items()}
    with stack.http(keys["admin"]) as admin:
        made = admin.post("/v1/teams", json={"name": f"support-{tag}"})
        assert made.status_code == 201, made.text
        team_id = made.json()["id"]
        for role in ("editor", "viewer"):
            put = admin.put(f"/v1/teams/{team_id}/members/{names[role]}", json={"role": role})
            assert put.status_code == 200 and put.json()["role"] == role, put.text
        shared = admin.post("/v1/collections", json={"name": "handbook", "team_id": team_id})
        assert shared.status_code == 201, shared.text
        assert admin.post("/v1/collections", json={"name": "handbook"}).status_code == 201
    assert f"viewer of team support-{tag}" in stack.cli("teams", "add-member", f"support-{tag}", names["leaver"],
                                                          "--role", "viewer")
    return {"id": team_id, "name": f"support-{tag}", "collection": shared.json()["id"], "keys": keys,
            "names": names}


def test_the_editor_ingests_by_team_name_and_every_member_lists_it(stack, team):
    path = stack.tmp / f"{team['name']}.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    _as(stack, team["keys"]["editor"], "ingest", str(path), "--collection", f"{team['name']}/handbook")
    shown = stack.cli("teams", "show", team["name"])
    for role in ("admin", "editor", "viewer"):
        assert f"{role:<8} {team['names'][role]}" in shown
    assert f"collection {team['name']}/handbook  {team['collection']}" in shown
    for role in ("admin", "editor", "viewer"):
        with stack.http(team["keys"][role]) as member:
            listed = {c["id"]: c for c in member.get("/v1/collections").json()}
            assert listed[team["collection"]]["role"] == role and listed[team["collection"]]["team"] == team["name"]
            assert listed[team["collection"]]["documents"] == {"pending": 0, "indexed": 2, "failed": 0}


def test_a_viewer_searches_and_reads_but_gets_403_naming_editor_for_changes(stack, team):
    c = team["collection"]
    with stack.http(team["keys"]["viewer"]) as viewer:
        job = search(viewer, c, "How long is the notice period?", agents=[], use_cache=False)
        assert job["status"] == "succeeded" and "four weeks" in job["response"]["answer"], job
        assert {d["id"] for d in viewer.get(f"/v1/collections/{c}/documents").json()["items"]} == {"leave", "travel"}
        refused = [viewer.post(f"/v1/collections/{c}/documents", json={"documents": DOCS}),
                   viewer.delete(f"/v1/collections/{c}/documents/leave"),
                   viewer.put(f"/v1/collections/{c}/agents", json={"agents": []}),
                   viewer.post("/v1/webhooks", json={"url": "https://hooks.example.org/x", "events": ["job.failed"],
                                                     "collection_id": c})]
        for answer in refused:
            assert answer.status_code == 403, answer.text
            assert f"needs the role 'editor' in team '{team['name']}'" in answer.json()["detail"]
        # The viewer's own search by the command line: a plain name is its team's, the one it has.
        printed = _as(stack, team["keys"]["viewer"], "search", "notice period", "--collection", "handbook",
                      "--agents", "")
        assert "four weeks" in printed
    with stack.http(team["keys"]["editor"]) as editor:
        # The viewer's job over the team's collection is read by another member.
        assert editor.get(f"/v1/jobs/{job['job_id']}").json()["response"]["answer"] == job["response"]["answer"]
        assert job["job_id"] in {j["job_id"] for j in editor.get("/v1/jobs").json()["items"]}


def test_a_non_member_finds_nothing_of_the_team(stack, team):
    c, nobody = team["collection"], str(uuid.uuid4())
    with stack.http(team["keys"]["admin"]) as admin:
        job_id = search(admin, c, "trains", agents=[], use_cache=False)["job_id"]
    with stack.http(team["keys"]["outsider"]) as outsider:
        for path, ident in ((f"/v1/collections/{c}", c), (f"/v1/collections/{c}/documents", c),
                            (f"/v1/teams/{team['id']}", team["id"]), (f"/v1/jobs/{job_id}", job_id)):
            theirs, missing = outsider.get(path), outsider.get(path.replace(ident, nobody))
            assert theirs.status_code == missing.status_code == 404, path
            assert theirs.json()["detail"].replace(ident, "ID") == missing.json()["detail"].replace(nobody, "ID")
        assert c not in {x["id"] for x in outsider.get("/v1/collections").json()}
        assert outsider.post("/v1/search", json={"collection_id": c, "query": "trains"}).status_code == 404
        joined = outsider.put(f"/v1/teams/{team['id']}/members/{team['names']['outsider']}", json={"role": "viewer"})
        assert joined.status_code == 404


def test_nobody_raises_its_own_role(stack, team):
    t, names = team["id"], team["names"]
    with stack.http(team["keys"]["viewer"]) as viewer:
        raised = viewer.put(f"/v1/teams/{t}/members/{names['viewer']}", json={"role": "admin"})
        assert raised.status_code == 403 and "your own role" in raised.json()["detail"]
    with stack.http(team["keys"]["editor"]) as editor:
        promoted = editor.put(f"/v1/teams/{t}/members/{names['viewer']}", json={"role": "editor"})
        assert promoted.status_code == 403 and "needs the role 'admin'" in promoted.json()["detail"]
    with stack.http(team["keys"]["admin"]) as admin:
        assert admin.delete(f"/v1/teams/{t}/members/{names['admin']}").status_code == 409  # the last admin
        roles = {m["name"]: m["role"] for m in admin.get(f"/v1/teams/{t}").json()["members"]}
    assert (roles[names["viewer"]], roles[names["editor"]], roles[names["admin"]]) == ("viewer", "editor", "admin")


def test_a_member_removed_mid_job_loses_it_at_its_next_request_and_the_job_finishes(stack, team):
    c, leaver = team["collection"], team["keys"]["leaver"]
    # The job waits at its pre-search agent until the member is removed and every check below is made, however
    # long the command line takes to start on a loaded machine.
    gate = stack.call_logs / f"gate-{uuid.uuid4().hex}"
    with stack.http(team["keys"]["editor"]) as editor:
        # The collection's agent set, as its editor sets it: a pre-search agent that holds the job until told.
        made = editor.post("/v1/agent-configs", json={"agent_id": "test_gated", "config": {"gate": str(gate)}})
        assert made.status_code == 201, made.text
        linked = editor.put(f"/v1/collections/{c}/agents", json={"agents": [{"agent_config_id": made.json()["id"]}]})
        assert linked.status_code == 200, linked.text
    try:
        with stack.http(leaver) as member:
            submitted = member.post("/v1/search", json={"collection_id": c, "query": "notice period",
                                                        "use_cache": False})
            assert submitted.status_code == 202, submitted.text
            job_id = submitted.json()["job_id"]
            deadline = time.monotonic() + 20
            while member.get(f"/v1/jobs/{job_id}").json()["status"] != "running":
                assert time.monotonic() < deadline, "the job never started"
                time.sleep(0.1)
            with member.stream("GET", f"/v1/jobs/{job_id}/events") as events:
                lines = events.iter_lines()
                assert next(lines) == "event: status"
                assert "removed" in stack.cli("teams", "remove-member", team["name"], team["names"]["leaver"])
                # Its open event stream ends at its next check of the key, before the job does.
                rest = list(lines)
            assert "event: error" in rest and '"status": 404' in "".join(rest) and "event: done" not in rest
            # The very next request: the job, the collection and its documents are gone for it.
            assert member.get(f"/v1/jobs/{job_id}").status_code == 404
            assert member.get(f"/v1/collections/{c}").status_code == 404
            assert c not in {x["id"] for x in member.get("/v1/collections").json()}
            assert job_id not in {j["job_id"] for j in member.get("/v1/jobs").json()["items"]}
            gate.touch()
            with stack.http(team["keys"]["admin"]) as admin:
                finished = wait_job(admin, job_id, timeout_s=60)
            assert finished["status"] == "succeeded" and "four weeks" in finished["response"]["answer"]
            held = [run for run in finished["response"]["agents"] if run["agent_id"] == "test_gated"]
            assert [run["status"] for run in held] == ["ok"]  # it ran to its end after the removal
            assert member.get(f"/v1/jobs/{job_id}").status_code == 404
            assert member.get(f"/v1/jobs/{job_id}/artifacts/summary.txt").status_code == 404
    finally:
        gate.touch()
        with stack.http(team["keys"]["editor"]) as editor:
            editor.put(f"/v1/collections/{c}/agents", json={"agents": []})


def test_a_removed_members_job_listing_counts_only_the_jobs_it_still_reads(stack, team):
    """Its jobs over the team's collection, and over its own with the team's in ``also_search``, are no longer its
    to read: ``total`` counts the jobs over its own collection alone, and every page of two agrees with it."""
    tag = uuid.uuid4().hex[:6]
    name = f"departing-{tag}"
    key = stack.create_user(name)
    with stack.http(team["keys"]["admin"]) as admin:
        assert admin.put(f"/v1/teams/{team['id']}/members/{name}", json={"role": "viewer"}).status_code == 200
    with stack.http(key) as member:
        mine = member.post("/v1/collections", json={"name": f"own-{tag}"}).json()["id"]
        asked = [(team["collection"], {}), (team["collection"], {}), (mine, {"also_search": [team["collection"]]}),
                 (mine, {}), (mine, {"also_search": [team["collection"]]}), (mine, {}), (mine, {})]
        jobs = [search(member, c, f"question {i}", agents=[], use_cache=False, **extra)["job_id"]
                for i, (c, extra) in enumerate(asked)]
        before = member.get("/v1/jobs", params={"limit": 200}).json()  # other members' over the team's too
        assert set(jobs) <= {j["job_id"] for j in before["items"]} and before["total"] == len(before["items"])
    with stack.http(team["keys"]["admin"]) as admin:
        assert admin.delete(f"/v1/teams/{team['id']}/members/{name}").status_code == 204
    readable = [job for job, (c, extra) in zip(jobs, asked, strict=True) if c == mine and not extra][::-1]
    with stack.http(key) as member:
        whole = member.get("/v1/jobs", params={"limit": 200}).json()
        assert ([j["job_id"] for j in whole["items"]], whole["total"]) == (readable, len(readable)), whole
        paged = [member.get("/v1/jobs", params={"limit": 2, "offset": offset}).json() for offset in (0, 2, 4)]
    assert [p["total"] for p in paged] == [len(readable)] * 3
    assert [j["job_id"] for p in paged for j in p["items"]] == readable


def test_an_admin_puts_a_member_in_a_document_group_and_takes_it_out(stack, team):
    t, viewer_name = team["id"], team["names"]["viewer"]
    path, groups = f"/v1/teams/{t}/groups/hr/members/{viewer_name}", f"/v1/teams/{t}/groups"
    with stack.http(team["keys"]["admin"]) as admin:
        put = admin.put(path)
        assert put.status_code == 200, put.text
        assert (put.json()["group"], put.json()["name"]) == ("hr", viewer_name) and put.json()["user_id"]
        assert admin.put(path).status_code == 200  # again: nothing changes
        listed = admin.get(groups).json()
        # An admin sees every group and who is in it; it holds none of them itself.
        assert [(g["name"], g["held"], [m["name"] for m in g["members"]]) for g in listed] == [
            ("hr", False, [viewer_name])]
        assert admin.get(f"/v1/teams/{t}").json()["groups"] == listed
    with stack.http(team["keys"]["viewer"]) as viewer:
        # Another member sees the groups it holds, names only.
        assert viewer.get(groups).json() == viewer.get(f"/v1/teams/{t}").json()["groups"] == [
            {"name": "hr", "held": True}]
    with stack.http(team["keys"]["editor"]) as editor:
        assert editor.get(groups).json() == []
    with stack.http(team["keys"]["admin"]) as admin:
        assert admin.delete(path).status_code == 204
        gone = admin.delete(path)
        assert gone.status_code == 404 and f"is not in group 'hr' of team '{team['name']}'" in gone.json()["detail"]
        assert admin.get(groups).json() == []  # the group ended with its last member
        trail = admin.get(f"/v1/teams/{t}/audit", params={"action": "team.group.*", "limit": 2}).json()["items"]
        assert [(e["action"], e["details"]) for e in trail] == [
            ("team.group.member.remove", {"group": "hr", "name": viewer_name}),
            ("team.group.member.set", {"group": "hr", "name": viewer_name})]
    with stack.http(team["keys"]["viewer"]) as viewer:
        assert viewer.get(groups).json() == []


def test_only_an_admin_changes_who_is_in_a_group_and_nobody_puts_itself_in_one(stack, team):
    t, names = team["id"], team["names"]
    for role in ("viewer", "editor"):
        with stack.http(team["keys"][role]) as member:
            for method in ("PUT", "DELETE"):
                # Itself (the escalation a group would be) or another member: the admins' alone.
                for whom in (names[role], names["admin"]):
                    refused = member.request(method, f"/v1/teams/{t}/groups/hr/members/{whom}")
                    assert refused.status_code == 403, refused.text
                    assert (f"needs the role 'admin' in team '{team['name']}'; your role there is '{role}'"
                            in refused.json()["detail"])
    with stack.http(team["keys"]["outsider"]) as outsider:
        for answer in (outsider.put(f"/v1/teams/{t}/groups/hr/members/{names['outsider']}"),
                       outsider.get(f"/v1/teams/{t}/groups")):
            assert answer.status_code == 404 and answer.json()["detail"] == f"team {t} not found"
    with stack.http(team["keys"]["admin"]) as admin:
        stranger = admin.put(f"/v1/teams/{t}/groups/hr/members/{names['outsider']}")
        assert stranger.status_code == 409 and "add it to the team first" in stranger.json()["detail"]
        badly_named = admin.put(f"/v1/teams/{t}/groups/h%20r/members/{names['viewer']}")
        assert badly_named.status_code == 422 and badly_named.json()["detail"][0]["loc"] == ["path", "group"]
        unknown = admin.put(f"/v1/teams/{t}/groups/hr/members/nobody-{uuid.uuid4().hex[:6]}")
        assert unknown.status_code == 404 and "not found" in unknown.json()["detail"]
        assert admin.get(f"/v1/teams/{t}/groups").json() == []
    with stack.http(team["keys"]["viewer"]) as viewer:
        assert viewer.get(f"/v1/teams/{t}/groups").json() == []


def test_the_operator_manages_groups_and_a_member_leaving_the_team_leaves_them(stack, team):
    # The leaver: taken out of the team by an earlier test (when the module runs whole), in it again here.
    t, member_name, key = team["id"], team["names"]["leaver"], team["keys"]["leaver"]
    with stack.http(team["keys"]["admin"]) as admin:
        assert admin.put(f"/v1/teams/{t}/members/{member_name}", json={"role": "viewer"}).status_code == 200
        assert admin.put(f"/v1/teams/{t}/groups/finance/members/{member_name}").status_code == 200
    added = stack.cli("teams", "group-add", team["name"], "legal", member_name)
    assert f"{member_name} is in group legal of team {team['name']}" in added
    listed = {line.split()[0]: line.split()[1:] for line in stack.cli("teams", "groups", team["name"]).splitlines()}
    assert listed == {"finance": [member_name], "legal": [member_name]}
    with stack.http(key) as member:
        assert [g["name"] for g in member.get(f"/v1/teams/{t}/groups").json()] == ["finance", "legal"]
    removed = stack.cli("teams", "group-remove", team["name"], "finance", member_name)
    assert f"removed {member_name} from group finance of team {team['name']}" in removed
    with stack.http(key) as member:
        assert [g["name"] for g in member.get(f"/v1/teams/{t}/groups").json()] == ["legal"]
    with stack.http(team["keys"]["admin"]) as admin:
        assert admin.delete(f"/v1/teams/{t}/members/{member_name}").status_code == 204
        # Added back, it starts in no group: leaving the team took it out of them.
        assert admin.put(f"/v1/teams/{t}/members/{member_name}", json={"role": "viewer"}).status_code == 200
        assert admin.get(f"/v1/teams/{t}/groups").json() == []
    with stack.http(key) as member:
        assert member.get(f"/v1/teams/{t}/groups").json() == []
    with stack.http(team["keys"]["admin"]) as admin:
        assert admin.delete(f"/v1/teams/{t}/members/{member_name}").status_code == 204


def test_the_console_shows_teams_and_lets_an_admin_add_change_and_remove_members(stack, team):
    """In a browser: an admin's Teams view lists the team's members and roles; it adds a user as viewer, makes it
    editor, puts it in a document group and takes it out, and removes it; a change of its own role shows the API's
    refusal; a collection is made for the team."""
    from tests.integration.test_console import _sign_in, own_console

    tag = uuid.uuid4().hex[:6]
    me, newcomer = f"console-admin-{tag}", f"newcomer-{tag}"
    stack.create_user(newcomer)
    with own_console(stack, me) as console:
        page = console.page
        with console.http() as http:
            assert http.get(f"/v1/teams/{team['id']}").status_code == 404  # not yet a member
        stack.cli("teams", "add-member", team["name"], me, "--role", "admin")
        _sign_in(console)
        console.goto(f"#/teams/{team['id']}")
        rows = page.locator("table.members tbody tr")
        rows.first.wait_for()
        roles = {row.get_attribute("data-member"): row.get_attribute("data-role") for row in rows.all()}
        assert (roles[team["names"]["viewer"]], roles[me]) == ("viewer", "admin")
        console.shoot("teams")

        page.fill("form.add-member input[name=user]", newcomer)
        page.select_option("form.add-member select[name=role]", "viewer")
        page.click("form.add-member button[type=submit]")
        page.wait_for_selector(f"tr[data-member='{newcomer}'][data-role='viewer']")
        page.select_option(f"tr[data-member='{newcomer}'] select", "editor")
        page.wait_for_selector(f"tr[data-member='{newcomer}'][data-role='editor']")
        # A document group: the newcomer put in one, then taken out of it, which ends the group.
        page.fill("form.add-group-member input[name=group]", "console-hr")
        page.select_option("form.add-group-member select[name=user]", label=newcomer)
        page.click("form.add-group-member button[type=submit]")
        page.wait_for_selector(f"tr[data-group='console-hr'] li[data-group-member='{newcomer}']")
        page.click(f"tr[data-group='console-hr'] li[data-group-member='{newcomer}'] button")
        page.wait_for_selector("tr[data-group='console-hr']", state="detached")
        page.select_option(f"tr[data-member='{me}'] select", "viewer")
        alert = page.locator(".view-teams .team-error")
        alert.wait_for(state="visible")
        assert "your own role" in alert.inner_text()
        page.click(f"tr[data-member='{newcomer}'] button")
        page.wait_for_selector(f"tr[data-member='{newcomer}']", state="detached")
        with stack.http(team["keys"]["admin"]) as admin:
            members = {m["name"]: m["role"] for m in admin.get(f"/v1/teams/{team['id']}").json()["members"]}
        assert newcomer not in members and members[me] == "admin"

        console.goto("#/collections")
        page.fill("aside form input[name=name]", "console-shared")
        page.select_option("aside form select[name=team_id]", team["id"])
        page.click("aside form button[type=submit]")
        page.wait_for_selector(f".collection-name:text-is('{team['name']}/console-shared')")
