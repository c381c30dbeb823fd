"""A slack source's runs on PostgreSQL against recorded answers of Slack's Web API served by a real HTTP server
(``tests/support/saas_server.py``, ``tests/fixtures/saas/slack.json``): ``slack-sdk``'s ``WebClient`` makes its real
requests to it through ``base_url``. No Slack workspace is reachable here; the recording is all it was tested
against."""

from __future__ import annotations

import pytest

from tests.integration.test_sources_mail import TeamRunner
from tests.integration.test_sources_runs import database, settings  # noqa: F401  (database: a fixture)
from tests.support.saas_server import SaasServer

pytestmark = pytest.mark.integration


def _groups(runner: TeamRunner) -> dict[str, list[str]]:
    return {url.split("/archives/", 1)[1]: names for url, names in runner.group_names().items()
            if "/archives/" in url}


def _asked(server, path: str) -> list[str]:
    return [r.path if path.startswith("/files") else r.query.get("ts", "")
            for r in server.requests if r.path.startswith(path)]


def test_channels_are_read_by_day_with_their_threads_and_files_and_private_ones_by_their_members(
        database):  # noqa: F811
    with SaasServer("slack.json") as server:
        runner = TeamRunner(database, settings())
        runner.add("slack", {"url": f"{server.url}/api/", "token": "xoxb-test", "since_days": 3650,
                             "thread_days": 3650, "groups": {"#hr": "hr", "user:U0CARLA": "finance"}})

        first = runner.run()
        assert first["status"] == "succeeded", first
        assert first["documents"] == {"new": 5, "changed": 0, "unchanged": 0, "removed": 0, "failed": 2}, first
        # A private channel whose members the token may not read: not indexed, with Slack's reason; a file over the
        # size limit: never downloaded.
        assert sorted(first["errors"]) == ["slack #general 2026-11-28: file manual.pdf: 900000000 bytes, over the "
                                           "limit of 200000",
                                           "slack #secret: its permissions could not be read (its members: "
                                           "missing_scope (needed: groups:read)): not indexed"], first
        assert _groups(runner) == {"C0GENERAL1?day=2026-11-27": [], "C0GENERAL1?day=2026-11-28": [],
                                   "G0HR00001?day=2026-11-27": ["hr"], "C0RANDOM1?day=2026-11-28": []}
        assert runner.group_names()[f"{server.url}/files/U0ANA/F0ROTA01/rota.md"] == []  # as its channel's
        documents = runner.documents()
        general = documents[f"{server.url}/archives/C0GENERAL1?day=2026-11-27"].text
        assert "Harvest starts on the first of June" in general and "Welcome" in general
        # The thread's reply under its parent.
        assert general.index("Harvest starts") < general.index("  > **U0ANA** (2026-11-27 ") < general.index(
            "Bring your own gloves")
        # The shared file: a document of its own, read by the parsers, found where Slack shows it; the deleted one
        # (a tombstone) left out.
        rota = documents[f"{server.url}/files/U0ANA/F0ROTA01/rota.md"]
        assert rota.text.startswith("# Rota") and "Ben locks the barn on Fridays." in rota.text
        assert _asked(server, "/files-pri/") == ["/files-pri/T0001-F0ROTA01/download/rota.md"]
        # Downloaded with the token; the redirect to another host followed without it.
        (download,) = [r for r in server.requests if r.path.startswith("/files-pri/")]
        (elsewhere,) = [r for r in server.requests if r.path.startswith("/files-cdn/")]
        assert download.authorization == "Bearer xoxb-test" and elsewhere.authorization == ""
        # The channel list's second page was answered 429 with Retry-After: 1, and asked again after it; the history
        # of #general came in two pages; the channel the account is not in was not read.
        listed = [r for r in server.requests if r.path == "/api/conversations.list" and r.query.get("cursor")]
        assert [r.status for r in listed] == [429, 200] and listed[1].at - listed[0].at >= 1.0
        assert {r.query.get("cursor") for r in server.requests if r.query.get("channel") == "C0GENERAL1"
                and r.path.endswith("history")} == {None, "bmV4dF90czoxNzk1NzcwMzAw"}
        assert not [r for r in server.requests if r.query.get("channel") == "C0NOTMINE"]

        # Nothing new: each channel's recent history listed, no thread and no file read; nothing stored or sent (the
        # file over the limit is told again when its day is read again).
        server.requests.clear()
        second = runner.run()
        assert second["documents"] == {"new": 0, "changed": 0, "unchanged": 5, "removed": 0, "failed": 1}, second
        assert runner.tasks == []
        assert _asked(server, "/api/conversations.replies") == [] and _asked(server, "/files-pri/") == []
        # Each history listed from a midnight (UTC), so the days it holds are whole.
        assert {float(r.query["oldest"]) % 86_400 for r in server.requests if r.path.endswith("history")} == {0.0}

        # #random archived, Carla added to #hr (its document takes her group, its text not read again), a new
        # message in #general, and a reply to the thread of the day before (seen by its parent's latest_reply).
        server.phase, server.requests[:] = 2, []
        third = runner.run()
        assert third["status"] == "succeeded", third
        assert third["documents"] == {"new": 0, "changed": 3, "unchanged": 1, "removed": 1, "failed": 2}, third
        assert _groups(runner) == {"C0GENERAL1?day=2026-11-27": [], "C0GENERAL1?day=2026-11-28": [],
                                   "G0HR00001?day=2026-11-27": ["finance", "hr"]}
        documents = runner.documents()
        day = documents[f"{server.url}/archives/C0GENERAL1?day=2026-11-28"].text
        assert "opens at six" in day and "now opens at seven" in day
        thread = documents[f"{server.url}/archives/C0GENERAL1?day=2026-11-27"].text
        assert thread.index("Bring your own gloves") < thread.index("  > **U0CARLA** (2026-11-28 ") < thread.index(
            "Gloves are in the shed by the gate.")
        # The thread asked for again (its replies in two pages); the unchanged file not downloaded again.
        assert _asked(server, "/api/conversations.replies") == ["1795770300.000200"] * 2
        assert _asked(server, "/files-pri/") == []
        (removal,) = runner.sent("delete_documents")
        assert len(removal[1][1]) == 1

        # A token revoked: Slack's reason, nothing removed.
        server.phase = 3
        refused = runner.run()
        assert refused["status"] == "failed" and refused["errors"][0] == "slack conversations.list: invalid_auth"
        assert refused["documents"]["removed"] == 0 and len(runner.documents()) == 4
