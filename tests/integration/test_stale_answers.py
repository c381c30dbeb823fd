"""Answers that say when they go stale, on the suite's stack: a document changed by ``agentsearch sync`` marks the
answers citing it (the job and its cached copy) stale within a minute, the whole-job cache never serves them again,
and a document the sync deletes marks its answers ``deleted``; a document sent again as JSON marks its answers too,
and the console (a real headless Chromium) shows the banner whose "Ask again" asks anew."""

from __future__ import annotations

import subprocess
import time
import uuid

from sqlalchemy import delete, select

from agentsearch.devstack import BIN
from agentsearch.pipeline.platform.db import Database
from agentsearch.pipeline.platform.tables.webhooks import WebhookDeliveryRow, WebhookRow
from agentsearch.pipeline.webhooks.secret import new_secret
from agentsearch.pipeline.webhooks.stale import announce_stale
from tests.integration.conftest import own_collection, wait_indexed, wait_job
from tests.integration.test_console import _sign_in, own_console

QUESTION = "How many days of annual leave do staff take?"
STALE_WITHIN_S = 60


def _ask(http, collection_id: str) -> dict:
    """The question's job once ended: a new one (202), or one answered from the cache (200)."""
    response = http.post("/v1/search", json={"collection_id": collection_id, "query": QUESTION, "agents": []})
    assert response.status_code in (200, 202), response.text
    return wait_job(http, response.json()["job_id"])


def _stale_after(http, job_id: str, started: float) -> dict:
    """The job's stale marks once it has some, waited for up to a minute from ``started``."""
    while True:
        job = http.get(f"/v1/jobs/{job_id}").json()
        if job.get("stale"):
            return job
        assert time.monotonic() - started < STALE_WITHIN_S, f"job {job_id} not marked stale within a minute"
        time.sleep(0.5)


def _job_stale_is_written_once(stack, http, job_ids: list[str]) -> None:
    """The sweep's step that writes ``job.stale`` (``announce_stale``), run on the stack's PostgreSQL: one delivery
    per stale job (the job and its cached copy) for a webhook of the user's that asked for it, naming the document,
    and none the second time. The rows are removed after: this stack's workers send no webhooks."""
    database = Database(stack.database_url)
    user_id = uuid.UUID(http.get("/v1/me").json()["user"]["id"])
    try:
        with database.session() as s:
            hook = WebhookRow(user_id=user_id, url="https://hooks.example.org/stale", events=["job.stale"],
                              secret=new_secret())
            s.add(hook)
            s.flush()
            hook_id = hook.id
        announced = 0
        while done := announce_stale(database):  # the suite's other stale jobs too, a batch at a time
            announced += done
        assert announced >= 1  # the job; its cached copy is announced with it
        with database.session() as s:
            sent = s.scalars(select(WebhookDeliveryRow).where(WebhookDeliveryRow.webhook_id == hook_id)).all()
            # The user's other stale jobs in this stack (other tests') are announced too: these two, once each.
            ours = [d for d in sent if str(d.job_id) in job_ids]
            assert sorted(str(d.job_id) for d in ours) == sorted(job_ids)
            assert {d.event for d in sent} == {"job.stale"}
            assert all(d.payload["data"]["stale"] == {"hr/leave": "changed"} for d in ours)
    finally:
        with database.session() as s:
            s.execute(delete(WebhookDeliveryRow).where(WebhookDeliveryRow.webhook_id.in_(
                select(WebhookRow.id).where(WebhookRow.url == "https://hooks.example.org/stale"))))
            s.execute(delete(WebhookRow).where(WebhookRow.url == "https://hooks.example.org/stale"))
        database.dispose()


