"""The web console in a real headless Chromium (Debian's ``chromium``, driven by Playwright) against the stack.

One user's session from sign-in to history, in order: each test continues where the one before it left the page.
Then a job answered by a real LLM (``llm_stack``), on a page of its own: the line under the answer says how it was
made. Screenshots of every screen at a laptop and a phone width go to ``.agentsearch/screenshots/``.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from agentsearch.devstack.ingest import ingest_through_api
from agentsearch.pipeline.agents.builtin.citation_marks import model_note
from agentsearch.pipeline.job.answer.grounding import PARTIAL_MARK
from tests.integration.conftest import REPO, SAMPLE_CORPUS, search

SHOTS = REPO / ".agentsearch" / "screenshots"
LAPTOP = {"width": 1366, "height": 768}
PHONE = {"width": 390, "height": 844}
XSS_TITLE = "<img src=x onerror=alert(1)>"
QUESTION = "What was Northwind Energy's revenue in Q4 2025?"
# Where each step of the pipeline view belongs, in the order a job runs them.
GROUP = {"pre_search": 0, "search": 1, "post_search": 2, "answer": 3, "response": 4}

# Records each change of a step's or a job's status, in order, as the page makes it.
WATCH_STATUSES = """() => {
  window.__statuses = [];
  new MutationObserver((mutations) => {
    for (const m of mutations) {
      const el = m.target;
      if (el.classList.contains('step')) window.__statuses.push([el.dataset.step, el.dataset.status]);
      else if (el.classList.contains('job')) window.__statuses.push(['job:' + el.dataset.job, el.dataset.status]);
    }
  }).observe(document.body, {subtree: true, attributes: true, attributeFilter: ['data-status']});
}"""

PLAY_AUDIO = """async (audio) => {
  if (audio.readyState < 1) {
    await new Promise((resolve) => audio.addEventListener('loadedmetadata', resolve, {once: true}));
  }
  audio.muted = true;
  await audio.play();
  const start = performance.now();
  while (audio.currentTime === 0 && performance.now() - start < 30000) await new Promise((r) => setTimeout(r, 50));
  return {duration: audio.duration, currentTime: audio.currentTime, paused: audio.paused};
}"""


class Console:
    """The browser, its one page, and what the tests learn on the way (the collection, the jobs)."""

    def __init__(self, stack, page, dialogs: list[str], user: str = "console-user") -> None:
        self.stack, self.page, self.dialogs = stack, page, dialogs
        self.key = stack.create_user(user)
        self.collection_id: str | None = None
        self.job_ids: list[str] = []

    def goto(self, fragment: str) -> None:
        self.page.goto(f"{self.stack.api_url}/{fragment}")

    def shoot(self, name: str) -> None:
        """The page as it is now, at the laptop and at the phone width (whole page), then back to the laptop."""
        SHOTS.mkdir(parents=True, exist_ok=True)
        for label, size in (("laptop", LAPTOP), ("phone", PHONE)):
            self.page.set_viewport_size(size)
            self.page.evaluate("() => window.scrollTo(0, 0)")  # the sticky bar at the top of the picture
            self.page.wait_for_timeout(150)
            self.page.screenshot(path=str(SHOTS / f"{name}-{label}.png"), full_page=True)
        self.page.set_viewport_size(LAPTOP)

    def http(self):
        return self.stack.http(self.key)


@pytest.fixture(scope="module")
def console(stack, tmp_path_factory):
    chromium = shutil.which("chromium")
    assert chromium, "Debian's chromium is missing: `make services` installs it"
    from playwright.sync_api import sync_playwright

    dialogs: list[str] = []
    with sync_playwright() as playwright:
        # Debian's build, never a browser Playwright would download; autoplay allowed so the MP3 can be played.
        browser = playwright.chromium.launch(executable_path=chromium,
                                             args=["--no-sandbox", "--autoplay-policy=no-user-gesture-required"])
        page = browser.new_page(viewport=LAPTOP)
        page.set_default_timeout(60_000)  # a 2-core machine shared with other work
        # Whatever the page's Content-Security-Policy refuses is recorded: the page itself must need nothing refused.
        page.add_init_script("window.__csp = []; document.addEventListener('securitypolicyviolation', "
                             "(e) => window.__csp.push([e.violatedDirective, e.blockedURI, e.sourceFile]))")

        def on_dialog(dialog) -> None:
            dialogs.append(f"{dialog.type}: {dialog.message}")
            dialog.accept() if dialog.type == "confirm" else dialog.dismiss()

        page.on("dialog", on_dialog)
        yield Console(stack, page, dialogs)
        browser.close()


@contextmanager
def own_console(stack, user: str) -> Iterator[Console]:
    """The console in a headless Chromium page of its own, for a user of its own (a module's own session, apart
    from this module's): sign in with ``_sign_in``."""
    chromium = shutil.which("chromium")
    assert chromium, "Debian's chromium is missing: `make services` installs it"
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport=LAPTOP)
        page.set_default_timeout(60_000)
        yield Console(stack, page, [], user)
        browser.close()


