"""A google_drive source's runs on PostgreSQL against recorded answers of the Drive API v3 served by a real HTTP
server (``tests/support/saas_server.py``, ``tests/fixtures/saas/google_drive.json``): ``google-api-python-client``
makes its real requests to it through ``api_endpoint``, after ``google-auth`` signed a service account's assertion
(a key made here) and exchanged it at the server's token endpoint. No Google account is reachable here; the
recording is all it was tested against."""

from __future__ import annotations

import json

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.integration.test_sources_mail import TeamRunner
from tests.integration.test_sources_runs import database, settings  # noqa: F401  (database: a fixture)
from tests.support.saas_server import SaasServer

pytestmark = pytest.mark.integration


def _key(token_uri: str) -> str:
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()
    return json.dumps({"type": "service_account", "project_id": "coop", "private_key_id": "k1", "private_key": private,
                       "client_email": "reader@coop.iam.gserviceaccount.com", "client_id": "1", "token_uri": token_uri})


def _groups(runner: TeamRunner) -> dict[str, list[str]]:
    return {url.split("/d/", 1)[1].split("/", 1)[0]: names for url, names in runner.group_names().items()}


def _read(server: SaasServer) -> list[str]:
    return sorted(r.path.split("/")[4] for r in server.requests
                  if r.query.get("alt") == "media" or r.path.endswith("/export"))


def test_a_drive_is_listed_once_then_read_through_its_change_feed_with_its_sharing_as_groups(database):  # noqa: F811
    with SaasServer("google_drive.json") as server:
        runner = TeamRunner(database, settings())
        runner.add("google_drive", {"url": f"{server.url}/drive/v3/", "service_account": _key(f"{server.url}/token"),
                                    "subject": "desk@example.org",
                                    "groups": {"domain:example.org": "staff", "group:hr@example.org": "hr"}})

        first = runner.run()
        assert first["status"] == "succeeded", first
        assert first["documents"] == {"new": 3, "changed": 0, "unchanged": 0, "removed": 0, "failed": 2}, first
        assert sorted(first["errors"]) == [
            "google drive file faq.txt: its permissions could not be read (its sharing: HTTP 403 The user does not "
            "have sufficient permissions for this file.): not indexed",
            "google drive file notes.txt: restricted in the source to user:ana@example.org, user:bob@example.net, "
            "which no group mapping names: not indexed"]
        assert _groups(runner) == {"1hBk": ["staff"], "1PaY": ["hr"], "1MiN": ["staff"]}
        texts = {k: runner.documents()[u].text for u in runner.documents() for k in ("1hBk", "1PaY") if k in u}
        assert "opens at six" in texts["1hBk"] and "Salaries rise in May" in texts["1PaY"]  # a Google Doc, exported
        assert _read(server) == ["1MiN", "1PaY", "1hBk"]
        # The token came from the service account's assertion, and was sent with every call.
        assert server.asked("POST", "/token") == 1
        assert all(r.authorization == "Bearer ya29.recorded-token" for r in server.requests if r.path != "/token")
        # The listing's second page was answered 429 with Retry-After: 1, and asked again after it.
        paged = [r for r in server.requests if r.query.get("pageToken") == "pg2"]
        assert [r.status for r in paged] == [429, 200] and paged[1].at - paged[0].at >= 1.0

        # Nothing changed: one call to the change feed (and the withheld files asked again), nothing read or sent.
        server.requests.clear()
        second = runner.run()
        assert second["documents"] == {"new": 0, "changed": 0, "unchanged": 3, "removed": 0, "failed": 2}, second
        assert runner.tasks == [] and _read(server) == []
        assert server.asked("GET", "/drive/v3/files") == 0 and server.asked("GET", "/drive/v3/changes") == 1

        # The feed, in two pages: the handbook edited, the minutes shared with hr@ instead of the domain (its groups
        # change, its bytes not read again), Pay scales deleted, a roadmap added.
        server.phase, server.requests[:] = 2, []
        third = runner.run()
        assert third["status"] == "succeeded", third
        assert third["documents"] == {"new": 1, "changed": 2, "unchanged": 0, "removed": 1, "failed": 2}, third
        assert _groups(runner) == {"1hBk": ["staff"], "1MiN": ["hr"], "1RoD": ["staff"]}
        assert _read(server) == ["1RoD", "1hBk"]
        (removal,) = runner.sent("delete_documents")
        assert len(removal[1][1]) == 1

        # The admin maps the domain to another group: every document follows at the next run, nothing read.
        server.requests.clear()
        runner.reconfigure(groups={"domain:example.org": "members", "group:hr@example.org": "hr"})
        remapped = runner.run()
        assert remapped["documents"] == {"new": 0, "changed": 2, "unchanged": 1, "removed": 0, "failed": 2}
        assert _groups(runner) == {"1hBk": ["members"], "1MiN": ["hr"], "1RoD": ["members"]} and _read(server) == []

        # The credentials refused: Google's reason, nothing removed.
        server.phase = 3
        refused = runner.run()
        assert refused["status"] == "failed", refused
        assert "HTTP 401 Request had invalid authentication credentials." in refused["errors"][0], refused
        assert refused["documents"]["removed"] == 0 and len(runner.documents()) == 3
