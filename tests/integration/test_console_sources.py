"""A collection's Sources panel in a real headless Chromium (Debian's ``chromium``, driven by Playwright, as in
tests/integration/test_console.py), against the API in the embedded mode as a process of its own that may read the
test's loopback feed server (the suite's stack keeps the egress guard's defaults, which refuse 127.0.0.1).

A feed source is added through the form made from the feed kind's schema (its URL left out first: the API's 422
under the field), run now, and its run's counts appear in its row; a web source's password is a password input and
is shown only as "set"; its settings are edited in a form prefilled from it (the password shown as set, never
filled in), a wrong URL's 422 shown under the field, and only what changed sent; a source is disabled and enabled
again, then removed with its documents.
"""

from __future__ import annotations

import shutil

import pytest
from cryptography.fernet import Fernet

from tests.integration.test_console import LAPTOP, PHONE, SHOTS
from tests.support.embedded_api import EmbeddedApi
from tests.support.news_feed import FEED_PATH, Story, publish
from tests.support.source_servers import SiteServer

pytestmark = pytest.mark.integration

STORIES = [Story("solar", "Solar farm opens by the river", "The cooperative's solar farm delivers 12 MW.", day=1),
           Story("tides", "Tidal turbines tested in the estuary", "Two tidal turbines ran for a week.", day=2)]
SECRET = "pa55-never-shown"
FORM = "form.source-form"


def _shoot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    for label, size in (("laptop", LAPTOP), ("phone", PHONE)):
        page.set_viewport_size(size)
        page.evaluate("() => window.scrollTo(0, 0)")  # the sticky bar at the top of the picture
        page.wait_for_timeout(150)
        page.screenshot(path=str(SHOTS / f"{name}-{label}.png"), full_page=True)
    page.set_viewport_size(LAPTOP)


