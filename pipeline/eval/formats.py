"""Format invariance: the same paragraphs found as well in uploaded files of every format as when each paragraph
is a JSON Lines document of its own.

XQuAD's paragraphs come in articles of five (ids ``a00p0`` .. ``a00p4``, one ``title`` per article). Each article is
rendered into one file of each format, one paragraph per place: a page of a PDF, a page of a scanned PDF (an image
drawn at 150 dpi, turned a little and speckled, no text layer), a slide, a row of a sheet or CSV file under a header
row, a heading section ("Part k") of a Word, HTML or Markdown file. The files are uploaded to a real stack, a
collection per format, and every development question is asked as a job (``POST /v1/search``, no agents, top 5).

A question is found in a format when its gold place is among the top-5 sources: the article's file
(``document_id``, the file's name without its extension) at the gold paragraph's page, slide, row or section. A
source is one per document, at its best chunk, so finding the article at another paragraph's place is a miss. The
score of a format is that fraction divided by the baseline's: the fraction of questions whose gold paragraph is
among the top 5 when every paragraph is uploaded as a JSON Lines document of its own, on the same stack.

Usage::

    articles = load_articles(XQUAD / "en" / "corpus.jsonl")
    render(articles[0], "docx", Path("out"))                        # Path("out/Super_Bowl_50.docx")
    place_found("xlsx", 3, {"sheet": "Paragraphs", "rows": [4, 5]}) # True: the row of paragraph 3 is row 5
    report = run_on_stack(Path("/tmp/formats"), ["pdf", "docx"], questions=200)
"""

from __future__ import annotations

import csv
import html
import io
import json
import random
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
XQUAD = REPO.parent / "shared" / "eval" / "xquad"
TOP_K = 5
# Born-digital formats, the scanned English pages, and the scanned Russian pages (XQuAD ru, the same ids).
FORMATS = ("pdf", "docx", "pptx", "xlsx", "csv", "html", "markdown", "scan", "scan-ru")
SCANS = ("scan", "scan-ru")
EXTENSIONS = {"pdf": ".pdf", "docx": ".docx", "pptx": ".pptx", "xlsx": ".xlsx", "csv": ".csv", "html": ".html",
              "markdown": ".md", "scan": ".pdf", "scan-ru": ".pdf"}
GOALS = {"born_digital": 0.95, "scan": 0.90}
SHEET = "Paragraphs"
HEADER = ("paragraph", "text")
# The place of paragraph k (0-based) in each kind of file.
PAGED = {"pdf": "page", "scan": "page", "scan-ru": "page", "pptx": "slide"}
ROWS = ("xlsx", "csv")
SECTIONS = ("docx", "html", "markdown")
# Scans: US Letter at 150 dpi, one-inch margins.
SCAN_DPI = 150
FONT_PATHS = ("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", "/usr/share/fonts/dejavu/DejaVuSans.ttf")
UPLOAD_FILES = 20
UPLOAD_BYTES = 60 * 2**20
_PARAGRAPH_ID = re.compile(r"^(?P<article>.+)p(?P<index>\d+)$")


# -- the data ---------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Article:
    """An XQuAD article: its ``name`` (the corpus's title, ``Super_Bowl_50``: the files' name, so the document id)
    and its paragraphs in order, as ``(paragraph id, text)``."""

    id: str
    name: str
    paragraphs: tuple[tuple[str, str], ...]

    @property
    def title(self) -> str:
        return self.name.replace("_", " ")


def heading(index: int) -> str:
    """The heading of paragraph ``index`` (0-based) in the sectioned formats."""
    return f"Part {index + 1}"


def split_paragraph_id(paragraph_id: str) -> tuple[str, int]:
    """``("a07", 3)`` for ``"a07p3"``."""
    found = _PARAGRAPH_ID.match(paragraph_id)
    if found is None:
        raise ValueError(f"{paragraph_id!r} is not an XQuAD paragraph id (a<article>p<paragraph>)")
    return found["article"], int(found["index"])


