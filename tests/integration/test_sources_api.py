"""A collection's sources through the API and the command line, in the embedded mode (its worker threads run the
runs and index what they bring) against a real HTTP server; the audit trail of each change and run."""

from __future__ import annotations

import os
import time
import uuid

import pytest
from click.testing import CliRunner
from cryptography.fernet import Fernet
from fastapi.testclient import TestClient

from tests.support.source_servers import SiteServer

pytestmark = pytest.mark.integration
KEY = Fernet.generate_key().decode()


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    """The embedded app with the test's loopback server allowed and a sources key, as a user of its own."""
    from agentsearch.pipeline.platform.settings import get_settings
    from agentsearch.pipeline.security.users import UserStore
    from agentsearch.pipeline.services import reset_services, use_services

    with pytest.MonkeyPatch.context() as mp:
        for name in list(os.environ):
            if name.upper().startswith("AGENTSEARCH_"):
                mp.delenv(name)
        mp.setenv("AGENTSEARCH_DATA_DIR", str(tmp_path_factory.mktemp("sources-api")))
        mp.setenv("AGENTSEARCH_EGRESS_ALLOW", '["127.0.0.1"]')
        mp.setenv("AGENTSEARCH_SOURCES_KEY", KEY)
        get_settings.cache_clear()
        previous = use_services(None)
        reset_services()
        from agentsearch.api.app import create_app

        app = create_app()
        try:
            with TestClient(app) as c:
                _, key = UserStore(app.state.services.db).create(f"src-{uuid.uuid4().hex[:8]}")
                c.headers["Authorization"] = f"Bearer {key}"
                yield c
        finally:
            app.state.services.close()
            use_services(previous)
            get_settings.cache_clear()


def _wait_run(client, base: str, run_id: str) -> dict:
    deadline = time.monotonic() + 60
    while True:
        run = next(r for r in client.get(f"{base}/runs").json()["items"] if r["id"] == run_id)
        if run["status"] not in ("queued", "running"):
            return run
        assert time.monotonic() < deadline, run
        time.sleep(0.2)


def _wait_indexed(client, collection_id: str) -> dict:
    deadline = time.monotonic() + 120
    while (counts := client.get(f"/v1/collections/{collection_id}").json()["documents"])["pending"]:
        assert time.monotonic() < deadline, counts
        time.sleep(0.3)
    return counts


def test_a_source_is_added_run_searched_changed_and_removed_through_the_api(client, tmp_path):
    collection_id = client.post("/v1/collections", json={"name": "site"}).json()["id"]
    url = f"/v1/collections/{collection_id}/sources"
    bad = client.post(url, json={"kind": "web", "config": {"url": "ftp://x", "max_pages": 0}})
    assert bad.status_code == 422
    assert sorted(tuple(d["loc"]) for d in bad.json()["detail"]) == [("body", "config", "max_pages"),
                                                                     ("body", "config", "url")]
    unknown = client.post(url, json={"kind": "gopher", "config": {}})
    assert unknown.status_code == 422 and unknown.json()["detail"][0]["loc"] == ["body", "kind"]
    assert client.post(url, json={"kind": "web", "config": {"url": "http://a.example/"}, "schedule_s": 5}
                       ).status_code == 422

    with SiteServer(tmp_path / "site") as site:
        site.write("/docs/index.html", "<html><head><title>Silo</title></head><body><p>The cooperative's grain "
                                       "silo stands by the river.</p></body></html>")
        created = client.post(url, json={"kind": "web", "config": {"url": site.url("/docs/index.html"),
                                                                  "username": "reader", "password": "s3cret"}})
        assert created.status_code == 201, created.text
        source = created.json()
        assert source["config"]["password"] == "set" and "s3cret" not in created.text
        base = f"{url}/{source['id']}"
        run = client.post(f"{base}/runs")
        assert run.status_code == 202 and run.json()["status"] == "queued"
        done = _wait_run(client, base, run.json()["id"])
        assert done["status"] == "succeeded" and done["documents"]["new"] == 1, done
        assert _wait_indexed(client, collection_id) == {"pending": 0, "indexed": 1, "failed": 0}
        listed = client.get(f"/v1/collections/{collection_id}/documents").json()["items"]
        assert listed[0]["metadata"]["source_url"] == site.url("/docs/index.html")
        assert listed[0]["title"] == "Silo"
        # The answer's sources give the page a source brought each document from.
        job_id = client.post("/v1/search", json={"collection_id": collection_id, "query": "Where is the grain silo?",
                                                 "agents": [], "use_cache": False}).json()["job_id"]
        deadline = time.monotonic() + 90
        while (job := client.get(f"/v1/jobs/{job_id}").json())["status"] not in ("succeeded", "failed"):
            assert time.monotonic() < deadline, job["status"]
            time.sleep(0.2)
        assert job["status"] == "succeeded", job
        assert job["response"]["sources"][0]["url"] == site.url("/docs/index.html")

        read = client.get(base).json()
        assert read["last_run"]["id"] == done["id"] and "s3cret" not in str(read)
        changed = client.patch(base, json={"config": {"max_pages": 5}, "enabled": False})
        assert changed.status_code == 200 and changed.json()["config"]["max_pages"] == 5
        assert changed.json()["config"]["password"] == "set"  # left out of the change: kept
        assert client.patch(base, json={"config": {"max_depth": -1}}).json()["detail"][0]["loc"] == [
            "body", "config", "max_depth"]

    gone = client.delete(base)
    assert gone.status_code == 202 and gone.json()["removed"] == 1
    assert client.get(base).status_code == 404
    assert client.get(f"/v1/collections/{collection_id}/documents").json()["total"] == 0


