"""A sharepoint source's runs on PostgreSQL against recorded answers of Microsoft Graph (and of the identity
platform's token endpoint) served by a real HTTP server (``tests/support/saas_server.py``,
``tests/fixtures/saas/sharepoint.json``): the kind's REST calls go to it through its ``url`` and ``login_url``. No
Microsoft 365 tenant is reachable here; the recording is all it was tested against."""

from __future__ import annotations

import pytest

from tests.integration.test_sources_mail import TeamRunner
from tests.integration.test_sources_runs import database, settings  # noqa: F401  (database: a fixture)
from tests.support.saas_server import SaasServer

pytestmark = pytest.mark.integration


def _groups(runner: TeamRunner) -> dict[str, list[str]]:
    return {url.rsplit("/", 1)[1]: names for url, names in runner.group_names().items()}


def _downloads(server: SaasServer) -> list[str]:
    return sorted(r.path.rsplit("/", 1)[1] for r in server.requests if r.path.startswith("/download/"))


def test_a_library_is_enumerated_then_read_through_its_delta_link_with_its_permissions_as_groups(database):  # noqa: F811
    with SaasServer("sharepoint.json") as server:
        runner = TeamRunner(database, settings())
        runner.add("sharepoint", {"tenant_id": "tenant-1", "client_id": "app-1", "client_secret": "app-secret",
                                  "drive_id": server.recording["drive_id"], "url": f"{server.url}/v1.0",
                                  "login_url": server.url,
                                  "groups": {"link:organization": "staff", "sitegroup:HR Members": "hr"}})

        first = runner.run()
        assert first["status"] == "succeeded", first
        assert first["documents"] == {"new": 3, "changed": 0, "unchanged": 0, "removed": 0, "failed": 2}, first
        assert sorted(first["errors"]) == [
            "sharepoint file notes.txt: restricted in the source to user:bob@example.net, which no group mapping "
            "names: not indexed",
            "sharepoint file secret.md: its permissions could not be read (HTTP 403 accessDenied: Access denied): "
            "not indexed"]
        assert _groups(runner) == {"handbook.md": ["staff"], "policy.md": ["hr"], "faq.md": ["staff"]}
        assert "opens at six" in runner.documents()["https://coop.sharepoint.com/sites/team/Shared%20Documents/"
                                                    "handbook.md"].text
        # Each file's bytes came from the download URL its /content answer redirected to.
        assert _downloads(server) == ["01FAQ", "01HBK", "01POL"]
        assert all(r.authorization == "" for r in server.requests if r.path.startswith("/download/"))
        # The delta's second page was answered 429 with Retry-After: 1, and asked again after it.
        paged = [r for r in server.requests if r.query.get("token") == "page2"]
        assert [r.status for r in paged] == [429, 200] and paged[1].at - paged[0].at >= 1.0

        # Nothing changed: the delta link answers no item; nothing downloaded, stored or sent.
        server.requests.clear()
        second = runner.run()
        assert second["documents"] == {"new": 0, "changed": 0, "unchanged": 3, "removed": 0, "failed": 2}, second
        assert runner.tasks == [] and _downloads(server) == []
        assert [r.query.get("token") for r in server.requests if r.path.endswith("/root/delta")] == ["d1"]

        # The handbook edited, the policy shared with the whole organisation too (its groups change, its bytes not
        # read again), the FAQ deleted, a roadmap added.
        server.phase, server.requests[:] = 2, []
        third = runner.run()
        assert third["status"] == "succeeded", third
        assert third["documents"] == {"new": 1, "changed": 2, "unchanged": 0, "removed": 1, "failed": 2}, third
        assert _groups(runner) == {"handbook.md": ["staff"], "policy.md": ["hr", "staff"], "roadmap.md": ["staff"]}
        assert _downloads(server) == ["01HBK", "01ROD"]
        (removal,) = runner.sent("delete_documents")
        assert len(removal[1][1]) == 1

        # The client secret refused at sign-in: the identity platform's reason, nothing removed.
        server.phase = 3
        refused = runner.run()
        assert refused["status"] == "failed", refused
        assert "HTTP 401 invalid_client: AADSTS7000215: Invalid client secret provided." in refused["errors"][0]
        assert refused["documents"]["removed"] == 0 and len(runner.documents()) == 3

        # The delta link expired (410 resyncRequired): the drive is enumerated again, and the roadmap it no longer
        # names is gone; the others are unchanged, nothing downloaded.
        server.phase, server.requests[:] = 4, []
        resynced = runner.run()
        assert resynced["status"] == "succeeded", resynced
        assert resynced["documents"] == {"new": 0, "changed": 0, "unchanged": 2, "removed": 1, "failed": 2}
        assert _groups(runner) == {"handbook.md": ["staff"], "policy.md": ["hr", "staff"]} and _downloads(server) == []