def load_articles(corpus: Path) -> list[Article]:
    """The corpus's paragraphs grouped by article, in the order of their ids."""
    grouped: dict[str, dict[int, str]] = {}
    names: dict[str, str] = {}
    for line in corpus.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        article, index = split_paragraph_id(row["_id"])
        grouped.setdefault(article, {})[index] = row["text"].lstrip("\ufeff").strip()
        names.setdefault(article, row.get("title") or article)
    return [Article(a, names[a], tuple((f"{a}p{i}", grouped[a][i]) for i in sorted(grouped[a])))
            for a in sorted(grouped)]


def load_questions(folder: Path, limit: int | None = None) -> list[tuple[str, str, str]]:
    """``(question id, text, gold paragraph id)`` of the folder's development questions, in the qrels' order; with
    ``limit``, that many spread evenly over them (the questions come article by article)."""
    from pipeline.eval.retrieval import load_beir_queries, load_qrels

    texts = load_beir_queries(folder / "queries.jsonl")
    judged = load_qrels(folder / "qrels" / "dev.tsv")
    asked = [(q, texts[q], next(iter(gold))) for q, gold in judged.items() if q in texts]
    if not limit or limit >= len(asked):
        return asked
    return [asked[i * len(asked) // limit] for i in range(limit)]


# -- the renderers ----------------------------------------------------------------------------------------------------

def render_pdf(article: Article, path: Path) -> Path:
    """A born-digital PDF: one paragraph per page, the article's title in the document's properties."""
    from reportlab.lib.pagesizes import letter
    from reportlab.lib.styles import getSampleStyleSheet
    from reportlab.platypus import PageBreak, Paragraph, SimpleDocTemplate

    style = getSampleStyleSheet()["BodyText"]
    flow: list[Any] = []
    for number, (_, text) in enumerate(article.paragraphs):
        if number:
            flow.append(PageBreak())
        flow.append(Paragraph(html.escape(text), style))
    SimpleDocTemplate(str(path), pagesize=letter, title=article.title, author="XQuAD").build(flow)
    return path


def render_docx(article: Article, path: Path) -> Path:
    """A Word file: the title, then a heading ("Part k") and its paragraph for each paragraph."""
    from docx import Document

    document = Document()
    document.core_properties.title = article.title
    document.add_heading(article.title, level=0)
    for number, (_, text) in enumerate(article.paragraphs):
        document.add_heading(heading(number), level=1)
        document.add_paragraph(text)
    document.save(str(path))
    return path


def render_pptx(article: Article, path: Path) -> Path:
    """A deck: one slide per paragraph, the article's title as each slide's title."""
    from pptx import Presentation
    from pptx.util import Pt

    deck = Presentation()
    deck.core_properties.title = article.title
    for _, text in article.paragraphs:
        slide = deck.slides.add_slide(deck.slide_layouts[1])  # title and content
        slide.shapes.title.text = article.title
        body = slide.placeholders[1].text_frame
        body.text = text
        for paragraph in body.paragraphs:
            for run in paragraph.runs:
                run.font.size = Pt(12)
    deck.save(str(path))
    return path


def rows_of(article: Article) -> list[tuple[Any, ...]]:
    """A sheet's rows: the header, then the paragraph's number and text, one row per paragraph."""
    return [HEADER, *((number + 1, text) for number, (_, text) in enumerate(article.paragraphs))]


def render_xlsx(article: Article, path: Path) -> Path:
    from openpyxl import Workbook

    book = Workbook()
    sheet = book.active
    sheet.title = SHEET
    for row in rows_of(article):
        sheet.append(list(row))
    book.properties.title = article.title
    book.save(str(path))
    return path


def render_csv(article: Article, path: Path) -> Path:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\r\n").writerows(rows_of(article))
    path.write_text(buffer.getvalue(), encoding="utf-8")
    return path


_HTML_PAGE = """<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>{title} - Encyclopedia</title>
<link rel="stylesheet" href="/static/site.css"><script src="/static/analytics.js"></script></head>
<body>
<header class="site-header"><a class="logo" href="/">Encyclopedia</a>
<nav><ul><li><a href="/">Home</a></li><li><a href="/articles">All articles</a></li><li><a href="/random">Random
article</a></li><li><a href="/about">About us</a></li><li><a href="/contact">Contact</a></li></ul></nav>
<form action="/search"><input name="q" placeholder="Search the encyclopedia"><button>Search</button></form>
</header>
<div class="layout">
<aside class="sidebar"><h3>Contents</h3><ol>{contents}</ol><p>Share this page: Facebook, Twitter, e-mail.</p></aside>
<main>
<article>
<h1>{title}</h1>
{sections}
</article>
</main>
</div>
<footer><p>Text is available under the Creative Commons Attribution-ShareAlike License; additional terms may apply.
</p><p><a href="/privacy">Privacy policy</a> | <a href="/terms">Terms of use</a> | <a href="/cookies">Cookie
settings</a></p><p>We use cookies to improve your experience. By continuing you accept our use of cookies.</p>
</footer>
</body>
</html>
"""


def render_html(article: Article, path: Path) -> Path:
    """A web page: navigation, a sidebar and a footer around the article, one <h2> section per paragraph."""
    title = html.escape(article.title)
    contents = "".join(f'<li><a href="#part-{n + 1}">{heading(n)}</a></li>' for n in range(len(article.paragraphs)))
    sections = "\n".join(f'<section id="part-{n + 1}"><h2>{heading(n)}</h2>\n<p>{html.escape(text)}</p></section>'
                         for n, (_, text) in enumerate(article.paragraphs))
    path.write_text(_HTML_PAGE.format(title=title, contents=contents, sections=sections), encoding="utf-8")
    return path


def render_markdown(article: Article, path: Path) -> Path:
    sections = "".join(f"## {heading(n)}\n\n{text}\n\n" for n, (_, text) in enumerate(article.paragraphs))
    path.write_text(f"# {article.title}\n\n{sections}", encoding="utf-8")
    return path


def font_path() -> str:
    """DejaVu Sans (Latin, Greek and Cyrillic glyphs; Debian's fonts-dejavu-core)."""
    for candidate in FONT_PATHS:
        if Path(candidate).exists():
            return candidate
    raise FileNotFoundError("DejaVu Sans not found: install Debian's fonts-dejavu-core")


def scan_page(text: str, seed: int, dpi: int = SCAN_DPI, font_pt: float = 11, angle_deg: float = 0.7,
              speckle: float = 0.003):
    """A US Letter page as a scanner gives it: ``text`` set in DejaVu Sans within one-inch margins (the size goes
    down until it fits), turned by up to ``angle_deg`` either way, blurred a little and speckled (grayscale)."""
    from PIL import Image, ImageDraw, ImageFilter, ImageFont

    width, height, margin = round(8.5 * dpi), round(11 * dpi), dpi
    size = font_pt
    while True:
        font = ImageFont.truetype(font_path(), round(size * dpi / 72))
        lines = wrap(text, font.getlength, width - 2 * margin)
        leading = round(size * 1.35 * dpi / 72)
        if len(lines) * leading <= height - 2 * margin or size <= 7:
            break
        size -= 0.5
    page = Image.new("L", (width, height), 255)
    draw = ImageDraw.Draw(page)
    for number, line in enumerate(lines):
        draw.text((margin, margin + number * leading), line, font=font, fill=25)
    chance = random.Random(seed)
    page = page.rotate(chance.uniform(-angle_deg, angle_deg), resample=Image.Resampling.BICUBIC, fillcolor=255)
    page = page.filter(ImageFilter.GaussianBlur(0.5))
    noise = Image.frombytes("L", page.size, chance.randbytes(width * height))
    dark = noise.point(lambda v: 255 if v < round(speckle * 256) else 0)
    return Image.composite(Image.new("L", page.size, 80), page, dark)


def wrap(text: str, measure: Callable[[str], float], room: float) -> list[str]:
    """``text``'s words in lines no wider than ``room`` as ``measure`` counts (a longer word alone on its line)."""
    lines: list[str] = []
    current = ""
    for word in text.split():
        candidate = f"{current} {word}" if current else word
        if current and measure(candidate) > room:
            lines.append(current)
            candidate = word
        current = candidate
    return [*lines, current] if current else lines


def render_scan(article: Article, path: Path, dpi: int = SCAN_DPI) -> Path:
    """A scanned PDF: one page image per paragraph, no text layer."""
    pages = [scan_page(text, seed=hash_seed(pid), dpi=dpi) for pid, text in article.paragraphs]
    pages[0].save(path, "PDF", resolution=dpi, save_all=True, append_images=pages[1:], title=article.title)
    return path


def hash_seed(text: str) -> int:
    """A seed of ``text`` that is the same in every process (``hash`` of a str is not)."""
    return int.from_bytes(text.encode("utf-8")[-8:].rjust(8, b"\0"), "big")


RENDERERS: dict[str, Callable[[Article, Path], Path]] = {
    "pdf": render_pdf, "docx": render_docx, "pptx": render_pptx, "xlsx": render_xlsx, "csv": render_csv,
    "html": render_html, "markdown": render_markdown, "scan": render_scan, "scan-ru": render_scan,
}


def render(article: Article, file_format: str, folder: Path) -> Path:
    """The article as a file of ``file_format`` in ``folder``, named after the article."""
    folder.mkdir(parents=True, exist_ok=True)
    return RENDERERS[file_format](article, folder / f"{article.name}{EXTENSIONS[file_format]}")


# -- scoring ----------------------------------------------------------------------------------------------------------

def gold_place(file_format: str, index: int) -> dict[str, Any]:
    """Where paragraph ``index`` (0-based) of an article is in its file of ``file_format``."""
    if file_format in PAGED:
        return {PAGED[file_format]: index + 1}
    if file_format in ROWS:
        return {"row": index + 2}  # under the header row
    if file_format in SECTIONS:
        return {"section": heading(index)}
    raise ValueError(f"unknown format {file_format!r}")


def place_found(file_format: str, index: int, location: dict[str, Any] | None) -> bool:
    """Whether a source's ``location`` is paragraph ``index``'s place: the same page or slide; the same row, or a
    chunk of rows that holds it (the sheet is not compared: every file has one); a section whose last heading is the
    paragraph's (the article's title may stand above it)."""
    location = location or {}
    want = gold_place(file_format, index)
    if "row" in want:
        rows = location.get("rows")
        if isinstance(rows, list | tuple) and len(rows) == 2:
            return rows[0] <= want["row"] <= rows[1]
        return location.get("row") == want["row"]
    if "section" in want:
        return str(location.get("section") or "").split(" > ")[-1].strip() == want["section"]
    key = next(iter(want))
    return location.get(key) == want[key]


@dataclass(frozen=True)
class Asked:
    """One question asked of a collection: its gold paragraph, and the job's top sources as
    ``(document_id, location)``, best first (``None`` when the job failed)."""

    question_id: str
    text: str
    gold: str
    sources: tuple[tuple[str, dict[str, Any] | None], ...] | None


def sources_of(job: dict[str, Any]) -> tuple[tuple[str, dict[str, Any] | None], ...] | None:
    """A finished job's ``(document_id, location)`` pairs, best first; None for a job that did not succeed."""
    if job.get("status") != "succeeded":
        return None
    return tuple((s["document_id"], s.get("location")) for s in (job.get("response") or {}).get("sources") or [])


def best_of_article(question: Asked, k: int = TOP_K) -> str | None:
    """The first paragraph of the gold paragraph's article among a baseline question's top ``k`` (None if none):
    what the baseline's ranking says when, as with files, a document gives one source, its best chunk."""
    article = split_paragraph_id(question.gold)[0]
    return next((d for d, _ in (question.sources or ())[:k]
                 if _PARAGRAPH_ID.match(d) and split_paragraph_id(d)[0] == article), None)


def score_baseline(asked: Iterable[Asked], k: int = TOP_K) -> dict[str, Any]:
    """The share of questions whose gold paragraph is among the top ``k`` paragraphs; whose gold article is (a
    paragraph of it); and whose gold paragraph is its article's first paragraph there (``best_of_article``)."""
    found = article = first = failed = total = 0
    for question in asked:
        total += 1
        if question.sources is None:
            failed += 1
            continue
        found += question.gold in [document for document, _ in question.sources[:k]]
        best = best_of_article(question, k)
        article += best is not None
        first += best == question.gold
    return {"questions": total, "found": found, "fraction": _share(found, total),
            "article_fraction": _share(article, total), "best_of_article_fraction": _share(first, total),
            "failed_jobs": failed}


def score_format(file_format: str, asked: Iterable[Asked], names: dict[str, str], k: int = TOP_K,
                 examples: int = 8, baseline: dict[str, Asked] | None = None) -> dict[str, Any]:
    """The share of questions whose gold place (the article's document at the paragraph's place) is among the top
    ``k`` sources; misses told apart: the article found at another place (with the places found), or not found.
    With the ``baseline``'s questions (by id): of the misses at another place, how many the baseline ranks the same
    way (another paragraph of the article before the gold one: lost because a document gives one source), and the
    questions the baseline finds and the format does not, and the other way round."""
    found = wrong_place = failed = total = sibling_first = lost = gained = 0
    places: dict[str, int] = {}
    missed: list[dict[str, Any]] = []
    for question in asked:
        total += 1
        if question.sources is None:
            failed += 1
            continue
        article, index = split_paragraph_id(question.gold)
        document = names[article]
        at_article = [location for d, location in question.sources[:k] if d == document]
        hit = any(place_found(file_format, index, location) for location in at_article)
        base = (baseline or {}).get(question.question_id)
        base_hit = base is not None and question.gold in [d for d, _ in (base.sources or ())[:k]]
        lost += base_hit and not hit
        gained += hit and base is not None and not base_hit
        if hit:
            found += 1
            continue
        if at_article:
            wrong_place += 1
            what = _place_name(at_article[0])
            places[what] = places.get(what, 0) + 1
            sibling_first += base is not None and best_of_article(base, k) not in (None, question.gold)
        if len(missed) < examples:
            missed.append({"question": question.text, "gold": {"document_id": document,
                                                               **gold_place(file_format, index)},
                           "found": [{"document_id": d, "location": location}
                                     for d, location in question.sources[:k]],
                           **({"baseline_top": [d for d, _ in (base.sources or ())[:k]]} if base else {})})
    return {"questions": total, "found": found, "fraction": _share(found, total),
            "article_fraction": _share(found + wrong_place, total),
            "article_at_wrong_place": wrong_place, "wrong_places": dict(sorted(places.items())),
            "wrong_place_as_in_baseline": sibling_first, "lost_against_baseline": lost,
            "gained_against_baseline": gained, "failed_jobs": failed, "missed_examples": missed}


def ratio(format_score: dict[str, Any], baseline_score: dict[str, Any]) -> float | None:
    """A format's fraction over the baseline's (None when the baseline found nothing)."""
    base = baseline_score["fraction"]
    return round(format_score["fraction"] / base, 4) if base else None


def goal_of(file_format: str) -> float:
    return GOALS["scan"] if file_format in SCANS else GOALS["born_digital"]


def _share(part: int, whole: int) -> float:
    return round(part / whole, 4) if whole else 0.0


def _place_name(location: dict[str, Any] | None) -> str:
    """A location as a short key: ``page 2``, ``rows 3-4``, ``section Super Bowl 50``, ``none``."""
    if not location:
        return "none"
    if "rows" in location:
        return f"rows {location['rows'][0]}-{location['rows'][1]}"
    key = next((k for k in ("page", "slide", "row", "section") if k in location), None)
    return f"{key} {location[key]}" if key else json.dumps(location, sort_keys=True)


# -- the run on a stack -----------------------------------------------------------------------------------------------

def language_of(file_format: str) -> str:
    return "ru" if file_format == "scan-ru" else "en"


def baseline_jsonl(articles: list[Article]) -> bytes:
    """Every paragraph as a JSON Lines document of its own, with its article's title."""
    return "".join(json.dumps({"id": pid, "title": a.title, "text": text}, ensure_ascii=False) + "\n"
                   for a in articles for pid, text in a.paragraphs).encode("utf-8")


def upload_batches(files: list[tuple[str, bytes]], most_files: int = UPLOAD_FILES,
                   most_bytes: int = UPLOAD_BYTES) -> list[list[tuple[str, bytes]]]:
    """``files`` in order, as requests of at most ``most_files`` files and ``most_bytes`` each (a larger file alone)."""
    batches: list[list[tuple[str, bytes]]] = []
    for item in files:
        full = bool(batches) and (len(batches[-1]) == most_files
                                  or sum(len(d) for _, d in batches[-1]) + len(item[1]) > most_bytes)
        if not batches or full:
            batches.append([])
        batches[-1].append(item)
    return batches


def upload(http, name: str, files: list[tuple[str, bytes]], timeout_s: float = 7200, poll_s: float = 1.0
           ) -> dict[str, Any]:
    """A new collection with ``files`` uploaded (requests of at most ``UPLOAD_FILES`` files and ``UPLOAD_BYTES``),
    waited for until no document is pending: its id, the documents' counts and the seconds it took."""
    created = http.post("/v1/collections", json={"name": name})
    created.raise_for_status()
    collection_id = created.json()["id"]
    started = time.monotonic()
    for batch in upload_batches(files):
        answer = http.post(f"/v1/collections/{collection_id}/files",
                           files=[("files", (file_name, data)) for file_name, data in batch])
        if answer.status_code != 202:
            raise RuntimeError(f"{name}: upload refused ({answer.status_code}): {answer.text[:500]}")
    deadline = time.monotonic() + timeout_s
    while True:
        counts = http.get(f"/v1/collections/{collection_id}").json()["documents"]
        if counts["pending"] == 0:
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"{name}: indexing stuck: {counts}")
        time.sleep(poll_s)
    failed = []
    if counts.get("failed"):
        listed = http.get(f"/v1/collections/{collection_id}/documents", params={"limit": 200}).json()
        failed = [{"document_id": d.get("id") or d.get("external_id"), "error": d.get("error")}
                  for d in listed.get("items", []) if d.get("status") == "failed"]
    return {"collection_id": collection_id, "documents": counts, "failed": failed,
            "seconds": round(time.monotonic() - started, 1)}


def ask_all(http, collection_id: str, questions: list[tuple[str, str, str]], in_flight: int = 4,
            timeout_s: float = 300, progress: Callable[[int], None] | None = None,
            search: dict[str, Any] | None = None) -> list[Asked]:
    """Every question as a job on the collection (no agents, top ``TOP_K``, the job's retrieval overrides
    ``search`` when given), ``in_flight`` at a time."""
    pending: dict[str, tuple[int, float]] = {}
    results: list[Asked | None] = [None] * len(questions)
    next_question = 0
    while next_question < len(questions) or pending:
        while next_question < len(questions) and len(pending) < in_flight:
            _, text, _ = questions[next_question]
            body = {"collection_id": collection_id, "query": text, "top_k": TOP_K, "agents": [], "use_cache": False}
            answer = http.post("/v1/search", json={**body, **({"search": search} if search else {})})
            if answer.status_code not in (200, 202):
                raise RuntimeError(f"search refused ({answer.status_code}): {answer.text[:300]}")
            pending[answer.json()["job_id"]] = (next_question, time.monotonic())
            next_question += 1
        time.sleep(0.05)
        for job_id, (number, sent) in list(pending.items()):
            job = http.get(f"/v1/jobs/{job_id}").json()
            if job["status"] not in ("succeeded", "failed", "cancelled") and time.monotonic() - sent < timeout_s:
                continue
            question_id, text, gold = questions[number]
            results[number] = Asked(question_id, text, gold, sources_of(job))
            del pending[job_id]
            if progress:
                progress(1)
    return [r for r in results if r is not None]


def runs_of(asked: list[Asked]) -> dict[str, Any]:
    """Each question's top sources as JSON (``[[document_id, location], ...]``, null for a failed job)."""
    return {q.question_id: None if q.sources is None else [list(pair) for pair in q.sources] for q in asked}


def run_on_stack(workdir: Path, formats: list[str], questions: int | None = None, xquad: Path = XQUAD,
                 say: Callable[[str], None] = print, search: dict[str, Any] | None = None) -> dict[str, Any]:
    """Render, upload and ask on a stack of its own (one worker of two processes); the report of every format.
    ``search``: retrieval overrides of every job, the baseline's too (``{"strategy": "semantic"}``)."""
    from devstack import DevStack

    started = time.monotonic()
    languages = sorted({language_of(f) for f in formats})
    articles = {lang: load_articles(xquad / lang / "corpus.jsonl") for lang in languages}
    asked_of = {lang: load_questions(xquad / lang, questions) for lang in languages}
    report: dict[str, Any] = {"questions": {lang: len(asked_of[lang]) for lang in languages}, "top_k": TOP_K,
                              "formats": {}, "baseline": {}, "runs": {},
                              "search": search or {}}
    baselines: dict[str, dict[str, Asked]] = {}
    with DevStack(workdir / "stack", workers=1, concurrency=2, user="format-eval") as stack, stack.http() as http:
        for lang in languages:
            indexed = upload(http, f"baseline-{lang}", [(f"xquad-{lang}.jsonl", baseline_jsonl(articles[lang]))])
            say(f"baseline {lang}: {indexed['documents']} in {indexed['seconds']} s")
            asked = ask_all(http, indexed["collection_id"], asked_of[lang], search=search)
            baselines[lang] = {q.question_id: q for q in asked}
            report["runs"][f"baseline-{lang}"] = runs_of(asked)
            report["baseline"][lang] = {**score_baseline(asked), "indexing": indexed}
            say(f"baseline {lang}: {report['baseline'][lang]['fraction']:.4f}")
        for file_format in formats:
            lang = language_of(file_format)
            names = {a.id: a.name for a in articles[lang]}
            began = time.monotonic()
            files = [render(a, file_format, workdir / file_format) for a in articles[lang]]
            rendered_s = time.monotonic() - began
            indexed = upload(http, f"formats-{file_format}", [(p.name, p.read_bytes()) for p in files])
            say(f"{file_format}: rendered in {rendered_s:.1f} s, {indexed['documents']} in {indexed['seconds']} s")
            began = time.monotonic()
            asked = ask_all(http, indexed["collection_id"], asked_of[lang], search=search)
            asked_s = time.monotonic() - began
            report["runs"][file_format] = runs_of(asked)
            scored = score_format(file_format, asked, names, baseline=baselines[lang])
            base = report["baseline"][lang]
            report["formats"][file_format] = {**scored, "ratio": ratio(scored, base), "goal": goal_of(file_format),
                                              "language": lang, "render_s": round(rendered_s, 1),
                                              "ask_s": round(asked_s),
                                              "bytes": sum(p.stat().st_size for p in files), "indexing": indexed}
            say(f"{file_format}: {scored['fraction']:.4f} (article {scored['article_fraction']:.4f}), ratio "
                f"{report['formats'][file_format]['ratio']}")
    report["seconds"] = round(time.monotonic() - started)
    return report
