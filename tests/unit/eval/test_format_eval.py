"""The format-invariance evaluation (``agentsearch.pipeline.eval.format_invariance``): its scoring on hand-made job
responses, and its files (``agentsearch.pipeline.eval.article_files``) read back by readers other than the project's
own, one paragraph per page, slide, row or section."""

from __future__ import annotations

import csv
import json
import subprocess

import pytest

from agentsearch.pipeline.eval.article_files import FORMATS, Article, load_articles, load_questions, render, wrap
from agentsearch.pipeline.eval.format_invariance import (
    Asked,
    baseline_jsonl,
    gold_place,
    place_found,
    ratio,
    score_baseline,
    score_format,
    sources_of,
    upload_batches,
)

ARTICLE = Article("a07", "Fresno,_California", (
    ("a07p0", "Fresno is the fifth most populous city in California & the county seat of Fresno County."),
    ("a07p1", " ".join(["The city's <name> comes from the Spanish word for the ash trees by the river."] * 12)),
    ("a07p2", "Fresno has a semi-arid climate with hot dry summers and cool winters."),
))
NAMES = {"a07": "Fresno,_California", "a08": "Kenya"}


def job(*sources: tuple[str, dict | None], status: str = "succeeded") -> dict:
    return {"status": status, "response": {"sources": [{"document_id": d, "title": d, "score": 1.0, "location": loc}
                                                       for d, loc in sources]}}


def asked(gold: str, *sources: tuple[str, dict | None], status: str = "succeeded") -> Asked:
    return Asked(f"q-{gold}-{len(sources)}", f"question about {gold}", gold, sources_of(job(*sources, status=status)))


# -- scoring ----------------------------------------------------------------------------------------------------------

def test_the_gold_place_of_each_kind_of_file():
    assert gold_place("pdf", 0) == gold_place("scan", 0) == gold_place("scan-ru", 0) == {"page": 1}
    assert gold_place("pptx", 2) == {"slide": 3}
    assert gold_place("xlsx", 0) == gold_place("csv", 0) == {"row": 2}   # under the header row
    assert gold_place("markdown", 4) == {"section": "Part 5"}
    with pytest.raises(ValueError):
        gold_place("epub", 0)


@pytest.mark.parametrize(("file_format", "index", "location", "found"), [
    ("pdf", 1, {"page": 2}, True),
    ("pdf", 1, {"page": 3}, False),
    ("pdf", 1, None, False),
    ("pptx", 0, {"slide": 1}, True),
    ("pptx", 0, {"page": 1}, False),
    ("xlsx", 2, {"sheet": "Paragraphs", "row": 4}, True),
    ("csv", 2, {"sheet": "Fresno", "rows": [3, 5]}, True),       # a chunk of rows that holds it
    ("csv", 2, {"sheet": "Fresno", "rows": [5, 6]}, False),
    ("docx", 1, {"section": "Fresno, California > Part 2"}, True),  # the title above the heading
    ("html", 1, {"section": "Part 2"}, True),
    ("markdown", 1, {"section": "Part 20"}, False),
    ("markdown", 1, {}, False),
])
def test_a_source_is_at_the_gold_place_only_at_its_page_slide_row_or_last_heading(file_format, index, location,
                                                                                   found):
    assert place_found(file_format, index, location) is found


def test_a_format_scores_the_gold_place_in_the_top_five_and_tells_the_misses_apart():
    responses = [
        asked("a07p1", ("Kenya", {"page": 4}), ("Fresno,_California", {"page": 2})),     # found, second
        asked("a07p0", ("Fresno,_California", {"page": 3}), ("Kenya", {"page": 1})),     # the article, another page
        asked("a08p3", ("Fresno,_California", {"page": 4})),                              # not the article
        asked("a08p0", *[(f"d{i}", {"page": 1}) for i in range(5)], ("Kenya", {"page": 1})),  # sixth: not counted
        asked("a08p0", status="failed"),
    ]
    score = score_format("pdf", responses, NAMES)
    assert (score["questions"], score["found"], score["fraction"]) == (5, 1, 0.2)
    assert score["article_fraction"] == 0.4 and score["article_at_wrong_place"] == 1
    assert score["wrong_places"] == {"page 3": 1} and score["failed_jobs"] == 1
    first_miss = score["missed_examples"][0]
    assert first_miss["gold"] == {"document_id": "Fresno,_California", "page": 1}
    assert first_miss["found"][0] == {"document_id": "Fresno,_California", "location": {"page": 3}}
    assert len(score["missed_examples"]) == 3   # a failed job is counted, not shown