def test_sign_in_says_when_a_key_is_wrong_and_keeps_the_key_out_of_urls(console):
    page = console.page
    response = page.goto(f"{console.stack.api_url}/")
    policy = response.headers["content-security-policy"]
    assert "default-src 'self'" in policy and "script-src 'self'" in policy and "'unsafe-inline'" not in policy
    console.shoot("sign-in")

    page.fill("#api-key", "as_not-a-real-key")
    page.click("form.sign-in button[type=submit]")
    error = page.locator("#sign-in-error")
    error.wait_for(state="visible")
    assert "refused" in error.inner_text() and "unknown or revoked API key" in error.inner_text()
    assert page.locator("#nav").is_hidden()

    page.fill("#api-key", console.key)
    page.click("form.sign-in button[type=submit]")
    page.wait_for_selector(".view-search")
    assert page.locator("#who-name").inner_text() == "console-user"
    stored = page.evaluate("() => [sessionStorage.getItem('agentsearch.apiKey'), localStorage.length, location.href]")
    assert stored[0] == console.key and stored[1] == 0
    assert console.key not in stored[2]


def test_collections_create_upload_with_progress_delete_and_an_html_title_stays_text(console, tmp_path):
    page = console.page
    console.goto("#/collections")
    page.wait_for_selector(".view-collections")
    page.fill("form.stack input[name=name]", "bad/name")
    page.click("form.stack button[type=submit]")
    name_error = page.locator("form.stack .field-error").first
    name_error.wait_for(state="visible")
    assert "pattern" in name_error.inner_text() or "match" in name_error.inner_text()
    assert page.get_attribute("form.stack input[name=name]", "aria-invalid") == "true"

    page.fill("form.stack input[name=name]", "console corpus")
    page.click("form.stack button[type=submit]")
    page.wait_for_selector(".card-title:text-is('console corpus')")
    console.collection_id = page.evaluate("() => location.hash.split('/').pop()")

    xss = tmp_path / "xss.jsonl"
    xss.write_text(json.dumps({"id": "xss", "title": XSS_TITLE, "text": "A title that must be shown as text."}) + "\n")
    notes = tmp_path / "console-notes.md"
    notes.write_text("# Console notes\n\nThe console shows each agent of the pipeline as it runs.\n")
    pdf = tmp_path / "wind-brief.pdf"
    _write_pdf(pdf, "Wind brief. Offshore wind foundations carry the turbine towers.")
    page.set_input_files("#upload-files", [str(SAMPLE_CORPUS), str(xss), str(notes), str(pdf)])
    page.click("form.upload button[type=submit]")
    progress = page.locator(".progress-text")
    page.wait_for_function("() => document.querySelector('.progress-text').textContent.startsWith('Indexed')",
                           timeout=120_000)
    total = sum(1 for line in SAMPLE_CORPUS.read_text().splitlines() if line.strip()) + 3
    assert f"Indexed: {total} documents" in progress.inner_text()
    rows = page.locator("tr[data-document]")
    assert rows.count() == total
    assert page.locator("tr[data-document='wind-brief'] .doc-title").inner_text()  # the PDF, read as text
    # The title is text on the page: no element made of it, no script run.
    assert page.locator("tr[data-document='xss'] .doc-title").inner_text() == XSS_TITLE
    assert page.locator("img[src='x']").count() == 0
    console.shoot("collections")

    page.click("button[aria-label='Delete document Console notes']")
    page.wait_for_selector("tr[data-document='console-notes']", state="detached")
    assert any(d.startswith("confirm: Delete") for d in console.dialogs)
    with console.http() as http:
        listed = http.get(f"/v1/collections/{console.collection_id}/documents").json()
    assert listed["total"] == total - 1 and "console-notes" not in {d["id"] for d in listed["items"]}


