"""A notion source's runs on PostgreSQL against recorded answers of Notion's API served by a real HTTP server
(``tests/support/saas_server.py``, ``tests/fixtures/saas/notion.json``): ``notion-client`` makes its real requests to
it through ``base_url``. No Notion workspace is reachable here; the recording is all it was tested against."""

from __future__ import annotations

import pytest

from tests.integration.test_sources_mail import TeamRunner
from tests.integration.test_sources_runs import database, settings  # noqa: F401  (database: a fixture)
from tests.support.saas_server import SaasServer

pytestmark = pytest.mark.integration


def _groups(runner: TeamRunner, ids: dict[str, str]) -> dict[str, list[str]]:
    names = {value.replace("-", ""): name for name, value in ids.items()}
    return {names[url.rsplit("-", 1)[1]]: groups for url, groups in runner.group_names().items()}


def _read(server: SaasServer, ids: dict[str, str]) -> list[str]:
    names = {value: name for name, value in ids.items()}
    return sorted({names.get(r.path.split("/")[3], r.path) for r in server.requests if r.path.endswith("/children")})


def test_pages_are_read_by_edit_time_and_their_place_gives_the_documents_groups(database):  # noqa: F811
    with SaasServer("notion.json") as server:
        ids = server.recording["ids"]
        runner = TeamRunner(database, settings())
        runner.add("notion", {"url": server.url, "token": "ntn_test", "databases": [ids["database"]],
                              "groups": {f"page:{ids['hr']}": "hr", f"database:{ids['database']}": "staff"}})

        first = runner.run()
        assert first["status"] == "succeeded", first
        assert first["documents"] == {"new": 6, "changed": 0, "unchanged": 0, "removed": 0, "failed": 1}, first
        # A page under a page not shared with the integration: where it sits is unknown, so it is not indexed.
        assert "(Salary bands): its permissions could not be read (the page above it" in first["errors"][0]
        assert "object_not_found" in first["errors"][0]
        assert _groups(runner, ids) == {"company": [], "hr": ["hr"], "policy": ["hr"], "guide": [], "row": ["staff"],
                                        "plan": ["staff"]}
        texts = {name: runner.documents()[url].text for url, name in
                 ((u, n) for u in runner.documents() for n, i in ids.items() if u.endswith(i.replace("-", "")))}
        assert "Carry-over ends in March" in texts["policy"]  # the blocks' second page
        assert "Collect the silo key at six" in texts["guide"]  # a block nested in a toggle
        # A database row the search did not find yet, from the database's own query (its second page): its
        # properties under its title, and in its metadata for search filters.
        assert texts["plan"] == ("# Harvest plan\n\n- **Budget**: 12500\n- **Due date**: 2027-06-01 → 2027-06-14\n"
                                 "- **Notes**: Hire two extra pickers.\n- **Owner**: Ben Osei, u-4\n"
                                 "- **Reviewed**: false\n- **Status**: In progress\n- **Tags**: harvest, silo\n")
        plan = next(d for u, d in runner.documents().items() if u.endswith(ids["plan"].replace("-", "")))
        assert {k: v for k, v in plan.metadata_.items() if not k.startswith(("source_", "_"))} == {
            "budget": 12500, "due_date": "2027-06-01", "notes": "Hire two extra pickers.",
            "owner": ["Ben Osei", "u-4"], "reviewed": False, "status": "In progress", "tags": ["harvest", "silo"],
            "format": "text"}
        assert "- **Owner**: Ana Lima\n- **Status**: Draft\n\nGrow membership" in texts["row"]
        queried = [r.query.get("start_cursor") for r in server.requests if r.path.endswith("/query")]
        assert queried == [None, "cm93OjE="]
        # The search's second page was answered 429 with Retry-After: 1, and asked again after it.
        searched = [r for r in server.requests if r.path == "/v1/search" and r.query.get("start_cursor")]
        assert [r.status for r in searched] == [429, 200] and searched[1].at - searched[0].at >= 1.0

        # Nothing edited: the search only (and the parents not listed), no page's blocks; nothing stored or sent.
        server.requests.clear()
        second = runner.run()
        assert second["documents"] == {"new": 0, "changed": 0, "unchanged": 6, "removed": 0, "failed": 1}, second
        assert runner.tasks == [] and _read(server, ids) == []

        # The guide moved under HR (its groups change, its blocks not read), the home page edited, the OKRs row
        # trashed, a page added, the plan's status moved to Done (its edit time with it).
        server.phase, server.requests[:] = 2, []
        third = runner.run()
        assert third["status"] == "succeeded", third
        assert third["documents"] == {"new": 1, "changed": 3, "unchanged": 2, "removed": 1, "failed": 1}, third
        assert _groups(runner, ids) == {"company": [], "hr": ["hr"], "policy": ["hr"], "guide": ["hr"], "new": [],
                                        "plan": ["staff"]}
        assert _read(server, ids) == ["company", "new", "plan"]
        plan = next(d for u, d in runner.documents().items() if u.endswith(ids["plan"].replace("-", "")))
        assert "- **Status**: Done" in plan.text and plan.metadata_["status"] == "Done"
        (removal,) = runner.sent("delete_documents")
        assert len(removal[1][1]) == 1

        # The integration's token revoked: Notion's reason, nothing removed.
        server.phase = 3
        refused = runner.run()
        assert refused["status"] == "failed" and "HTTP 401 unauthorized" in refused["errors"][0], refused
        assert refused["documents"]["removed"] == 0 and len(runner.documents()) == 6
