"""The console offers each action on a collection only to a role that may take it: a team's viewer sees neither
Upload, nor a document's Delete, nor the controls of the collection's agent set (a note names the role that may);
an editor, an admin and the owner of a personal collection see them all; an admin alone is offered the team when
making a collection. The page only hides: the viewer calling the routes itself, through the console's own client,
still gets the API's 403, and the other roles' calls go through.

Each role signs in a headless Chromium of its own (tests/integration/test_console.py's ``own_console``).
"""

from __future__ import annotations

import uuid

import pytest

from tests.integration.conftest import wait_indexed
from tests.integration.test_console import _sign_in, own_console

pytestmark = pytest.mark.integration

DOCS = [{"id": "leave", "title": "Leave policy", "text": "The notice period is four weeks for every employee."}]
# Each route a hidden action calls, called from the page with the console's own client: the status it answers.
CALL_ACTIONS = """async ([collection, documentId]) => {
  const { api } = await import('/console/api.js');
  const status = (call) => call.then(() => 200, (exc) => exc.status);
  const form = new FormData();
  form.append('files', new Blob(['A note on leave.'], { type: 'text/plain' }), 'note.txt');
  const set = await api(`/v1/collections/${collection}/agents`);
  return {
    agents: await status(api(`/v1/collections/${collection}/agents`, { method: 'PUT', json: { agents: set.agents } })),
    ...(documentId === null ? {} : {
      upload: await status(api(`/v1/collections/${collection}/files`, { method: 'POST', form })),
      delete: await status(api(`/v1/collections/${collection}/documents/${documentId}`, { method: 'DELETE' })),
    }),
  };
}"""


def _with_doc_and_agent(http, collection_id: str) -> None:
    """The collection holds a document and runs an agent of the caller's, so each action has something to show."""
    assert http.post(f"/v1/collections/{collection_id}/documents", json={"documents": DOCS}).status_code == 202
    config = http.post("/v1/agent-configs", json={"agent_id": "deduplicator"})
    assert config.status_code == 201, config.text
    assert http.put(f"/v1/collections/{collection_id}/agents",
                    json={"agents": [{"agent_config_id": config.json()["id"]}]}).status_code == 200
    wait_indexed(http, collection_id)


@pytest.fixture(scope="module")
def team(stack) -> dict:
    """A team whose founder made a collection with a document and an agent set."""
    tag = uuid.uuid4().hex[:6]
    founder = stack.create_user(f"console-founder-{tag}")
    with stack.http(founder) as http:
        team_id = http.post("/v1/teams", json={"name": f"console-roles-{tag}"}).json()["id"]
        made = http.post("/v1/collections", json={"name": "handbook", "team_id": team_id})
        assert made.status_code == 201, made.text
        _with_doc_and_agent(http, made.json()["id"])
    return {"id": team_id, "collection": made.json()["id"], "founder": founder, "tag": tag}


def _shown(page) -> dict:
    """What the collection's page and its agents' page offer, once each has loaded."""
    page.wait_for_selector(".view-collections tr[data-document='leave']")
    collection = {"upload": page.locator(".view-collections form.upload").count(),
                  "delete": page.locator("tr[data-document='leave'] button", has_text="Delete").count(),
                  "note": page.locator(".view-collections .role-note").count()}
    page.locator(".view-collections a", has_text="Agents of this collection").click()
    # The set's status line is the last thing its card gets, once the set is read.
    page.wait_for_selector(".view-agents section[aria-labelledby='set-title'] p[aria-live='polite']", state="attached")
    agents = {"add": page.locator(".view-agents #add-agent").count(),
              "configure": page.locator(".catalogue-list button", has_text="Configure").count() > 0,
              "note": page.locator(".view-agents .role-note").count()}
    return {"collection": collection, "agents": agents}


OFFERED = {"collection": {"upload": 1, "delete": 1, "note": 0}, "agents": {"add": 1, "configure": True, "note": 0}}
HIDDEN = {"collection": {"upload": 0, "delete": 0, "note": 1}, "agents": {"add": 0, "configure": False, "note": 1}}


@pytest.mark.parametrize("role", ["viewer", "editor", "admin"])
def test_a_team_member_is_offered_what_its_role_may_do(stack, team, role):
    name = f"console-{role}-{team['tag']}"
    with own_console(stack, name) as console:
        page = console.page
        with stack.http(team["founder"]) as founder:
            added = founder.put(f"/v1/teams/{team['id']}/members/{name}", json={"role": role})
            assert added.status_code == 200, added.text
        _sign_in(console)
        console.goto(f"#/collections/{team['collection']}")
        page.wait_for_selector(".view-collections tr[data-document='leave']")
        # Making a collection in the team is an admin's: only an admin's form offers it.
        offered_team = page.locator(f".view-collections select[name=team_id] option[value='{team['id']}']").count()
        assert offered_team == (1 if role == "admin" else 0)
        shown = _shown(page)
        if role == "viewer":
            assert shown == HIDDEN
            assert "is viewer: an editor" in page.locator(".view-agents .role-note").inner_text()
            console.shoot("agents-viewer")
            # Hidden, not allowed: the same calls made directly are refused, and nothing changed.
            called = page.evaluate(CALL_ACTIONS, [team["collection"], "leave"])
            assert called == {"agents": 403, "upload": 403, "delete": 403}
            with console.http() as http:
                assert [d["id"] for d in http.get(f"/v1/collections/{team['collection']}/documents").json()[
                    "items"]] == ["leave"]
        else:
            assert shown == OFFERED
            # The set of the founder's configs, sent back as it is: the role's call goes through.
            assert page.evaluate(CALL_ACTIONS, [team["collection"], None]) == {"agents": 200}


def test_the_owner_of_a_personal_collection_is_offered_every_action(stack):
    with own_console(stack, f"console-owner-{uuid.uuid4().hex[:6]}") as console:
        with console.http() as http:
            made = http.post("/v1/collections", json={"name": "mine"})
            assert made.status_code == 201, made.text
            _with_doc_and_agent(http, made.json()["id"])
            assert http.get("/v1/collections").json()[0]["role"] == "owner"
        _sign_in(console)
        console.goto(f"#/collections/{made.json()['id']}")
        assert _shown(console.page) == OFFERED
        # Its own config in the set: each entry's controls are there.
        assert console.page.locator(".view-agents .set-item input[type=checkbox]").count() == 1