def test_agents_added_through_generated_forms_with_the_api_error_next_to_its_field(console):
    page = console.page
    console.goto(f"#/agents/{console.collection_id}")
    page.wait_for_selector(".catalogue-list li[data-agent='audio_summary'] .catalogue-description")

    def add(agent_id: str, **fields: str) -> None:
        page.select_option("#add-agent", agent_id)
        form = page.locator(f"form.agent-form[data-agent='{agent_id}']")
        for name, value in fields.items():
            form.locator(f"[name='{name}']").fill(value)
        form.locator("button[type=submit]").click()

    # An invalid value first: the API's 422 appears next to that field, and nothing is added.
    add("language_detector", min_confidence="5")
    field = page.locator("form.agent-form [name='min_confidence']")
    error = page.locator(f"#{field.get_attribute('id')}-error")
    error.wait_for(state="visible")
    assert "less than or equal to 1" in error.inner_text()
    assert field.get_attribute("aria-invalid") == "true"
    console.shoot("agents-invalid")
    field.fill("0.6")
    page.locator("form.agent-form button[type=submit]").click()
    page.wait_for_selector(".set-item[data-agent='language_detector']")

    add("acronym_resolver", acronyms='{"Q4": "fourth quarter"}')
    page.wait_for_selector(".set-item[data-agent='acronym_resolver']")
    add("chart_generator")
    page.wait_for_selector(".set-item[data-agent='chart_generator']")
    add("audio_summary")
    page.wait_for_selector(".set-item[data-agent='audio_summary']")

    # Reorder: language_detector (before acronym_resolver by agent id) moved after it.
    pre = page.locator("ol[aria-label='Pre-search agents'] .set-item")
    assert [pre.nth(i).get_attribute("data-agent") for i in range(2)] == ["acronym_resolver", "language_detector"]
    page.click("button[aria-label='Move acronym_resolver down']")
    page.wait_for_function("() => document.querySelector(\"ol[aria-label='Pre-search agents'] .set-item\")"
                           "?.dataset.agent === 'language_detector'")
    with console.http() as http:
        configs = {c["id"]: c for c in http.get("/v1/agent-configs").json()}
        links = http.get(f"/v1/collections/{console.collection_id}/agents").json()["agents"]
    assert sorted(configs[link["agent_config_id"]]["agent_id"] for link in links) == [
        "acronym_resolver", "audio_summary", "chart_generator", "language_detector"]
    assert configs[next(link["agent_config_id"] for link in links
                        if configs[link["agent_config_id"]]["agent_id"] == "language_detector")]["config"][
        "min_confidence"] == 0.6
    console.shoot("agents")


