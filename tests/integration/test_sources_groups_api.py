"""A source's permissions through the API in the embedded mode (its worker threads run the runs and index what they
bring): a mailbox on a real Dovecot whose HR folder is mapped to a team's group, searched by a member in the group
and one outside it, before and after the admin maps another folder."""

from __future__ import annotations

import time
import uuid

import pytest

from tests.integration.test_sources_api import _wait_run, client  # noqa: F401  (client: a fixture)
from tests.support.mail_server import Dovecot, message

pytestmark = pytest.mark.integration


def _found(client, headers: dict, collection_id: str, query: str) -> set[str]:  # noqa: F811
    """What a search by the caller cites: each source URL, or the document id of one without (an attachment)."""
    job_id = client.post("/v1/search", headers=headers, json={
        "collection_id": collection_id, "query": query, "agents": [], "use_cache": False}).json()["job_id"]
    deadline = time.monotonic() + 90
    while (job := client.get(f"/v1/jobs/{job_id}", headers=headers).json())["status"] not in ("succeeded", "failed"):
        assert time.monotonic() < deadline, job["status"]
        time.sleep(0.2)
    assert job["status"] == "succeeded", job
    return {s.get("url") or s["document_id"] for s in job["response"]["sources"]}


def _wait_indexed(client, headers: dict, collection_id: str) -> dict:  # noqa: F811
    """The collection's documents by state, as the caller sees them, once none is pending."""
    deadline = time.monotonic() + 120
    while (counts := client.get(f"/v1/collections/{collection_id}", headers=headers).json()["documents"])["pending"]:
        assert time.monotonic() < deadline, counts
        time.sleep(0.3)
    return counts


def _listed(client, headers: dict, collection_id: str) -> set[str]:  # noqa: F811
    """The folders of the messages the caller lists, and ``FOLDER+attachment`` for their attachments' documents."""
    items = client.get(f"/v1/collections/{collection_id}/documents", headers=headers).json()["items"]
    folders = {d["id"]: d["metadata"]["source_url"].split("/")[3].split(";")[0] for d in items
               if "source_url" in d["metadata"]}
    return set(folders.values()) | {folders.get(d["metadata"]["attached_to"], "?") + "+attachment" for d in items
                                    if "attached_to" in d["metadata"]}


def test_a_folder_s_group_decides_who_finds_its_mail_and_a_new_mapping_reaches_search_in_one_run(client):  # noqa: F811
    from agentsearch.pipeline.security.users import UserStore

    tag = uuid.uuid4().hex[:6]
    store = UserStore(client.app.state.services.db)
    keys = {name: store.create(f"{name}-{tag}")[1] for name in ("payroll", "staff")}
    team_id = client.post("/v1/teams", json={"name": f"coop-{tag}"}).json()["id"]
    for name in keys:
        assert client.put(f"/v1/teams/{team_id}/members/{name}-{tag}", json={"role": "viewer"}).status_code == 200
    assert client.put(f"/v1/teams/{team_id}/groups/hr/members/payroll-{tag}").status_code == 200
    collection_id = client.post("/v1/collections", json={"name": f"mail-{tag}", "team_id": team_id}).json()["id"]
    payroll, staff = ({"Authorization": f"Bearer {keys[n]}"} for n in ("payroll", "staff"))

    with Dovecot({"ana": "s3cret"}) as imap:
        imap.create("ana", "HR")
        tractor = imap.deliver("ana", "INBOX", message("Tractor", "The tractor is parked in barn two.",
                                                       {"rota.txt": b"The tractor rota: Ana on Mondays."}))
        imap.deliver("ana", "HR", message("Salaries", "The salaries of the silo staff rise in May."))
        url = f"/v1/collections/{collection_id}/sources"
        created = client.post(url, json={"kind": "mail", "config": {
            "host": "127.0.0.1", "port": imap.port, "username": "ana", "password": "s3cret", "folders": ["INBOX", "HR"],
            "tls": "none", "groups": {"HR": "hr"}}})
        assert created.status_code == 201, created.text
        assert created.json()["config"]["password"] == "set"
        base = f"{url}/{created.json()['id']}"
        done = _wait_run(client, base, client.post(f"{base}/runs").json()["id"])
        assert done["status"] == "succeeded" and done["documents"]["new"] == 2, done
        # The message with its attachment, which became a document of its own as an uploaded e-mail's does.
        assert _wait_indexed(client, payroll, collection_id) == {"pending": 0, "indexed": 3, "failed": 0}

        assert _listed(client, payroll, collection_id) == {"INBOX", "INBOX+attachment", "HR"}
        assert _listed(client, staff, collection_id) == {"INBOX", "INBOX+attachment"}
        assert any("/HR;" in u for u in _found(client, payroll, collection_id, "When do the salaries rise?"))
        assert not any("/HR;" in u for u in _found(client, staff, collection_id, "When do the salaries rise?"))

        # The admin maps INBOX to hr as well: at the next run its message is hr's only, in listings and in search.
        assert client.patch(base, json={"config": {"groups": {"HR": "hr", "INBOX": "hr"}}}).status_code == 200
        again = _wait_run(client, base, client.post(f"{base}/runs").json()["id"])
        assert again["documents"] == {"new": 0, "changed": 1, "unchanged": 1, "removed": 0, "failed": 0}, again
        assert _wait_indexed(client, payroll, collection_id) == {"pending": 0, "indexed": 3, "failed": 0}
        assert _listed(client, staff, collection_id) == set()  # the attachment's document followed its message
        assert _found(client, staff, collection_id, "Where is the tractor parked?") == set()
        assert any("/INBOX;" in u for u in _found(client, payroll, collection_id, "Where is the tractor parked?"))

        # The message expunged: its document and its attachment's are removed at the next run.
        imap.expunge("ana", "INBOX", tractor)
        removed = _wait_run(client, base, client.post(f"{base}/runs").json()["id"])
        assert removed["documents"]["removed"] == 1, removed
        assert _listed(client, payroll, collection_id) == {"HR"}