def test_another_user_reaches_no_source(client):
    from agentsearch.pipeline.security.users import UserStore

    collection_id = client.post("/v1/collections", json={"name": "mine"}).json()["id"]
    source = client.post(f"/v1/collections/{collection_id}/sources",
                         json={"kind": "feed", "config": {"url": "https://example.org/feed.xml"}}).json()
    _, key = UserStore(client.app.state.services.db).create(f"other-{uuid.uuid4().hex[:8]}")
    other = {"Authorization": f"Bearer {key}"}
    base = f"/v1/collections/{collection_id}/sources"
    assert client.get(base, headers=other).status_code == 404
    assert client.post(f"{base}/{source['id']}/runs", headers=other).status_code == 404
    assert client.delete(f"{base}/{source['id']}", headers=other).status_code == 404


def test_every_change_and_run_is_in_the_audit_trail(client):
    from sqlalchemy import select

    from agentsearch.pipeline.platform.tables.audit import AuditEventRow

    with client.app.state.services.db.session() as s:
        actions = set(s.scalars(select(AuditEventRow.action).where(AuditEventRow.action.like("source.%"))))
    assert {"source.create", "source.update", "source.delete", "source.run", "source.run.end"} <= actions


def test_rotate_key_seals_the_credentials_again_without_reading_the_source(client, monkeypatch):
    from agentsearch.cli import main
    from agentsearch.pipeline.platform.settings import get_settings
    from agentsearch.pipeline.platform.tables.sources import SourceRow
    from agentsearch.pipeline.sources.credentials import CredentialBox

    collection_id = client.post("/v1/collections", json={"name": "rotated"}).json()["id"]
    source_id = client.post(f"/v1/collections/{collection_id}/sources", json={
        "kind": "web", "config": {"url": "https://example.org/", "username": "u", "password": "pw"}}).json()["id"]
    new_key = Fernet.generate_key().decode()
    monkeypatch.setenv("AGENTSEARCH_SOURCES_KEY", new_key)
    monkeypatch.setenv("AGENTSEARCH_SOURCES_PREVIOUS_KEYS", f'["{KEY}"]')
    get_settings.cache_clear()
    try:
        result = CliRunner().invoke(main, ["sources", "rotate-key"])
        assert result.exit_code == 0, result.output
        assert "sealed with the current key" in result.output
    finally:
        monkeypatch.setenv("AGENTSEARCH_SOURCES_KEY", KEY)
        get_settings.cache_clear()
    with client.app.state.services.db.session() as s:
        token = s.get(SourceRow, uuid.UUID(source_id)).credentials.partition("|")[2]
    assert CredentialBox([new_key]).open(token) == {"password": "pw"}
    with pytest.raises(ValueError, match="no longer configured"):
        CredentialBox([KEY]).open(token)


def test_the_command_line_adds_lists_runs_and_removes_a_source(tmp_path):
    import json
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("AGENTSEARCH_")}
    env.update(AGENTSEARCH_DATA_DIR=str(tmp_path / "data"), AGENTSEARCH_EGRESS_ALLOW='["127.0.0.1"]',
               PYTHONPATH=os.pathsep.join(sys.path))

    def cli(*args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "agentsearch", "sources", *args], env=env, capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return done.stdout

    with SiteServer(tmp_path / "site") as site:
        site.write("/docs/index.html", "<html><body><p>Hello from the silo.</p></body></html>")
        assert cli("add", "web", "--collection", "cli-site", "--url", site.url("/docs/index.html")).startswith(
            "added web source ")
        source_id = json.loads(cli("list", "--collection", "cli-site", "--json"))[0]["id"]
        ran = cli("run", source_id, "--collection", "cli-site", "--wait")
        assert "succeeded: 1 new, 0 changed, 0 unchanged, 0 removed, 0 failed" in ran
        assert "succeeded: 1 new" in cli("list", "--collection", "cli-site")
        assert cli("remove", source_id, "--collection", "cli-site").strip() == (
            f"removed source {source_id} and its 1 document(s)")


def test_a_team_collection_s_editor_manages_its_sources_and_a_viewer_only_reads_them(client):
    from agentsearch.pipeline.security.users import UserStore

    tag = uuid.uuid4().hex[:6]
    store = UserStore(client.app.state.services.db)
    keys = {}
    for role in ("editor", "viewer"):
        _, keys[role] = store.create(f"{role}-{tag}")
    team_id = client.post("/v1/teams", json={"name": f"team-{tag}"}).json()["id"]
    for role in ("editor", "viewer"):
        assert client.put(f"/v1/teams/{team_id}/members/{role}-{tag}", json={"role": role}).status_code == 200
    made = client.post("/v1/collections", json={"name": f"shared-{tag}", "team_id": team_id})
    assert made.status_code == 201, made.text
    url = f"/v1/collections/{made.json()['id']}/sources"
    as_editor = {"Authorization": f"Bearer {keys['editor']}"}
    as_viewer = {"Authorization": f"Bearer {keys['viewer']}"}

    added = client.post(url, headers=as_editor, json={"kind": "feed", "config": {"url": "https://example.org/f"}})
    assert added.status_code == 201, added.text
    source = f"{url}/{added.json()['id']}"
    assert client.get(url, headers=as_viewer).json()["items"][0]["id"] == added.json()["id"]
    assert client.get(f"{source}/runs", headers=as_viewer).status_code == 200
    for method, path, body in (("POST", url, {"kind": "feed", "config": {"url": "https://example.org/g"}}),
                               ("PATCH", source, {"enabled": False}), ("POST", f"{source}/runs", None),
                               ("DELETE", source, None)):
        refused = client.request(method, path, headers=as_viewer, json=body)
        assert refused.status_code == 403 and "editor" in refused.text, (method, path, refused.text)
    assert client.patch(source, headers=as_editor, json={"enabled": False}).json()["enabled"] is False