def test_search_shows_each_stage_turn_ok_in_order_then_citations_audio_and_chart(console):
    page = console.page
    console.goto("#/search")
    page.wait_for_selector(f".view-search select[name=collection] option[value='{console.collection_id}']",
                           state="attached")
    page.select_option(".view-search select[name=collection]", console.collection_id)
    page.evaluate(WATCH_STATUSES)
    page.fill(".view-search input[name=query]", QUESTION)
    page.check(".view-search input[name=cot]")
    page.click(".view-search button[type=submit]")
    job = page.locator("article.job").first
    job.wait_for()
    job_id = job.get_attribute("data-job")
    console.job_ids.append(job_id)
    page.wait_for_selector(f"article.job[data-job='{job_id}'][data-status='succeeded']", timeout=90_000)
    page.wait_for_selector(f"article.job[data-job='{job_id}'] .artifact-mp3")

    statuses = page.evaluate("() => window.__statuses")
    steps = job.locator(".step[data-step]")
    final = {steps.nth(i).get_attribute("data-step"): steps.nth(i).get_attribute("data-status")
             for i in range(steps.count())}
    assert final == {"pre_search:language_detector": "ok", "pre_search:acronym_resolver": "ok", "search": "ok",
                     "answer": "ok", "response:audio_summary": "ok", "response:chart_generator": "ok"}
    oks = [step for step, status in statuses if status == "ok" and not step.startswith("job:")]
    assert sorted(oks) == sorted(final), statuses  # each turned ok once
    groups = [GROUP[step.split(":")[0]] for step in oks]
    assert groups == sorted(groups), oks  # stage by stage, in the order the job runs them
    assert oks[:2] == ["pre_search:language_detector", "pre_search:acronym_resolver"]  # the reordered priorities
    # While it ran: every step before the response agents was ok before the job ended, each seen running first.
    ended = statuses.index([f"job:{job_id}", "succeeded"])
    for step in ("pre_search:language_detector", "pre_search:acronym_resolver", "search", "answer"):
        assert statuses.index([step, "ok"]) < ended, (step, statuses)
    for step in ("pre_search:language_detector", "pre_search:acronym_resolver"):
        assert statuses.index([step, "running"]) < statuses.index([step, "ok"])
    rewritten = job.locator(".step[data-step='pre_search:acronym_resolver']").get_attribute("data-query")
    assert "fourth quarter" in rewritten

    # A citation reveals the passage of its source.
    with console.http() as http:
        response = http.get(f"/v1/jobs/{job_id}").json()["response"]
    cite = job.locator(".answer .cite").first
    n = int(cite.get_attribute("data-source"))
    cite.click()
    panel = job.locator(".citation-panel")
    panel.locator(".passage mark").wait_for()
    assert panel.locator(".citation-title").inner_text() == response["sources"][n - 1]["title"]
    assert len(panel.locator(".passage mark").inner_text()) > 20
    assert cite.get_attribute("aria-expanded") == "true"
    checked = [c["status"] for c in response.get("citations") or [] if c["source"] == n]
    if checked:  # the answer step's check of the sentence against the source, when the job made one
        assert panel.locator(".citation-verdict .badge").inner_text() in checked
    assert job.locator(".reasoning-details li").count() == len(response["cot_steps"]) > 0

    # The MP3 plays in its player, its duration read; the chart is an image that loaded.
    audio = job.locator("audio.artifact-audio")
    played = audio.evaluate(PLAY_AUDIO)
    expected = next(a for a in response["agent_artifacts"] if a["type"] == "mp3")["metadata"]["duration_s"]
    assert abs(played["duration"] - expected) < 1.0 and played["currentTime"] > 0 and not played["paused"]
    chart = job.locator("img.artifact-chart")
    assert chart.evaluate("img => img.complete && img.naturalWidth") == 800
    audio.evaluate("audio => audio.pause()")
    console.shoot("search")

    # A thumbs down with a comment on the answer, a thumbs up on its first source: both stored as the API keeps them.
    answer_thumbs = job.locator(".feedback-answer")
    answer_thumbs.locator(".thumb[data-rating='down']").click()
    answer_thumbs.locator("textarea[name=feedback-comment]").fill("The figure is from the wrong quarter.")
    answer_thumbs.locator(".feedback-comment button").click()
    page.wait_for_selector(f"article.job[data-job='{job_id}'] .feedback-answer .feedback-comment[hidden]",
                           state="attached")
    first = response["sources"][0]["document_id"]
    source_up = job.locator(f".feedback-source[data-document='{first}'] .thumb[data-rating='up']")
    source_up.click()
    page.wait_for_selector(f"article.job[data-job='{job_id}'] .feedback-source[data-document='{first}'] "
                           ".thumb[data-rating='up'][aria-pressed='true']")
    assert answer_thumbs.locator(".thumb[data-rating='down']").get_attribute("aria-pressed") == "true"
    with console.http() as http:
        items = http.get(f"/v1/collections/{console.collection_id}/feedback").json()["items"]
    mine = {(i["source"], i["rating"], i["comment"]) for i in items if i["job_id"] == job_id}
    assert mine == {(None, "down", "The figure is from the wrong quarter."), (first, "up", None)}
    console.shoot("feedback")


