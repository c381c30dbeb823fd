"""The morning briefing of ``examples/briefing/`` as a user sets it up, over feeds a real HTTP server of the test
serves: its feed sources read on their schedule, then its profile set run on its own, twice, by the embedded mode's
schedulers (the same ``agentsearch.run_due_sources`` and ``agentsearch.run_due_profile_sets`` Celery beat sends).

The first briefing holds the feeds' stories, as a PDF report and an e-mail draft; the feeds then gain a story each,
and the second briefing holds those two alone: what the first showed the user is skipped.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import time
import uuid
from datetime import timedelta

import pytest
from cryptography.fernet import Fernet
from fastapi.testclient import TestClient

from agentsearch.devstack import REPO
from tests.support.news_feed import Story, publish
from tests.support.source_servers import SiteServer

pytestmark = pytest.mark.integration

EXAMPLE = REPO / "examples" / "briefing"
ENERGY, MARKETS = "/energy/feed.atom", "/markets/feed.atom"
FIRST = {ENERGY: [Story("solar", "Solar farm opens by the river",
                        "The cooperative's new solar farm by the river delivers 12 MW of solar energy to 4,000 homes.",
                        day=1),
                  Story("tides", "Tidal turbines tested in the estuary",
                        "Two tidal turbines ran for a week in the estuary; the tidal energy project now seeks a "
                        "permit for twenty turbines.", day=2)],
         MARKETS: [Story("copper", "Copper prices climb on new contracts",
                         "Copper prices rose four percent as smelters signed supply contracts for next year.", day=2)]}
LATER = {ENERGY: Story("offshore", "Offshore wind farm wins funding",
                       "The offshore wind farm of 40 turbines won funding for its second phase of wind energy.", day=3),
         MARKETS: Story("bonds", "Green bonds draw record investment",
                        "Investment funds bought a record 2 billion euros of green bonds in the deals of the week.",
                        day=3)}


def _example():
    """The example's setup script, loaded from its file as a user runs it."""
    spec = importlib.util.spec_from_file_location("setup_briefing", EXAMPLE / "setup_briefing.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    """The embedded app with its schedulers ticking every second, the loopback server allowed and a sources key."""
    from agentsearch.pipeline.platform.settings import get_settings
    from agentsearch.pipeline.services import reset_services, use_services

    with pytest.MonkeyPatch.context() as mp:
        for name in list(os.environ):
            if name.upper().startswith("AGENTSEARCH_"):
                mp.delenv(name)
        mp.setenv("AGENTSEARCH_DATA_DIR", str(tmp_path_factory.mktemp("briefing")))
        mp.setenv("AGENTSEARCH_EGRESS_ALLOW", '["127.0.0.1"]')
        mp.setenv("AGENTSEARCH_SOURCES_KEY", Fernet.generate_key().decode())
        mp.setenv("AGENTSEARCH_PROFILE_SCHEDULE_INTERVAL_S", "1")
        mp.setenv("AGENTSEARCH_SOURCES_TICK_INTERVAL_S", "1")
        get_settings.cache_clear()
        previous = use_services(None)
        reset_services()
        from agentsearch.api.app import create_app

        created = create_app()
        try:
            yield created
        finally:
            created.state.services.close()
            use_services(previous)
            get_settings.cache_clear()


def _due(app, table, row_id: str) -> None:
    """The row's next run made due now, as the passing of its schedule would."""
    from agentsearch.pipeline.platform.db import utcnow

    with app.state.services.db.session() as s:
        s.get(table, uuid.UUID(row_id)).next_run_at = utcnow() - timedelta(seconds=1)


def _until(what, check, timeout_s: float = 200):
    """``check()`` once it is truthy; ``what`` (words, or a call giving them) says what never came."""
    deadline = time.monotonic() + timeout_s
    while not (found := check()):
        assert time.monotonic() < deadline, what() if callable(what) else what
        time.sleep(0.3)
    return found


def _read_sources(app, client, made: dict, runs_before: int) -> list[dict]:
    """Every source made due; its scheduled run awaited; then the collection's documents all indexed."""
    from agentsearch.pipeline.platform.tables.sources import SourceRow

    base = f"/v1/collections/{made['collection_id']}/sources"
    for source_id in made["sources"]:
        _due(app, SourceRow, source_id)
    runs = []
    for source_id in made["sources"]:
        def ended(source_id: str = source_id) -> dict | None:
            items = client.get(f"{base}/{source_id}/runs").json()["items"]
            done = len(items) > runs_before and items[0]["status"] not in ("queued", "running")
            return items[0] if done else None
        run = _until(f"the scheduled run of {source_id}", ended)
        assert run["trigger"] == "schedule" and run["status"] == "succeeded", run
        runs.append(run)
    _until("indexing", lambda: client.get(f"/v1/collections/{made['collection_id']}").json()["documents"]
           ["pending"] == 0)
    return runs


def _briefing(app, client, set_id: str, runs_before: int) -> tuple[dict, dict]:
    """The profile set made due; its scheduled run awaited: the run (its results) and its job."""
    from agentsearch.pipeline.platform.tables.agentic import ProfileSetRow

    _due(app, ProfileSetRow, set_id)

    def ended() -> dict | None:
        page = client.get(f"/v1/profile-sets/{set_id}/runs").json()
        done = page["total"] > runs_before and page["items"][0]["status"] in ("succeeded", "failed", "cancelled")
        return page["items"][0] if done else None
    run = _until(lambda: f"the scheduled briefing: {client.get(f'/v1/profile-sets/{set_id}/runs').json()}", ended)
    assert run["trigger"] == "schedule" and run["status"] == "succeeded", run
    return run, client.get(f"/v1/jobs/{run['job_id']}").json()


def _titles(run: dict) -> set[str]:
    return {i["title"] for name, items in run["results"].items() if name not in ("total", "by_category_count")
            for i in items}


def _artifacts(job: dict) -> dict[str, bytes]:
    return {a["filename"]: base64.b64decode(a["data"]) for a in job["response"]["agent_artifacts"]}


@pytest.mark.timeout(900)  # two briefings, each a job of two searches, a report and a draft, on a shared machine
def test_the_example_briefing_reads_its_feeds_on_schedule_and_a_second_briefing_holds_only_new_items(app, tmp_path):
    from agentsearch.pipeline.security.users import UserStore

    spec = json.loads((EXAMPLE / "briefing.json").read_text())
    with SiteServer(tmp_path / "site") as site, TestClient(app) as client:
        _, key = UserStore(app.state.services.db).create(f"briefing-{uuid.uuid4().hex[:8]}")
        client.headers["Authorization"] = f"Bearer {key}"
        for path, stories in FIRST.items():
            publish(site, stories, path)
        # The example as it is, but for its feeds' addresses: this test's server instead of the internet's.
        for source, path in zip(spec["sources"], (ENERGY, MARKETS), strict=True):
            source["config"]["url"] = site.url(path)
        made = _example().apply(client, spec)

        first_runs = _read_sources(app, client, made, 0)
        assert [r["documents"]["new"] for r in first_runs] == [2, 1]
        first, first_job = _briefing(app, client, made["profile_set_id"], 0)
        old = {s.title for stories in FIRST.values() for s in stories}
        assert _titles(first) == old, first["results"]
        files = _artifacts(first_job)
        assert files["report.pdf"].startswith(b"%PDF")
        draft = files["email_draft.html"].decode()
        assert "Morning briefing" in draft and all(title in draft for title in old), draft

        # The feeds gain a story each: their next scheduled runs read those alone.
        for path, stories in FIRST.items():
            publish(site, [*stories, LATER[path]], path)
        second_runs = _read_sources(app, client, made, 1)
        assert [r["documents"]["new"] for r in second_runs] == [1, 1]
        second, second_job = _briefing(app, client, made["profile_set_id"], 1)
        new = {s.title for s in LATER.values()}
        assert _titles(second) == new, second["results"]
        draft = _artifacts(second_job)["email_draft.html"].decode()
        assert all(title in draft for title in new) and not any(title in draft for title in old), draft
        skipped = [s for loop in second_job["response"]["metadata"]["agentic"]["loops"].values()
                   for h in loop["history"] for s in h["skipped_earlier"]]
        assert skipped, "the first briefing's items were not met again and skipped"
