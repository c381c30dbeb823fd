"""The console shows an upload's ingestion as it goes: documents and chunks done, the rate and the time left while
anything is pending, read again while it is, and what it came to at the end
(``src/agentsearch/api/console/ingestion.js`` reading the collection's ``ingestion``). A JSON Lines file of 100
documents is uploaded through the page's file input and indexed by the stack's worker, four tasks shared by its two
processes; the test holds the collection's row so that the page shows an upload before anything ended and part-way,
whatever the machine's pace.

The console is the same headless Chromium as tests/integration/test_console.py, as a user of its own.
"""

from __future__ import annotations

import json
import re
import threading
import time

import psycopg
import pytest

from agentsearch.pipeline.operations.backup import libpq_url
from tests.integration.test_console import _sign_in, own_console

DOCUMENTS = 100
# Records every text the progress line shows, in order, as the page writes it.
WATCH_PROGRESS = """() => {
  window.__progress = [];
  const line = document.querySelector('.progress-text');
  new MutationObserver(() => window.__progress.push(line.textContent))
    .observe(line, {childList: true, characterData: true, subtree: true});
}"""
DESCRIBE_IN_PAGE = """async (cases) => {
  const { ingestionText, timeLeft } = await import('/console/ingestion.js');
  return {texts: cases.map(ingestionText), times: [30, 59.6, 250, 4800, 7200].map(timeLeft)};
}"""
# The collection's row held as an ingest task's end holds it (its documents end with the epoch's bump, in one
# transaction): that end waits, while the upload's inserts (a key share) and every read go on.
HOLD = "SELECT 1 FROM collections WHERE id = %s FOR NO KEY UPDATE"
BLOCKED_BY = "SELECT count(*) FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))"
WAITS = "SELECT cardinality(pg_blocking_pids(%s)) > 0"
UNDER_WAY = {"documents_done": 40, "documents_total": 100, "documents_failed": 0, "pending": 60, "chunks": 160,
             "documents_per_s": 2, "chunks_per_s": 8.25, "eta_s": 30, "started_at": "2026-11-27T09:00:00Z"}


@pytest.fixture(scope="module")
def console(stack):
    with own_console(stack, "console-ingestion-user") as running:
        yield running


def test_the_progress_line_says_documents_chunks_rate_and_time_left(console):
    _sign_in(console)
    unmeasured = {"documents_per_s": None, "chunks_per_s": None, "eta_s": None}
    cases = [UNDER_WAY, {**UNDER_WAY, **unmeasured},
             {**UNDER_WAY, **unmeasured, "documents_done": 0, "pending": 100, "chunks": 0},
             {**UNDER_WAY, "documents_done": 100, "pending": 0, "chunks": 400, "documents_failed": 2, "eta_s": None},
             {**UNDER_WAY, "documents_total": 0}, None]
    described = console.page.evaluate(DESCRIBE_IN_PAGE, cases)
    assert described["texts"] == [
        "Indexing: 40 of 100 documents · 160 chunks · 2.0 documents/s, 8.3 chunks/s · about 30 s left",
        # Nothing ended for a minute: 40 are done all the same.
        "Indexing: 40 of 100 documents · 160 chunks · time left: once more documents are done",
        "Indexing: 0 of 100 documents · 0 chunks · time left: once the first documents are done",
        "Indexed: 100 documents (2 failed) · 400 chunks at 8.3 chunks/s",
        "", "",
    ]
    assert described["times"] == ["about 30 s", "about 1 min", "about 4 min", "about 1 h 20 min", "about 2 h"]


def test_an_upload_shows_its_progress_while_pending_and_what_it_came_to(console, tmp_path):
    page = console.page
    with console.http() as http:
        created = http.post("/v1/collections", json={"name": "progress shown"})
        assert created.status_code == 201, created.text
        console.collection_id = created.json()["id"]
    console.goto(f"#/collections/{console.collection_id}")
    page.wait_for_selector(".view-collections form.upload")
    upload = tmp_path / "reports.jsonl"
    upload.write_text("".join(json.dumps({"id": f"r{i}", "title": f"Report {i}",
                                          "text": f"Report {i} puts the output of turbine {i} at {i * 13} megawatt "
                                                  f"hours. Its blades were serviced in month {i % 12 + 1}."}) + "\n"
                              for i in range(DOCUMENTS)))
    page.evaluate(WATCH_PROGRESS)
    url = libpq_url(console.stack.database_url)
    # Each state is held until the page has shown it, however fast or slow the worker goes: no task ends before
    # the first line, some and not all have ended for the second.
    with psycopg.connect(url, autocommit=True) as watch, psycopg.connect(url) as first, \
            psycopg.connect(url) as then:
        first.execute(HOLD, (console.collection_id,))
        page.set_input_files("#upload-files", [str(upload)])
        page.click("form.upload button[type=submit]")
        _shows(page, rf"^Indexing: 0 of {DOCUMENTS} documents · 0 chunks · "
                     r"time left: once the first documents are done$")
        # A task has come to its end and waits: hold the row again behind it, then let it (and any other already
        # waiting) end; what starts after waits behind the second hold.
        _wait_until(lambda: _waiting_for(watch, first.info.backend_pid), "an ingest task waiting for its end")
        holding = threading.Thread(target=then.execute, args=(HOLD, (console.collection_id,)))
        holding.start()
        _wait_until(lambda: watch.execute(WAITS, (then.info.backend_pid,)).fetchone()[0], "the second hold queued")
        first.commit()
        holding.join(timeout=120)
        assert not holding.is_alive(), "the second hold was never granted"
        _shows(page, rf"^Indexing: [1-9]\d* of {DOCUMENTS} documents · \d+ chunks? · [\d.]+ documents/s, "
                     r"[\d.]+ chunks/s · about \d+ (s|min|h)( \d+ min)? left$")
        then.commit()
    page.wait_for_function("() => document.querySelector('.progress-text').textContent.startsWith('Indexed')",
                           timeout=180_000)
    shown = page.evaluate("() => window.__progress")

    under_way = [t for t in shown if t.startswith("Indexing: ")]
    pattern = re.compile(rf"Indexing: (\d+) of {DOCUMENTS} documents · (\d+) chunks? · ")
    assert all(pattern.match(t) for t in under_way), under_way
    done = [int(pattern.match(t).group(1)) for t in under_way]
    assert done == sorted(done) and done[0] == 0 and done[-1] < DOCUMENTS, under_way
    # A rate and a time left once documents are done, never before (nothing to measure them by).
    assert not [t for t in under_way if pattern.match(t).group(1) == "0" and "documents/s" in t], under_way
    final = page.locator(".progress-text").inner_text()
    assert re.fullmatch(rf"Indexed: {DOCUMENTS} documents · \d+ chunks at [\d.]+ chunks/s", final), final
    with console.http() as http:
        ingestion = http.get(f"/v1/collections/{console.collection_id}").json()["ingestion"]
    assert f"· {ingestion['chunks']} chunks at" in final and ingestion["eta_s"] is None
    console.shoot("collection-ingestion")


def _shows(page, pattern: str) -> None:
    """Wait until the progress line reads ``pattern`` (a regular expression)."""
    page.wait_for_function("(pattern) => new RegExp(pattern).test(document.querySelector('.progress-text')"
                           ".textContent)", arg=pattern, timeout=180_000)


def _waiting_for(watch, pid: int) -> bool:
    return watch.execute(BLOCKED_BY, (pid,)).fetchone()[0] > 0


def _wait_until(condition, what: str, timeout_s: float = 180) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not within {timeout_s:g} s"
        time.sleep(0.1)
