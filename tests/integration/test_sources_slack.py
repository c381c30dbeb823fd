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
    return {url.split("/archives/", 1)[1]: names for url, names in runner.group_names().items()}


def test_channels_are_read_by_day_from_their_history_and_private_ones_by_their_members(database):  # noqa: F811
    with SaasServer("slack.json") as server:
        runner = TeamRunner(database, settings())
        runner.add("slack", {"url": f"{server.url}/api/", "token": "xoxb-test", "since_days": 3650,
                             "groups": {"#hr": "hr", "user:U0CARLA": "finance"}})

        first = runner.run()
        assert first["status"] == "succeeded", first
        assert first["documents"] == {"new": 4, "changed": 0, "unchanged": 0, "removed": 0, "failed": 1}, first
        # A private channel whose members the token may not read: not indexed, with Slack's reason.
        assert first["errors"] == ["slack #secret: its permissions could not be read (its members: missing_scope "
                                   "(needed: groups:read)): not indexed"]
        assert _groups(runner) == {"C0GENERAL1?day=2026-11-27": [], "C0GENERAL1?day=2026-11-28": [],
                                   "G0HR00001?day=2026-11-27": ["hr"], "C0RANDOM1?day=2026-11-28": []}
        general = runner.documents()[f"{server.url}/archives/C0GENERAL1?day=2026-11-27"]
        assert "Harvest starts on the first of June" in general.text and "Welcome" in general.text
        # The channel list's second page was answered 429 with Retry-After: 1, and asked again after it; the history
        # of #general came in two pages; the channel the account is not in was not read.
        listed = [r for r in server.requests if r.path == "/api/conversations.list" and r.query.get("cursor")]
        assert [r.status for r in listed] == [429, 200] and listed[1].at - listed[0].at >= 1.0
        assert {r.query.get("cursor") for r in server.requests if r.query.get("channel") == "C0GENERAL1"} == {
            None, "bmV4dF90czoxNzk1NzcwMzAw"}
        assert not [r for r in server.requests if r.query.get("channel") == "C0NOTMINE"]

        # Nothing new: each channel's history after its newest message is empty; nothing stored or sent.
        server.requests.clear()
        second = runner.run()
        assert second["documents"] == {"new": 0, "changed": 0, "unchanged": 4, "removed": 0, "failed": 1}, second
        assert runner.tasks == []
        histories = [r for r in server.requests if r.path == "/api/conversations.history"]
        assert sorted(r.query["oldest"] for r in histories) == [  # each after the channel's newest message stored
            "1795770000.000300", "1795860000.000100", "1795860000.000500"]

        # #random archived, Carla added to #hr (its document takes her group, its text not read again), a new
        # message in #general (its day read again whole).
        server.phase, server.requests[:] = 2, []
        third = runner.run()
        assert third["status"] == "succeeded", third
        assert third["documents"] == {"new": 0, "changed": 2, "unchanged": 1, "removed": 1, "failed": 1}, third
        assert _groups(runner) == {"C0GENERAL1?day=2026-11-27": [], "C0GENERAL1?day=2026-11-28": [],
                                   "G0HR00001?day=2026-11-27": ["finance", "hr"]}
        day = runner.documents()[f"{server.url}/archives/C0GENERAL1?day=2026-11-28"].text
        assert "opens at six" in day and "now opens at seven" in day
        assert [r.query.get("oldest") for r in server.requests if r.query.get("channel") == "G0HR00001"
                and r.path.endswith("history")] == ["1795770000.000300"]
        (removal,) = runner.sent("delete_documents")
        assert len(removal[1][1]) == 1

        # A token revoked: Slack's reason, nothing removed.
        server.phase = 3
        refused = runner.run()
        assert refused["status"] == "failed" and refused["errors"][0] == "slack conversations.list: invalid_auth"
        assert refused["documents"]["removed"] == 0 and len(runner.documents()) == 3
