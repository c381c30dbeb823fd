"""The console shows an upload's ingestion as it goes: documents and chunks done, the rate and the time left while
anything is pending, read again while it is, and what it came to at the end (``api/console/ingestion.js`` reading
the collection's ``ingestion``). A JSON Lines file of 100 documents is uploaded through the page's file input and
indexed by the stack's worker, four tasks shared by its two processes.

The console is the same headless Chromium as tests/integration/test_console.py, as a user of its own.
"""

from __future__ import annotations

import json
import re

import pytest

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
UNDER_WAY = {"documents_done": 40, "documents_total": 100, "documents_failed": 0, "pending": 60, "chunks": 160,
             "documents_per_s": 2, "chunks_per_s": 8.25, "eta_s": 30, "started_at": "2026-11-27T09:00:00Z"}


@pytest.fixture(scope="module")
def console(stack):
    with own_console(stack, "console-ingestion-user") as running:
        yield running


def test_the_progress_line_says_documents_chunks_rate_and_time_left(console):
    _sign_in(console)
    cases = [UNDER_WAY, {**UNDER_WAY, "documents_per_s": None, "chunks_per_s": None, "eta_s": None},
             {**UNDER_WAY, "documents_done": 100, "pending": 0, "chunks": 400, "documents_failed": 2, "eta_s": None},
             {**UNDER_WAY, "documents_total": 0}, None]
    described = console.page.evaluate(DESCRIBE_IN_PAGE, cases)
    assert described["texts"] == [
        "Indexing: 40 of 100 documents · 160 chunks · 2.0 documents/s, 8.3 chunks/s · about 30 s left",
        "Indexing: 40 of 100 documents · 160 chunks · time left: once the first documents are done",
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
    page.set_input_files("#upload-files", [str(upload)])
    page.click("form.upload button[type=submit]")
    page.wait_for_function("() => document.querySelector('.progress-text').textContent.startsWith('Indexed')",
                           timeout=180_000)
    shown = page.evaluate("() => window.__progress")

    under_way = [t for t in shown if t.startswith("Indexing: ")]
    assert under_way, shown
    pattern = re.compile(rf"Indexing: (\d+) of {DOCUMENTS} documents · (\d+) chunks? · ")
    assert all(pattern.match(t) for t in under_way), under_way
    done = [int(pattern.match(t).group(1)) for t in under_way]
    assert done == sorted(done) and done[0] < DOCUMENTS
    timed = [t for t in under_way if re.search(r"documents/s, [\d.]+ chunks/s · about \d+ (s|min) left$", t)]
    assert timed, f"a rate and a time left once some documents were done: {under_way}"
    final = page.locator(".progress-text").inner_text()
    assert re.fullmatch(rf"Indexed: {DOCUMENTS} documents · \d+ chunks at [\d.]+ chunks/s", final), final
    with console.http() as http:
        ingestion = http.get(f"/v1/collections/{console.collection_id}").json()["ingestion"]
    assert f"· {ingestion['chunks']} chunks at" in final and ingestion["eta_s"] is None
    console.shoot("collection-ingestion")