def test_a_document_changed_by_folder_sync_marks_its_answers_stale_and_the_cache_never_serves_them(stack, tmp_path):
    folder = tmp_path / "handbook"
    (folder / "hr").mkdir(parents=True)
    (folder / "hr" / "leave.md").write_text("# Leave\n\nStaff take twenty-eight days of annual leave.\n")
    (folder / "canteen.txt").write_text("The canteen serves lunch from noon.\n")
    env = {**stack.env, "AGENTSEARCH_API_KEY": stack.api_key}

    def sync() -> str:
        done = subprocess.run([str(BIN / "agentsearch"), "sync", str(folder), "--collection", "stale-handbook"],
                              env=env, capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert "2 added" in sync()
    with stack.http() as http:
        (collection,) = http.get("/v1/collections", params={"name": "stale-handbook"}).json()
        first = _ask(http, collection["id"])
        assert first["status"] == "succeeded" and first["stale"] is None
        cited = {s["document_id"] for s in first["response"]["sources"]}
        assert "hr/leave" in cited
        versions = first["response"]["document_versions"]
        assert set(versions) == cited and all(len(v) == 10 for v in versions.values())
        copy = _ask(http, collection["id"])
        assert copy["cached"] and copy["response"]["cached_from"] == first["job_id"]

        (folder / "hr" / "leave.md").write_text("# Leave\n\nStaff take thirty days of annual leave.\n")
        assert "1 changed" in sync()
        started = time.monotonic()
        stale = _stale_after(http, first["job_id"], started)
        assert stale["stale"] == {"hr/leave": "changed"}
        print(f"marked stale {time.monotonic() - started:.2f} s after the sync ended")
        assert _stale_after(http, copy["job_id"], started)["stale"] == {"hr/leave": "changed"}
        _job_stale_is_written_once(stack, http, [first["job_id"], copy["job_id"]])

        # Never served again: the same question is searched anew, and its answer reads the new text.
        for _ in range(2):
            again = _ask(http, collection["id"])
            assert again["response"].get("cached_from") != first["job_id"]
            assert again["stale"] is None
        fresh = _ask(http, collection["id"])
        assert fresh["cached"] and fresh["response"]["cached_from"] != first["job_id"]
        assert fresh["response"]["document_versions"]["hr/leave"] != versions["hr/leave"]
        assert "thirty" in fresh["response"]["answer"]

        # A document the sync deletes: its answers are marked deleted.
        (folder / "hr" / "leave.md").unlink()
        assert "1 deleted" in sync()
        started = time.monotonic()
        assert _stale_after(http, fresh["job_id"], started)["stale"] == {"hr/leave": "deleted"}
        assert http.get(f"/v1/jobs/{first['job_id']}").json()["stale"] == {"hr/leave": "deleted"}


def test_a_document_sent_again_marks_its_answer_and_the_console_asks_again(stack):
    with own_console(stack, "stale-console-user") as console, console.http() as http:
        collection = own_collection(http, "stale-console", [
            {"id": "gates", "title": "Gates", "text": "Gate 2 opens at seven in the morning."}])
        asked = http.post("/v1/search", json={"collection_id": collection, "query": "When does gate 2 open?",
                                              "agents": []})
        job = wait_job(http, asked.json()["job_id"])
        assert job["status"] == "succeeded" and job["stale"] is None
        sent = http.post(f"/v1/collections/{collection}/documents", json={"documents": [
            {"id": "gates", "title": "Gates", "text": "Gate 2 opens at nine in the evening."}]})
        assert sent.status_code == 202, sent.text
        wait_indexed(http, collection)
        assert _stale_after(http, job["job_id"], time.monotonic())["stale"] == {"gates": "changed"}

        _sign_in(console)
        page = console.page
        console.goto(f"#/jobs/{job['job_id']}")
        banner = page.wait_for_selector(f"article.job[data-job='{job['job_id']}'] .notice-stale")
        assert "gates (changed)" in banner.inner_text() and "nine" not in banner.inner_text()
        console.shoot("stale-answer")
        page.click("article.job .notice-stale button")
        page.wait_for_selector(f"article.job:not([data-job='{job['job_id']}'])[data-status='succeeded']")
        again = page.locator("article.job").get_attribute("data-job")
        assert page.locator("article.job .notice-stale").count() == 0
        fresh = http.get(f"/v1/jobs/{again}").json()
        assert not fresh["cached"] and fresh["stale"] is None and "nine" in fresh["response"]["answer"]