def test_a_follow_up_in_the_conversation_cancelled_while_it_runs_ends_cancelled(console):
    page = console.page
    with console.http() as http:
        # A response agent that renders for 20 s joins the set, so the follow-up is still running when Cancel is
        # pressed: on an idle machine the sample job ends within a second or two, before the click could land.
        slow = http.post("/v1/agent-configs", json={"agent_id": "test_slow_responder", "name": "slow renderer",
                                                    "timeout_s": 60, "config": {"sleep_s": 20}})
        assert slow.status_code == 201, slow.text
        entries = http.get(f"/v1/collections/{console.collection_id}/agents").json()["agents"]
        entries.append({"agent_config_id": slow.json()["id"]})
        assert http.put(f"/v1/collections/{console.collection_id}/agents",
                        json={"agents": entries}).status_code == 200
    page.fill(".view-search input[name=query]", "And how did the wind turbines do in the same quarter?")
    page.click(".view-search button[type=submit]")
    second = page.locator("article.job").nth(1)
    second.wait_for()
    job_id = second.get_attribute("data-job")
    console.job_ids.append(job_id)
    second.locator("button:text-is('Cancel')").click()
    page.wait_for_selector(f"article.job[data-job='{job_id}'][data-status='cancelled']", timeout=60_000)
    assert second.locator(".job-status").inner_text() == "cancelled"
    assert second.locator("button:text-is('Cancel')").is_hidden()
    # Whatever the cancel stopped is shown as such (cancelled), never left pending or running.
    assert second.locator(".step[data-status='pending'], .step[data-status='running']").count() == 0
    with console.http() as http:
        assert http.get(f"/v1/jobs/{job_id}").json()["status"] == "cancelled"
        conversations = http.get("/v1/conversations").json()
    assert len(conversations) == 1  # both questions asked in one conversation


def test_history_lists_newest_first_and_reopening_replays_the_pipeline(console):
    page = console.page
    console.goto("#/history")
    page.wait_for_selector(".view-history tr[data-job]")
    rows = page.locator(".view-history tr[data-job]")
    assert [rows.nth(i).get_attribute("data-job") for i in range(rows.count())] == list(reversed(console.job_ids))
    assert rows.nth(0).locator(".badge").inner_text() == "cancelled"
    console.shoot("history")

    rows.nth(1).locator("a").click()
    page.wait_for_selector(f"article.job[data-job='{console.job_ids[0]}'][data-status='succeeded']")
    page.wait_for_selector("article.job .artifact-png img")
    steps = page.locator("article.job .step[data-step]")
    assert {steps.nth(i).get_attribute("data-status") for i in range(steps.count())} == {"ok"}
    assert steps.count() == 6
    assert page.locator("article.job .artifact-mp3 audio").count() == 1
    console.shoot("job")
    assert not [d for d in console.dialogs if not d.startswith("confirm: Delete")]  # no alert() ever ran
    assert page.evaluate("() => window.__csp") == []


def _write_pdf(path: Path, text: str) -> None:
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    pdf = canvas.Canvas(str(path), pagesize=A4)
    pdf.setTitle("Wind brief")
    pdf.drawString(72, 760, text)
    pdf.save()


def test_console_files_are_served_without_a_key_and_nothing_outside_them(console):
    import httpx

    with httpx.Client(base_url=console.stack.api_url, timeout=10) as anonymous:
        page = anonymous.get("/")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
        assert anonymous.get("/console/app.js").headers["content-type"].startswith("text/javascript")
        assert anonymous.get("/console/..%2Fapp.py").status_code == 404
        assert anonymous.get("/console/jobview.js").status_code == 200
        assert anonymous.get("/v1/collections").status_code == 401


def _sign_in(console: Console) -> None:
    console.goto("")
    console.page.fill("#api-key", console.key)
    console.page.click("form.sign-in button[type=submit]")
    console.page.wait_for_selector(".view-search")