def test_the_baseline_scores_the_gold_paragraph_and_the_ratio_divides_by_it():
    responses = [
        asked("a07p1", ("a08p0", None), ("a07p1", None)),
        asked("a07p2", ("a07p0", None), ("a08p1", None)),     # its article, not its paragraph
        asked("a08p2", ("a08p2", None)),
        asked("a08p4", ("a07p4", None)),
    ]
    base = score_baseline(responses)
    assert (base["found"], base["fraction"], base["article_fraction"]) == (2, 0.5, 0.75)
    assert base["best_of_article_fraction"] == 0.5
    assert ratio({"fraction": 0.45}, base) == 0.9
    assert ratio({"fraction": 0.45}, {"fraction": 0.0}) is None


def test_misses_are_compared_with_the_baseline_ranking_of_the_same_question():
    baseline = {q.question_id: q for q in [
        asked("a07p1", ("a07p0", None), ("a07p1", None)),        # another paragraph of the article first
        asked("a07p2", ("a07p2", None)),
        asked("a08p0", ("a07p3", None)),
    ]}
    ids = list(baseline)
    responses = [
        Asked(ids[0], "q", "a07p1", (("Fresno,_California", {"page": 1}),)),     # as ranked in the baseline
        Asked(ids[1], "q", "a07p2", (("Fresno,_California", {"page": 2}),)),     # the format's own miss
        Asked(ids[2], "q", "a08p0", (("Kenya", {"page": 1}),)),                  # found where the baseline did not
    ]
    score = score_format("pdf", responses, NAMES, baseline=baseline)
    assert score["article_at_wrong_place"] == 2 and score["wrong_place_as_in_baseline"] == 1
    assert (score["lost_against_baseline"], score["gained_against_baseline"]) == (2, 1)
    assert score["missed_examples"][0]["baseline_top"] == ["a07p0", "a07p1"]


def test_a_job_that_did_not_succeed_has_no_sources():
    assert sources_of(job(("Kenya", {"page": 1}))) == (("Kenya", {"page": 1}),)
    assert sources_of(job(("Kenya", {"page": 1}), status="failed")) is None


def test_articles_and_questions_are_read_from_the_beir_layout(tmp_path):
    rows = [{"_id": f"a0{a}p{p}", "title": f"T{a}", "text": f"\ufeffarticle {a} paragraph {p}"}
            for a in (1, 0) for p in (1, 0)]
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "queries.jsonl").write_text("".join(json.dumps({"_id": f"q{i}", "text": f"Q{i}?"}) + "\n"
                                                    for i in range(4)))
    (tmp_path / "qrels").mkdir()
    (tmp_path / "qrels" / "dev.tsv").write_text("query-id\tcorpus-id\tscore\n"
                                                + "".join(f"q{i}\ta0{i // 2}p{i % 2}\t1\n" for i in range(4)))
    articles = load_articles(tmp_path / "corpus.jsonl")
    assert [a.id for a in articles] == ["a00", "a01"]
    assert articles[0].paragraphs == (("a00p0", "article 0 paragraph 0"), ("a00p1", "article 0 paragraph 1"))
    assert load_questions(tmp_path)[3] == ("q3", "Q3?", "a01p1")
    assert [q for q, _, _ in load_questions(tmp_path, limit=2)] == ["q0", "q2"]   # spread over the articles
    lines = [json.loads(line) for line in baseline_jsonl(articles).decode().splitlines()]
    assert lines[0] == {"id": "a00p0", "title": "T0", "text": "article 0 paragraph 0"} and len(lines) == 4


def test_uploads_are_cut_into_requests_of_at_most_so_many_files_and_bytes():
    files = [(f"f{i}", b"x" * size) for i, size in enumerate([4, 4, 4, 9, 1, 1, 1])]
    batches = upload_batches(files, most_files=3, most_bytes=10)
    assert [[name for name, _ in batch] for batch in batches] == [["f0", "f1"], ["f2"], ["f3", "f4"], ["f5", "f6"]]


def test_words_wrap_within_the_room():
    assert wrap("aa bb cc dd", len, 5) == ["aa bb", "cc dd"]
    assert wrap("a verylongword b", len, 5) == ["a", "verylongword", "b"]
    assert wrap("", len, 5) == []


# -- the renderers, read back by other readers ------------------------------------------------------------------------

def texts() -> list[str]:
    return [text for _, text in ARTICLE.paragraphs]


def test_every_format_has_a_renderer_named_after_the_article(tmp_path):
    for file_format in FORMATS:
        if file_format.startswith("scan"):
            continue  # drawn in a test of their own
        path = render(ARTICLE, file_format, tmp_path / file_format)
        assert path.stem == "Fresno,_California" and path.stat().st_size > 0


def pages_of(path) -> int:
    info = subprocess.run(["pdfinfo", str(path)], capture_output=True, text=True, check=True).stdout
    return int(next(line.split()[1] for line in info.splitlines() if line.startswith("Pages:")))