def test_a_feed_source_is_added_through_its_form_run_and_shows_its_counts(tmp_path):
    chromium = shutil.which("chromium")
    assert chromium, "Debian's chromium is missing: `make services` installs it"
    from playwright.sync_api import sync_playwright

    env = {"AGENTSEARCH_EGRESS_ALLOW": '["127.0.0.1"]', "AGENTSEARCH_SOURCES_KEY": Fernet.generate_key().decode()}
    with SiteServer(tmp_path / "site") as site, EmbeddedApi(tmp_path / "api", env) as api:
        publish(site, STORIES)
        key = api.create_user("console-sources")
        with api.http(key) as http:
            collection_id = http.post("/v1/collections", json={"name": "news"}).json()["id"]
        dialogs: list[str] = []
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            page = browser.new_page(viewport=LAPTOP)
            page.set_default_timeout(60_000)
            page.add_init_script("window.__csp = []; document.addEventListener('securitypolicyviolation', "
                                 "(e) => window.__csp.push(e.violatedDirective))")

            def on_dialog(dialog) -> None:
                dialogs.append(dialog.message)
                dialog.accept() if dialog.type == "confirm" else dialog.dismiss()

            page.on("dialog", on_dialog)
            page.goto(f"{api.url}/")
            page.fill("#api-key", key)
            page.click("form.sign-in button[type=submit]")
            page.wait_for_selector(".view-search")
            page.goto(f"{api.url}/#/collections/{collection_id}")
            page.wait_for_selector(FORM)
            page.locator(".sources p", has_text="No sources yet").wait_for()  # the listing read

            # The feed kind's form, made from its schema; sent without its URL, the API's 422 shows under it.
            page.select_option(f"{FORM} select[name=kind]", "feed")
            assert page.input_value(f"{FORM} [name=max_entries]") == "200"  # the schema's default
            page.click(f"{FORM} button[type=submit]")
            url_error = page.locator(f"{FORM} [name=url] ~ .field-error")
            url_error.wait_for(state="visible")
            assert page.get_attribute(f"{FORM} [name=url]", "aria-invalid") == "true"
            page.fill(f"{FORM} [name=url]", site.url(FEED_PATH))
            page.click(f"{FORM} button[type=submit]")
            row = page.locator("tr[data-kind=feed]")
            row.wait_for()
            assert site.url(FEED_PATH) in row.inner_text() and "not run yet" in row.inner_text()
            assert "only when asked" in row.inner_text()

            # Run now: the row is read again until the run ends, then shows its counts.
            row.locator("button", has_text="Run now").click()
            page.locator("tr[data-kind=feed] td.source-run[data-run-status=succeeded]").wait_for()
            counts = row.locator(".source-counts").inner_text()
            assert counts == "2 new · 0 changed · 0 unchanged · 0 removed · 0 failed", counts
            with api.http(key) as http:
                source = http.get(f"/v1/collections/{collection_id}/sources").json()["items"][0]
                assert source["last_run"]["documents"]["new"] == 2 and source["items"] == 2

            # A web source's password: a password input, sent once, shown as "set" and never again.
            page.select_option(f"{FORM} select[name=kind]", "web")
            assert page.get_attribute(f"{FORM} [name=password]", "type") == "password"
            page.fill(f"{FORM} [name=url]", site.url("/news/solar.html"))
            page.fill(f"{FORM} [name=username]", "reader")
            page.fill(f"{FORM} [name=password]", SECRET)
            page.fill(f"{FORM} [name=schedule_s]", "3600")
            page.click(f"{FORM} button[type=submit]")
            web = page.locator("tr[data-kind=web]")
            web.wait_for()
            assert "password: set" in web.inner_text() and "every 1 h" in web.inner_text()
            assert page.locator("tr[data-kind=web] td.source-next").inner_text() not in ("", "–")
            assert SECRET not in page.content()
            _shoot(page, "collection-sources")

            # Edited: the form holds the source's settings, its password only as "set"; a wrong URL's 422 shows
            # under the field; saved, only what changed is sent, and the password is kept.
            web.get_by_role("button", name="Edit source").click()
            edit = page.locator("form.source-edit-form")
            edit.wait_for()
            assert edit.locator("[name=url]").input_value() == site.url("/news/solar.html")
            assert edit.locator("[name=username]").input_value() == "reader"
            assert edit.locator("[name=password]").input_value() == ""
            assert edit.locator("[name=password]").get_attribute("placeholder").startswith("set")
            assert edit.locator("[name=schedule_s]").input_value() == "3600"
            assert SECRET not in page.content()
            edit.locator("[name=url]").fill("ftp://example.org/news/")
            edit.get_by_role("button", name="Save").click()
            edit.locator("[name=url] ~ .field-error").wait_for(state="visible")
            assert "http:// or https://" in edit.locator("[name=url] ~ .field-error").inner_text()
            assert edit.locator("[name=url]").get_attribute("aria-invalid") == "true"
            _shoot(page, "collection-source-edit")
            edit.locator("[name=url]").fill(site.url("/news/tides.html"))
            edit.locator("[name=username]").fill("editor")
            edit.locator("[name=max_pages]").fill("20")
            edit.locator("[name=schedule_s]").fill("7200")
            with page.expect_request(lambda r: r.method == "PATCH") as patch:
                edit.get_by_role("button", name="Save").click()
            assert patch.value.post_data_json == {"config": {"url": site.url("/news/tides.html"), "username": "editor",
                                                             "max_pages": 20}, "schedule_s": 7200}
            edit.wait_for(state="detached")
            page.locator("tr[data-kind=web]", has_text="every 2 h").wait_for()
            assert site.url("/news/tides.html") in web.inner_text() and "password: set" in web.inner_text()
            with api.http(key) as http:
                edited = next(s for s in http.get(f"/v1/collections/{collection_id}/sources").json()["items"]
                              if s["kind"] == "web")
                assert edited["config"]["username"] == "editor" and edited["config"]["password"] == "set"
                assert edited["schedule_s"] == 7200

            # Edited again, prefilled from what was saved: fields emptied go back to their defaults (the username to
            # none, the page limit to 100), the schedule to "only when asked".
            web.get_by_role("button", name="Edit source").click()
            assert edit.locator("[name=username]").input_value() == "editor"
            assert edit.locator("[name=max_pages]").input_value() == "20"
            for name in ("username", "max_pages", "schedule_s"):
                edit.locator(f"[name={name}]").fill("")
            with page.expect_request(lambda r: r.method == "PATCH") as patch:
                edit.get_by_role("button", name="Save").click()
            assert patch.value.post_data_json == {"config": {"username": None, "max_pages": 100}, "schedule_s": None}
            page.locator("tr[data-kind=web]", has_text="only when asked").wait_for()
            with api.http(key) as http:
                edited = http.get(f"/v1/collections/{collection_id}/sources/{edited['id']}").json()
                assert edited["config"]["username"] is None and edited["config"]["max_pages"] == 100
                assert edited["config"]["password"] == "set" and edited["schedule_s"] is None

            # And cancelled: the form goes, nothing sent.
            web.get_by_role("button", name="Edit source").click()
            edit.get_by_role("button", name="Cancel").click()
            edit.wait_for(state="detached")

            # Disabled: no next run, the button offers Enable; enabled again.
            web.get_by_role("button", name="Disable source").click()
            page.locator("tr[data-kind=web][data-enabled=false]").wait_for()
            assert page.locator("tr[data-kind=web] td.source-next").inner_text() == "disabled"
            page.locator("tr[data-kind=web]").get_by_role("button", name="Enable source").click()
            page.locator("tr[data-kind=web][data-enabled=true]").wait_for()

            # Removed with the documents it brought.
            page.locator("tr[data-kind=feed]").get_by_role("button", name="Remove source").click()
            page.locator("tr[data-kind=feed]").wait_for(state="detached")
            assert dialogs and "documents it brought" in dialogs[-1]
            with api.http(key) as http:
                kinds = [s["kind"] for s in http.get(f"/v1/collections/{collection_id}/sources").json()["items"]]
                assert kinds == ["web"]
                listed = http.get(f"/v1/collections/{collection_id}/sources").json()["items"][0]
                assert listed["config"]["password"] == "set" and SECRET not in str(listed)
            assert page.evaluate("window.__csp") == []
            browser.close()