def test_an_answer_the_model_wrote_says_how_it_was_made_and_what_was_left_out(console, llm_stack):
    """A real LLM job: the console's line is the one the PDF report and the email draft print (``model_note``),
    whatever the small model wrote; then the same job's record with a made-up verdict per sentence, so a partly
    supported sentence and a left-out one (a reason holding markup) are certain to be there."""
    llm = Console(llm_stack, console.page.context.browser.new_page(viewport=LAPTOP), console.dialogs)
    page = llm.page
    page.set_default_timeout(60_000)
    documents = [json.loads(line) for line in SAMPLE_CORPUS.read_text().splitlines() if line.strip()]
    with llm.http() as http:
        collection = ingest_through_api(http, "console llm corpus", documents)
        job = search(http, collection, "What was Northwind Energy's revenue in the second quarter of 2024?",
                     timeout_s=180, agents=[], use_cache=False)
    assert job["status"] == "succeeded", job
    response = job["response"]
    info = response["metadata"]["answer"]
    assert "sentences" in info, info  # the model was asked, and every sentence of its draft judged
    _sign_in(llm)

    article = f"article.job[data-job='{job['job_id']}']"
    llm.goto(f"#/jobs/{job['job_id']}")
    page.wait_for_selector(f"{article}[data-status='succeeded'] .answer-note")
    note = page.locator(f"{article} .answer-made")
    assert note.locator(".answer-note").inner_text() == model_note(info)
    assert note.get_attribute("data-method") == info["method"]
    left_out = [s for s in info["sentences"] if not s["delivered"]]
    assert note.locator(".answer-left-out li").count() == len(left_out)
    assert page.locator(f"{article} .answer .partial-mark").count() == response["answer"].count(PARTIAL_MARK)
    llm.shoot("answer-by-llm")

    # The same record, its answer and verdicts made up: one sentence supported, one partly (its mark set apart,
    # the reason in its title), one left out for a number no source holds.
    supported = "Northwind Energy reported revenue of $318 million in Q2 2024 [1]."
    partial = f"Revenue grew because of offshore demand [1] {PARTIAL_MARK}."
    hostile = "no source holds <img src=x onerror=alert(1)>"
    made_up = {**response, "answer": f"{supported} {partial}", "metadata": {**response["metadata"], "answer": {
        "method": "llm", "fallback_reason": None, "draft": {"model": "smollm2-135m-instruct"}, "quotes_added": 0,
        "llm_sentences": {"supported": 1, "partial": 1, "unsupported": 1},
        "sentences": [
            {"text": "Northwind Energy reported revenue of $318 million in Q2 2024.", "status": "supported",
             "cited": [1], "sources": [1], "reason": None, "delivered": True},
            {"text": "Revenue grew because of offshore demand.", "status": "partial", "cited": [1], "sources": [1],
             "reason": "the source does not say: offshore, demand", "delivered": True},
            {"text": "Northwind sold 369 turbines.", "status": "unsupported", "cited": [2], "sources": [],
             "reason": hostile, "delivered": False}]}}}

    def record(route) -> None:  # the job's record as the API gives it, with whatever ``made_up`` is by then
        route.fulfill(json={**route.fetch().json(), "response": made_up})

    page.route(f"**/v1/jobs/{job['job_id']}", record)
    page.reload()
    page.wait_for_selector(f"{article}[data-status='succeeded'] .answer-left-out")
    answer = page.locator(f"{article} .answer")
    assert answer.inner_text().strip() == made_up["answer"]  # the text as written, marks and all
    mark = answer.locator(".partial-mark")
    assert mark.count() == 1 and mark.inner_text() == PARTIAL_MARK
    assert mark.get_attribute("title") == ("Only partly supported by the sources: the source does not say: offshore, "
                                           "demand")
    line = ("Written by the model (smollm2-135m-instruct): 1 of 3 sentences supported by the sources, 1 only partly; "
            "1 left out.")
    assert note.locator(".answer-note").inner_text() == line == model_note(made_up["metadata"]["answer"])
    details = note.locator(".answer-left-out")
    assert not details.evaluate("d => d.open")  # quiet until asked
    details.locator("summary").click()
    assert details.locator("li q").inner_text() == "Northwind sold 369 turbines."
    assert details.locator("li").inner_text().endswith(f" — {hostile}")
    assert page.locator("img[src='x']").count() == 0  # the reason is text, never markup
    llm.shoot("answer-by-llm-left-out")

    # The offline answer delivered instead: the line says why, and lists what the model wrote. Its text is a quote
    # of the sources, never marked (the real job's answer may be the model's, with marks of its own).
    why = "no sentence of the LLM's answer is supported by the sources (1 unsupported, 0 partly supported)"
    made_up = {**response, "answer": supported, "metadata": {**response["metadata"], "answer": {
        "method": "extractive", "fallback_reason": why, "llm_sentences": {"supported": 0, "partial": 0,
                                                                           "unsupported": 1},
        "sentences": [{"text": "Northwind sold 369 turbines.", "status": "unsupported", "cited": [2], "sources": [],
                       "reason": "no source holds 369", "delivered": False}]}}}
    page.reload()
    page.wait_for_selector(f"{article}[data-status='succeeded'] .answer-left-out")
    assert note.locator(".answer-note").inner_text() == f"The model's answer was not used: {why}."
    assert note.get_attribute("data-method") == "extractive"
    assert answer.inner_text().strip() == supported and answer.locator(".partial-mark").count() == 0
    page.unroute(f"**/v1/jobs/{job['job_id']}")
    page.close()