def test_a_pdf_has_one_paragraph_per_page(tmp_path):
    path = render(ARTICLE, "pdf", tmp_path)
    for number, text in enumerate(texts(), start=1):
        page = subprocess.run(["pdftotext", "-f", str(number), "-l", str(number), str(path), "-"],
                              capture_output=True, text=True, check=True).stdout
        assert " ".join(page.split()) == " ".join(text.split())
    info = subprocess.run(["pdfinfo", str(path)], capture_output=True, text=True, check=True).stdout
    assert pages_of(path) == 3 and "Fresno, California" in info


def test_a_word_file_has_a_heading_and_its_paragraph_per_paragraph(tmp_path):
    from docx import Document

    paragraphs = Document(str(render(ARTICLE, "docx", tmp_path))).paragraphs
    assert (paragraphs[0].style.name, paragraphs[0].text) == ("Title", "Fresno, California")
    pairs = [(paragraphs[i].style.name, paragraphs[i].text, paragraphs[i + 1].text) for i in range(1, 7, 2)]
    assert pairs == [("Heading 1", f"Part {n}", text) for n, text in enumerate(texts(), start=1)]


def test_a_deck_has_one_slide_per_paragraph(tmp_path):
    from pptx import Presentation

    slides = Presentation(str(render(ARTICLE, "pptx", tmp_path))).slides
    assert [s.shapes.title.text for s in slides] == ["Fresno, California"] * 3
    assert [s.placeholders[1].text_frame.text for s in slides] == texts()


def test_a_sheet_and_a_csv_file_have_a_header_and_one_row_per_paragraph(tmp_path):
    from openpyxl import load_workbook

    sheet = load_workbook(render(ARTICLE, "xlsx", tmp_path)).active
    assert sheet.title == "Paragraphs"
    rows = [tuple(c.value for c in row) for row in sheet.iter_rows()]
    assert rows == [("paragraph", "text"), *((n, t) for n, t in enumerate(texts(), start=1))]
    with render(ARTICLE, "csv", tmp_path).open(newline="", encoding="utf-8") as fh:
        assert list(csv.reader(fh)) == [["paragraph", "text"], *([str(n), t] for n, t in enumerate(texts(), start=1))]


def test_a_web_page_has_one_h2_section_per_paragraph_inside_its_boilerplate(tmp_path):
    from lxml import html as lxml_html

    tree = lxml_html.parse(str(render(ARTICLE, "html", tmp_path)))
    sections = tree.xpath("//main//section")
    assert [(s.findtext("h2"), s.findtext("p")) for s in sections] == [(f"Part {n}", t)
                                                                       for n, t in enumerate(texts(), start=1)]
    assert tree.xpath("//nav") and tree.xpath("//footer") and tree.findtext(".//h1") == "Fresno, California"


def test_a_markdown_file_has_one_section_per_paragraph(tmp_path):
    content = render(ARTICLE, "markdown", tmp_path).read_text(encoding="utf-8")
    title, *sections = content.split("\n## ")
    assert title.strip() == "# Fresno, California"
    assert [[p.strip() for p in s.split("\n\n", 1)] for s in sections] == [[f"Part {n}", t]
                                                                        for n, t in enumerate(texts(), start=1)]


def test_a_scanned_pdf_is_one_image_per_paragraph_that_ocr_reads_back(tmp_path):
    path = render(ARTICLE, "scan", tmp_path)
    assert pages_of(path) == 3
    assert not subprocess.run(["pdftotext", str(path), "-"], capture_output=True, text=True).stdout.strip()
    subprocess.run(["pdftoppm", "-r", "150", "-f", "2", "-l", "2", "-png", str(path), str(tmp_path / "page")],
                   check=True)
    image = next(tmp_path.glob("page*.png"))
    read = subprocess.run(["tesseract", str(image), "-", "-l", "eng"], capture_output=True, text=True,
                          check=True).stdout
    wanted = texts()[1].split()
    seen = set(read.split())
    assert sum(word in seen for word in wanted) / len(wanted) > 0.9


def test_the_parse_bench_reads_task_times_from_a_worker_log():
    from agentsearch.bench.parse import task_seconds

    lines = [
        "INFO celery.app.trace: Task agentsearch.parse_document[c053-e9] succeeded in 0.7163s: {'status': 'parsed'}",
        "INFO celery.app.trace: Task agentsearch.ingest_documents[05a1-de] succeeded in 2.5s: {'indexed': 1}",
        "INFO celery.app.trace: Task agentsearch.core_search[16ec-93] succeeded in 0.23s: {}",
        "INFO celery.worker.strategy: Task agentsearch.parse_document[c053-e9] received",
    ]
    assert task_seconds(lines) == {"parse_document": [0.7163], "ingest_documents": [2.5]}
