"""XQuAD's articles as files of every format the format-invariance evaluation uploads
(``agentsearch.pipeline.eval.format_invariance``): read from the corpus, then rendered one paragraph per place.

Each article becomes one file of each format: a page of a PDF, a page of a scanned PDF (an image drawn at 150 dpi,
turned a little and speckled, no text layer), a slide, a row of a sheet or CSV file under a header row, a heading
section ("Part k") of a Word, HTML or Markdown file.

Usage::

    articles = load_articles(XQUAD / "en" / "corpus.jsonl")
    render(articles[0], "docx", Path("out"))                        # Path("out/Super_Bowl_50.docx")
"""

from __future__ import annotations

import csv
import html
import io
import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Born-digital formats, the scanned English pages, and the scanned Russian pages (XQuAD ru, the same ids).
FORMATS = ("pdf", "docx", "pptx", "xlsx", "csv", "html", "markdown", "scan", "scan-ru")
SCANS = ("scan", "scan-ru")
EXTENSIONS = {"pdf": ".pdf", "docx": ".docx", "pptx": ".pptx", "xlsx": ".xlsx", "csv": ".csv", "html": ".html",
              "markdown": ".md", "scan": ".pdf", "scan-ru": ".pdf"}
SHEET = "Paragraphs"
HEADER = ("paragraph", "text")
# Scans: US Letter at 150 dpi, one-inch margins.
SCAN_DPI = 150
FONT_PATHS = ("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", "/usr/share/fonts/dejavu/DejaVuSans.ttf")
PARAGRAPH_ID = re.compile(r"^(?P<article>.+)p(?P<index>\d+)$")

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
    found = PARAGRAPH_ID.match(paragraph_id)
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
    from agentsearch.pipeline.eval.retrieval import load_beir_queries, load_qrels

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
    # A scanned page's tilt and noise, the same for a seed on every run: no secret, so random's generator.
    chance = random.Random(seed)  # noqa: S311
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
