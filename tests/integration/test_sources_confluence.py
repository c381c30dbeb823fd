"""A confluence source's runs on PostgreSQL against recorded answers of Confluence's REST API served by a real HTTP
server (``tests/support/saas_server.py``, ``tests/fixtures/saas/confluence.json``): ``atlassian-python-api`` makes
its real requests to it. No Confluence site is reachable here; the recording is all it was tested against."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from agentsearch.pipeline.platform.tables.collections import DocumentFileRow
from tests.integration.test_sources_mail import TeamRunner
from tests.integration.test_sources_runs import database, settings  # noqa: F401  (database: a fixture)
from tests.support.saas_server import SaasServer

pytestmark = pytest.mark.integration

PAGE = "/rest/api/content"


def _groups(runner: TeamRunner, base: str) -> dict[str, list[str]]:
    return {url.removeprefix(base).rsplit("/", 1)[1]: names for url, names in runner.group_names().items()}


def _stored(runner: TeamRunner, url: str) -> bytes:
    """The page's HTML as stored for the parsing queue."""
    document = runner.documents()[url]
    with runner.db.session() as s:
        return s.scalars(select(DocumentFileRow).where(DocumentFileRow.document_id == document.id)).one().data


def _comments_asked(server: SaasServer) -> list[str]:
    return [r.path.split("/")[4] for r in server.requests if r.path.endswith("/child/comment")]


def _bodies_read(server: SaasServer) -> list[str]:
    return sorted(r.path.rsplit("/", 1)[1] for r in server.requests
                  if r.path.startswith(f"{PAGE}/") and r.path.count("/") == 4)


def test_spaces_are_read_by_page_version_and_their_restrictions_give_the_documents_groups(database):  # noqa: F811
    with SaasServer("confluence.json") as server:
        runner = TeamRunner(database, settings())
        runner.add("confluence", {"url": server.url, "username": "me@example.org", "token": "api-token",
                                  "spaces": ["ENG", "HR"],
                                  "groups": {"space:HR": "hr", "group:finance": "finance", "group:hr-managers": "hr"}})

        first = runner.run()
        assert first["status"] == "succeeded", first
        assert first["documents"] == {"new": 6, "changed": 0, "unchanged": 0, "removed": 0, "failed": 3}, first
        # A page restricted to a user no mapping names, and one whose restrictions the server refused: not indexed.
        assert any("104 (Secret plan): restricted in the source to user:5b10" in e for e in first["errors"])
        assert any("105 (Payroll): its permissions could not be read (its read restrictions: HTTP 403" in e
                   for e in first["errors"])
        # An attachment over the size limit: never downloaded.
        assert "attachment floorplan.pdf: 5242880 bytes, over the limit of 200000" in " ".join(first["errors"])
        assert _groups(runner, server.url) == {"101": [], "102": [], "103": ["finance"], "201": ["hr"],
                                               "401": ["hr"], "badge-form.md": []}
        onboarding = _stored(runner, f"{server.url}/spaces/ENG/pages/101")
        assert b"<title>Onboarding</title></head><body><p>New staff get a badge on day one." in onboarding
        # Its comment folded into its document, with its author.
        assert b"<h2>Comments</h2><div class=\"comment\"><p><b>Ana Lima</b> (2026-11-21):</p><p>Badges are at the " \
               b"front desk.</p></div></body>" in onboarding
        # A blog post beside the pages, in its space's group; the attachment a document of its own, parsed.
        assert b"closed on Friday for the harvest" in _stored(runner, f"{server.url}/spaces/HR/blog/2026/11/20/401")
        form = runner.documents()[f"{server.url}/download/attachments/101/badge-form.md"]
        assert "Name, team, start date, and a photo." in form.text
        assert _bodies_read(server) == ["101", "102", "103", "201", "401"]
        # Comments asked for only where the listing shows some (the blog post's twice: the listing's expansion was cut,
        # so their versions, then their bodies); the attachment's bytes once.
        assert _comments_asked(server) == ["101", "401", "401"]
        assert b"<b>Ben Osei</b> (2026-11-20):</p><p>The shop opens at ten.</p></div></body>" in _stored(
            runner, f"{server.url}/spaces/HR/blog/2026/11/20/401")
        assert [r.path for r in server.requests if r.path.startswith("/download/")] == [
            "/download/attachments/101/badge-form.md"]
        # The listing's second page was answered 429 with Retry-After: 1; the same page was asked again after it.
        limited = [r for r in server.requests if r.query.get("start") == "3"]
        assert [r.status for r in limited] == [429, 200] and limited[1].at - limited[0].at >= 1.0

        # Nothing changed: the listing only (three requests, no page's body), nothing stored or sent.
        server.requests.clear()
        second = runner.run()
        assert second["documents"] == {"new": 0, "changed": 0, "unchanged": 6, "removed": 0, "failed": 3}, second
        assert runner.tasks == [] and _bodies_read(server) == [] and _comments_asked(server) == ["401"]
        # The listings only: ENG's pages (two pages of answers) and blog posts, HR's pages and blog posts; and the
        # versions of the blog post's comments the listing did not hold.
        assert [r.path for r in server.requests if r.status == 200] == [PAGE] * 5 + [f"{PAGE}/401/child/comment"]

        # An edit, a page trashed, a restriction moved from finance to hr-managers, a page added under the
        # restricted one (inheriting its restriction), the refused restrictions readable again; a comment on 201
        # (its own version unchanged), a new version of 101's attachment.
        server.phase, server.requests[:] = 2, []
        third = runner.run()
        assert third["status"] == "succeeded", third
        assert third["documents"] == {"new": 2, "changed": 4, "unchanged": 1, "removed": 1, "failed": 2}, third
        assert _groups(runner, server.url) == {"101": [], "103": ["hr"], "105": [], "106": ["hr"], "201": ["hr"],
                                               "401": ["hr"], "badge-form.md": []}
        # The permission change reached 103 without its body being read again; 201 read again for its comment.
        assert _bodies_read(server) == ["101", "105", "106", "201"]
        assert b"<b>Ben Osei</b> (2026-11-23):</p><p>Does carry-over count half days?" in _stored(
            runner, f"{server.url}/spaces/HR/pages/201")
        form = runner.documents()[f"{server.url}/download/attachments/101/badge-form.md"]
        assert "and the parking plate" in form.text
        assert b"a badge and a laptop" in _stored(runner, f"{server.url}/spaces/ENG/pages/101")
        (removal,) = runner.sent("delete_documents")
        assert len(removal[1][1]) == 1

        # The credentials refused: the run fails with the server's reason, nothing removed.
        server.phase = 3
        refused = runner.run()
        assert refused["status"] == "failed", refused
        assert "HTTP 401 Client must be authenticated" in refused["errors"][0], refused
        assert refused["documents"]["removed"] == 0 and len(runner.documents()) == 7
