"""The console shows where in its file each source stands: a PDF of two pages, a Word file and a deck uploaded through
the page's file input, read by the stack's worker, listed with their format as they are indexed (an empty file
refused with its reason, a broken PDF failed with the worker's); then a search whose answer cites a fact of the
PDF's second page shows "p. 2" beside that source and in the citation panel.

The console is the same headless Chromium as tests/integration/test_console.py, as a user of its own.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentsearch.pipeline.text.locations import describe_location
from tests.integration.test_console import _sign_in, own_console

QUESTION = "How many gigawatt hours did the Brightwater turbines deliver in 2025?"
FACT = "The Brightwater turbines delivered 4,812 gigawatt hours in 2025, a record for the farm."
# The locations whose words the console writes (src/agentsearch/api/console/locations.js), checked against the Python's.
LOCATIONS = [{"page": 2}, {"slide": 2}, {"sheet": "Q4", "row": 7}, {"sheet": "Q4", "rows": [7, 12]},
             {"sheet": "Q4", "rows": [7, 7]}, {"section": "Results > Revenue"}, {"section": "Notes", "page": 4},
             {"page": True}, {"rows": "7-12"}, {}, None]
DESCRIBE_IN_PAGE = """async (locations) => {
  const { describeLocation } = await import('/console/locations.js');
  return locations.map(describeLocation);
}"""


@pytest.fixture(scope="module")
def console(stack):
    with own_console(stack, "console-locations-user") as running:
        yield running


def write_files(folder: Path) -> list[Path]:
    """A PDF of two pages (the fact on the second), a Word file with a "Results" heading, a deck of two slides."""
    from docx import Document
    from pptx import Presentation
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    pdf = folder / "brightwater-brief.pdf"
    sheet = canvas.Canvas(str(pdf), pagesize=A4)
    sheet.setTitle("Brightwater brief")
    sheet.drawString(72, 760, "The Brightwater farm stands on a sandbank north of the estuary.")
    sheet.drawString(72, 740, "Its foundations were driven into the seabed in the spring of 2021.")
    sheet.showPage()
    sheet.drawString(72, 760, FACT)
    sheet.save()

    docx = folder / "harbour-review.docx"
    word = Document()
    word.add_heading("Harbour review", level=0)
    word.add_heading("Results", level=1)
    word.add_paragraph("The harbour handled more container ships after the new quay opened.")
    word.save(str(docx))

    pptx = folder / "fleet-deck.pptx"
    deck = Presentation()
    for title, body in (("Fleet plan", "Service vessels for the coming season."),
                        ("Crew rota", "Crews change every fourteen days.")):
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = title
        slide.placeholders[1].text = body
    deck.save(str(pptx))
    return [pdf, docx, pptx]


def test_a_cited_pdf_page_is_shown_beside_its_source_and_in_the_citation_panel(console, tmp_path):
    page = console.page
    _sign_in(console)
    # The console's wording is the Python's, location for location.
    assert page.evaluate(DESCRIBE_IN_PAGE, LOCATIONS) == [describe_location(loc) for loc in LOCATIONS]

    with console.http() as http:
        created = http.post("/v1/collections", json={"name": "located files"})
        assert created.status_code == 201, created.text
        console.collection_id = created.json()["id"]
    console.goto(f"#/collections/{console.collection_id}")
    page.wait_for_selector(".view-collections form.upload")
    accept = page.get_attribute("#upload-files", "accept").split(",")
    assert {".pdf", ".docx", ".pptx", ".xlsx", ".csv", ".html", ".eml", ".png", ".jsonl"} <= set(accept)

    files = write_files(tmp_path)
    (tmp_path / "blank.txt").write_bytes(b"")
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.4\nno objects and no pages\n")
    page.set_input_files("#upload-files", [str(f) for f in files] + [str(tmp_path / "blank.txt"),
                                                                      str(tmp_path / "broken.pdf")])
    page.click("form.upload button[type=submit]")
    refused = page.locator(".upload-rejected li[data-file='blank.txt']")
    refused.wait_for()
    assert refused.inner_text() == "blank.txt: the file is empty"
    formats = {"brightwater-brief": "PDF", "harbour-review": "Word", "fleet-deck": "PowerPoint"}
    for document_id in formats:
        page.wait_for_selector(f"tr[data-document='{document_id}'][data-status='indexed']", timeout=120_000)
    for document_id, name in formats.items():
        row = page.locator(f"tr[data-document='{document_id}']")
        assert row.locator(".doc-format").inner_text() == f" · {name}"
        assert row.locator(".doc-error").count() == 0
    broken = page.locator("tr[data-document='broken'][data-status='failed']")
    broken.wait_for(timeout=120_000)
    with console.http() as http:
        listed = {d["id"]: d for d in http.get(f"/v1/collections/{console.collection_id}/documents").json()["items"]}
    assert broken.locator(".doc-error").inner_text() == listed["broken"]["error"] != ""
    assert listed["brightwater-brief"]["pages_total"] == listed["brightwater-brief"]["pages_done"] == 2
    console.shoot("collection-files")

    # While a worker reads a long file: its pages read so far, and what the reading noted (a listing made up from
    # the real one, so the numbers are certain to be there; a note holding markup stays text).
    hostile = "pages 1-5 were read by OCR <img src=x>"
    reading = {**listed["brightwater-brief"], "id": "annual-report", "title": "Annual report", "status": "pending",
               "pages_done": 12, "pages_total": 200, "notes": [hostile]}

    def listing(route) -> None:
        answer = route.fetch().json()
        route.fulfill(json={**answer, "items": [*answer["items"], reading], "total": answer["total"] + 1})

    page.route(f"**/v1/collections/{console.collection_id}/documents?*", listing)
    page.reload()
    row = page.locator("tr[data-document='annual-report'][data-status='pending']")
    assert row.locator(".doc-progress").inner_text() == "parsing, 12 of 200 pages"
    assert row.locator(".doc-progress progress").evaluate("p => [p.value, p.max]") == [12, 200]
    assert row.locator(".doc-notes li").inner_text() == hostile
    assert page.locator("img[src='x']").count() == 0
    page.unroute(f"**/v1/collections/{console.collection_id}/documents?*")

    console.goto("#/search")
    page.wait_for_selector(f".view-search select[name=collection] option[value='{console.collection_id}']",
                           state="attached")
    page.select_option(".view-search select[name=collection]", console.collection_id)
    page.fill(".view-search input[name=query]", QUESTION)
    page.click(".view-search button[type=submit]")
    job = page.locator("article.job").first
    job.wait_for()
    job_id = job.get_attribute("data-job")
    page.wait_for_selector(f"article.job[data-job='{job_id}'][data-status='succeeded'] .source-list", timeout=90_000)

    with console.http() as http:
        response = http.get(f"/v1/jobs/{job_id}").json()["response"]
    n = next(i for i, s in enumerate(response["sources"], start=1) if s["document_id"] == "brightwater-brief")
    assert response["sources"][n - 1]["location"] == {"page": 2}
    assert f"[{n}]" in response["answer"] and "4,812" in response["answer"]

    # Beside the source in the list, and beside its title in the panel a citation of it opens.
    source = job.locator(".source-list li").nth(n - 1)
    assert source.inner_text().startswith("Brightwater brief, p. 2 ")
    assert source.locator(".source-location").inner_text() == ", p. 2"
    job.locator(f".answer .cite[data-source='{n}']").first.click()
    panel = job.locator(".citation-panel")
    panel.locator(".passage mark").wait_for()
    assert panel.locator(".citation-title").inner_text() == "Brightwater brief"
    assert panel.locator(".citation-location").inner_text() == ", p. 2"
    assert panel.locator(".passage mark").inner_text() == FACT  # the checked sentence, on its page
    console.shoot("job-locations")
