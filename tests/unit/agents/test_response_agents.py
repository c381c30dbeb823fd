"""The four rendering response agents, each artifact read back with an independent reader.

pptx_generator: python-pptx reopens the deck. pdf_report: poppler's pdftotext and pdfinfo. chart_generator: Pillow
for the PNG, xml.etree for the SVG, plus the extraction of labelled numbers from real sentences. audio_summary:
mutagen decodes the MP3.
"""

from __future__ import annotations

import io
import json
import math
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from mutagen.mp3 import MP3
from PIL import Image
from pptx import Presentation
from pydantic import ValidationError

from pipeline.agents.base import AgentContext, AgentSkipped, CotStep, Document, ResponseAgentInput, Source, Stage
from pipeline.agents.builtin.audio_summary import AudioSummary, EspeakMissing, speech_text
from pipeline.agents.builtin.chart_generator import ChartGenerator, extract_data_points
from pipeline.agents.builtin.pdf_report import PdfReport
from pipeline.agents.builtin.pptx_generator import PptxGenerator
from pipeline.agents.registry import AgentRegistry

CORPUS = Path(__file__).resolve().parents[3] / "examples" / "sample_corpus.jsonl"
QUERY = "What was Northwind Energy's revenue in Q4 2025?"
# What the extractive answer gives for QUERY over the sample corpus (sentences from three quarterly reports).
ANSWER = (
    "Northwind Energy reported Q1 2025 revenue of $301 million, up 12% from $268 million in Q1 2024 [1]. "
    "Q4 2025 revenue reached $412 million, up 18% from Q4 2024, the strongest quarter in Northwind Energy's "
    "history [2]. "
    "Northwind Energy posted third-quarter 2025 revenue of $369 million, up 16% from $318 million in Q3 2024 [3]."
)
SENTENCES = re.split(r"(?<=\.) ", ANSWER)
needs_poppler = pytest.mark.skipif(shutil.which("pdftotext") is None, reason="poppler-utils missing (make services)")
needs_espeak = pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng missing (make services)")


def corpus() -> dict[str, dict]:
    return {d["id"]: d for d in map(json.loads, CORPUS.read_text().splitlines()) if d}


def make_input(answer: str = ANSWER, ids=("nw-2025-q1", "nw-2025-q4", "nw-2025-q3"), **extra) -> ResponseAgentInput:
    docs = corpus()
    scores = [0.780, 0.773, 0.732, 0.707, 0.693]
    documents = [
        Document(id=i, title=docs[i]["title"], text=docs[i]["text"], score=s, metadata=docs[i]["metadata"])
        for i, s in zip(ids, scores)
    ]
    sources = [Source(document_id=d.id, title=d.title, score=d.score) for d in documents]
    fields = dict(
        answer=answer,
        sources=sources,
        query=QUERY,
        documents=documents,
        cot_steps=[
            CotStep(step=1, thought="Retrieved 3 documents; looked for sentences that cover the query terms 2025, "
                                    "energy, northwind, q4, revenue."),
            CotStep(step=2, thought="Chose the 3 best-covering sentences and kept them in source order.",
                    evidence=list(ids)),
        ],
        metadata={"language": "en"},
    )
    fields.update(extra)
    return ResponseAgentInput(**fields)


CTX = AgentContext(pipeline_stage=Stage.RESPONSE, query=QUERY)


def flat(text: str) -> str:
    return " ".join(text.split())


def test_the_four_agents_are_registered_by_entry_point():
    registry = AgentRegistry.discover()
    for cls in (PptxGenerator, PdfReport, ChartGenerator, AudioSummary):
        assert registry.get(cls.agent_id) is cls
        assert cls.stage == Stage.RESPONSE and not cls.cacheable


# ------------------------------------------------------------------------------------------------------ pptx


def deck_text(data: bytes) -> list[str]:
    prs = Presentation(io.BytesIO(data))
    return [flat(" ".join(sh.text_frame.text for sh in slide.shapes if sh.has_text_frame)) for slide in prs.slides]


def test_pptx_has_title_findings_and_sources_slides():
    artifact = PptxGenerator().run(make_input(), CTX)
    assert artifact.filename == "presentation.pptx"
    assert artifact.content_type.endswith("presentationml.presentation")
    prs = Presentation(io.BytesIO(artifact.data))
    slides = list(prs.slides)
    assert len(slides) == artifact.metadata["slides"] == 3
    assert [s.shapes.title.text for s in slides] == [QUERY, "Key findings", "Sources"]
    title, findings, sources = deck_text(artifact.data)
    assert QUERY in title
    for sentence in SENTENCES:  # each finding with its citation marker
        assert sentence in findings
    for n, source in enumerate(make_input().sources, start=1):
        assert f"[{n}] {source.title}" in sources
        assert f"score {source.score:.3f}" in sources
    assert prs.core_properties.title == QUERY
    assert prs.slide_width > prs.slide_height  # 16:9


@pytest.mark.parametrize("max_slides, expected", [(3, 3), (5, 5), (8, 8), (50, 12)])
def test_pptx_never_exceeds_max_slides(max_slides, expected):
    sentences = [f"Finding number {i} says revenue grew in quarter {i} [{i % 3 + 1}]." for i in range(20)]
    inp = make_input(" ".join(sentences))
    artifact = PptxGenerator({"max_slides": max_slides, "findings_per_slide": 2}).run(inp, CTX)
    texts = deck_text(artifact.data)
    # Unlimited, 20 findings at 2 a slide make 10 findings slides, plus the title and sources slides.
    assert len(texts) == artifact.metadata["slides"] == expected <= max_slides
    shown = artifact.metadata["findings"]
    assert shown == 2 * (expected - 2)
    assert artifact.metadata["findings_omitted"] == 20 - shown
    everything = " ".join(texts)
    assert all(s in everything for s in sentences[:shown])
    assert not any(s in everything for s in sentences[shown:])
    if shown < 20:
        assert f"… {20 - shown} more findings in the full answer" in texts[-2]
    else:
        assert "more findings" not in everything
    assert texts[-1].startswith("Sources")


def test_pptx_templates_colour_the_slides_and_unknown_ones_are_refused():
    prs = Presentation(io.BytesIO(PptxGenerator({"template": "dark"}).run(make_input(), CTX).data))
    assert {str(s.background.fill.fore_color.rgb) for s in prs.slides} == {"1E1F29"}
    light = Presentation(io.BytesIO(PptxGenerator({"template": "corporate"}).run(make_input(), CTX).data))
    assert {str(s.background.fill.fore_color.rgb) for s in light.slides} == {"F3F5F7"}
    with pytest.raises(ValidationError, match="template"):
        PptxGenerator({"template": "neon"})
    with pytest.raises(ValidationError, match="max_slides"):
        PptxGenerator({"max_slides": 2})
    with pytest.raises(ValidationError):
        PptxGenerator({"filename": "../deck.pptx"})


def test_pptx_keeps_hostile_text_literal_and_drops_xml_illegal_characters():
    inp = make_input("Revenue <script>alert(1)</script> & more\x07 [1].")
    inp.sources[0].title = "Q4 <b>Results</b> & Co\x00"
    texts = deck_text(PptxGenerator().run(inp, CTX).data)
    assert "Revenue <script>alert(1)</script> & more [1]." in texts[1]
    assert "[1] Q4 <b>Results</b> & Co" in texts[2]


def test_pptx_skips_an_empty_answer():
    with pytest.raises(AgentSkipped):
        PptxGenerator().run(make_input("  "), CTX)


# ------------------------------------------------------------------------------------------------------- pdf


def pdf_text(path: Path) -> str:
    return subprocess.run(["pdftotext", "-layout", str(path), "-"], capture_output=True, text=True, check=True).stdout


def pdf_pages(path: Path) -> int:
    info = subprocess.run(["pdfinfo", str(path)], capture_output=True, text=True, check=True).stdout
    return int(re.search(r"^Pages:\s+(\d+)", info, re.M)[1])


@needs_poppler
def test_pdf_holds_answer_reasoning_sources_and_page_numbers(tmp_path):
    inp = make_input()
    artifact = PdfReport().run(inp, CTX)
    assert artifact.content_type == "application/pdf" and artifact.data.startswith(b"%PDF-")
    path = tmp_path / artifact.filename
    path.write_bytes(artifact.data)
    raw = pdf_text(path)
    text = flat(raw)
    assert text.startswith(QUERY)
    assert flat(ANSWER) in text  # with its [n] markers
    assert "Reasoning" in text and flat(inp.cot_steps[1].thought) in text
    for n, source in enumerate(inp.sources, start=1):
        assert re.search(rf"\[{n}\]\s+{re.escape(source.title)}\s+{source.document_id}\s+{source.score:.3f}", text)
    assert pdf_pages(path) == artifact.metadata["pages"] == 1
    assert "Page 1 of 1" in raw


@needs_poppler
def test_pdf_counts_its_pages_truthfully_on_a_long_answer(tmp_path):
    long_answer = " ".join(
        f"Paragraph sentence {i}: Northwind Energy reported revenue figures for its wind, solar and storage "
        f"business lines that analysts compared across quarters [{i % 3 + 1}]." for i in range(150)
    )
    artifact = PdfReport({"page_size": "letter"}).run(make_input(long_answer), CTX)
    path = tmp_path / "long.pdf"
    path.write_bytes(artifact.data)
    pages = pdf_pages(path)
    assert pages >= 2
    assert artifact.metadata["pages"] == pages
    text = pdf_text(path)
    assert f"Page {pages} of {pages}" in text and f"Page 1 of {pages}" in text
    assert "Paragraph sentence 149:" in text  # the answer's end made it onto the last pages
    assert "letter" in subprocess.run(["pdfinfo", str(path)], capture_output=True, text=True).stdout


@needs_poppler
def test_pdf_escapes_markup_in_title_and_sources(tmp_path):
    inp = make_input(cot_steps=None)
    inp.sources[1].title = "Results <b>bold</b> & <script>x</script>"
    artifact = PdfReport({"title": "Revenue <Q4> & outlook", "include_cot": False}).run(inp, CTX)
    path = tmp_path / "r.pdf"
    path.write_bytes(artifact.data)
    text = flat(pdf_text(path))
    assert text.startswith("Revenue <Q4> & outlook")
    assert f"Question: {QUERY}" in text
    assert "Results <b>bold</b> & <script>x</script>" in text
    assert "Reasoning" not in text and artifact.metadata["cot_steps"] == 0


@needs_poppler
def test_pdf_sources_say_where_in_their_file_each_passage_stands(tmp_path):
    inp = make_input()
    inp.sources[0].title, inp.sources[1].title = "Q4 report", "Q4 figures"  # short: one line of a table cell each
    # From the source the answer step made; from the retrieved chunk's metadata; none for a document sent as text.
    inp.sources[0].location = {"page": 3}
    inp.documents[1].metadata = {**inp.documents[1].metadata, "location": {"sheet": "Q4", "rows": [7, 12]}}
    artifact = PdfReport().run(inp, CTX)
    path = tmp_path / "located.pdf"
    path.write_bytes(artifact.data)
    text = flat(pdf_text(path))
    first, second, third = inp.sources
    assert re.search(rf"\[1\]\s+{re.escape(first.title)}, p\. 3\s+{first.document_id}", text)
    assert re.search(rf"\[2\]\s+{re.escape(second.title)}, Q4, rows 7–12\s+{second.document_id}", text)
    assert re.search(rf"\[3\]\s+{re.escape(third.title)}\s+{third.document_id}", text)  # nothing added


# ----------------------------------------------------------------------------------------------------- chart


def test_extraction_finds_money_percentages_and_periods_in_real_sentences():
    points = extract_data_points("Q4 2025 revenue reached $412 million, up 18% from Q4 2024, the strongest quarter "
                                 "in Northwind Energy's history [2].")
    assert [(p.label, p.value, p.unit, p.text, p.source) for p in points] == [
        ("Q4 2025", 412e6, "USD", "$412 million", 2),
        ("Q4 2025 vs Q4 2024", 18.0, "% change", "18%", 2),
    ]
    points = extract_data_points("Northwind Energy posted third-quarter 2025 revenue of $369 million, up 16% from "
                                 "$318 million in Q3 2024.")
    assert [(p.label, p.value, p.unit) for p in points] == [
        ("Q3 2025", 369e6, "USD"), ("Q3 2025 vs Q3 2024", 16.0, "% change"), ("Q3 2024", 318e6, "USD")
    ]
    assert points[0].metric == "revenue"
    points = extract_data_points("Full-year 2025 revenue was $1.416 billion, up 15.5% from $1.226 billion in 2024.")
    assert [(p.label, p.value) for p in points] == [("2025", 1.416e9), ("2025 vs 2024", 15.5), ("2024", 1.226e9)]
    points = extract_data_points("FY2024 revenue was $1.2 billion; fiscal year 2025 revenue was $1.4 billion.")
    assert [(p.label, p.value) for p in points] == [("FY 2024", 1.2e9), ("FY 2025", 1.4e9)]
    points = extract_data_points("Adjusted EBITDA was $142 million, a margin of 38.5%. The board proposed a 2025 "
                                 "dividend of $0.48 per share. The expansion cost €96 million and adds 74.4 MW.")
    assert [(p.label, p.value, p.unit) for p in points] == [
        ("Adjusted EBITDA", 142e6, "USD"), ("Margin", 38.5, "%"), ("2025", 0.48, "USD per share"),
        ("Expansion cost", 96e6, "EUR"), ("Adds", 74.4, "MW"),
    ]
    # Years, dates and plain counts are not values to chart.
    assert extract_data_points("In 2024 the company introduced an app; staff used it 214 times by 12 May 2025.") == []


def test_chart_png_is_the_declared_size_with_one_bar_per_value():
    # 1000 px at 96 dpi is 10.41666… inches: the size must still come out exact, and metadata must say it.
    artifact = ChartGenerator({"width": 1000, "height": 560, "dpi": 96}).run(make_input(), CTX)
    assert artifact.filename == "chart.png" and artifact.content_type == "image/png"
    meta = artifact.metadata
    assert (meta["width"], meta["height"]) == (1000, 560)
    image = Image.open(io.BytesIO(artifact.data))
    assert image.format == "PNG" and image.size == (meta["width"], meta["height"])
    assert [p["label"] for p in meta["points"]] == ["Q1 2024", "Q3 2024", "Q1 2025", "Q3 2025", "Q4 2025"]
    assert [p["value"] for p in meta["points"]] == [268e6, 318e6, 301e6, 369e6, 412e6]
    assert meta["unit"] == "USD" and meta["scale"] == "million"
    # Count the bars in the pixels: along the row that crosses most bar colour, each bar is one run of it.
    rgb = image.convert("RGB")
    bar = (0x1F, 0x5F, 0xA8)
    width, height = rgb.size
    pixels = rgb.load()
    best_row = max(range(height), key=lambda y: sum(pixels[x, y] == bar for x in range(0, width, 2)))
    runs = sum(1 for x in range(1, width) if pixels[x, best_row] == bar and pixels[x - 1, best_row] != bar)
    assert runs == 5
    # Taller bars for bigger values: the Q4 2025 bar (last) reaches higher than the Q1 2024 bar (first).
    columns = [x for x in range(1, width) if pixels[x, best_row] == bar and pixels[x - 1, best_row] != bar]

    def top(x: int) -> int:
        return min(y for y in range(height) if pixels[x + 3, y] == bar)

    assert top(columns[-1]) < top(columns[0])


def test_chart_svg_parses_with_one_bar_element_per_value():
    artifact = ChartGenerator({"format": "svg"}).run(make_input(), CTX)
    assert artifact.filename == "chart.svg" and artifact.content_type == "image/svg+xml"
    root = ET.fromstring(artifact.data)
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    bars = [el for el in root.iter() if el.get("id", "").startswith("bar-")]
    assert len(bars) == len(artifact.metadata["points"]) == 5
    texts = " ".join(t for el in root.iter("{http://www.w3.org/2000/svg}text") for t in el.itertext())
    for label in ("Q1 2024", "Q4 2025", "$412M", "Revenue (USD million)"):
        assert label in texts
    # The SVG is the figure the PNG would be: width pixels / dpi inches, in points.
    _, _, view_w, view_h = map(float, root.get("viewBox").split())
    assert math.isclose(view_w, artifact.metadata["width"] / 100 * 72, abs_tol=0.01)
    assert math.isclose(view_h, artifact.metadata["height"] / 100 * 72, abs_tol=0.01)


def test_chart_falls_back_to_the_cited_sources_when_the_answer_has_no_numbers():
    inp = make_input("Revenue kept growing through 2025 [2].")
    artifact = ChartGenerator().run(inp, CTX)
    points = artifact.metadata["points"]
    assert points and {p["source"] for p in points} == {2}  # only the cited document, nw-2025-q4
    assert all(p["text"] in inp.documents[1].text for p in points)
    assert ChartGenerator({"use_sources": False}).data_points(inp) == []


def test_chart_is_skipped_without_numbers_never_empty():
    docs = corpus()
    hr = docs["nw-hr-flexible-work"]
    inp = ResponseAgentInput(
        answer="Employees may work remotely with their manager's agreement [1].",
        sources=[Source(document_id="hr", title=hr["title"], score=0.5)],
        query="Can I work from home?",
        documents=[Document(id="hr", title=hr["title"], text="Office staff may work remotely. Ask HR.", score=0.5)],
    )
    with pytest.raises(AgentSkipped, match="no numeric data in the answer or sources"):
        ChartGenerator().run(inp, CTX)


def test_chart_config_is_validated():
    with pytest.raises(ValidationError, match=r"does not end in \.svg"):
        ChartGenerator({"format": "svg", "filename": "chart.png"})
    with pytest.raises(ValidationError):
        ChartGenerator({"format": "gif"})
    with pytest.raises(ValidationError):
        ChartGenerator({"color": "red; fill:url(x)"})


# ----------------------------------------------------------------------------------------------------- audio


def mp3_length(data: bytes) -> float:
    return MP3(io.BytesIO(data)).info.length


@needs_espeak
def test_audio_mp3_decodes_and_its_length_grows_with_the_text():
    short = AudioSummary({"include_query": False}).run(make_input("Revenue rose [1]."), CTX)
    long = AudioSummary({"include_query": False}).run(make_input(ANSWER), CTX)
    assert short.content_type == "audio/mpeg" and short.filename == "summary.mp3"
    for artifact in (short, long):
        length = mp3_length(artifact.data)
        assert length > 0.3
        assert abs(length - artifact.metadata["duration_s"]) < 0.25, (length, artifact.metadata)
    assert mp3_length(long.data) > 4 * mp3_length(short.data)
    assert long.metadata["voice"] == "en-us" and long.metadata["voice_source"] == "language"
    # Faster speech, same text: shorter audio.
    fast = AudioSummary({"include_query": False, "speed": 300}).run(make_input(ANSWER), CTX)
    assert mp3_length(fast.data) < 0.8 * mp3_length(long.data)


@needs_espeak
def test_audio_voice_follows_the_detected_language_and_config_overrides_it():
    german = "Der Umsatz im vierten Quartal 2025 stieg auf 412 Millionen US-Dollar [1]."
    artifact = AudioSummary().run(make_input(german, metadata={"language": "de"}), CTX)
    assert artifact.metadata["voice"] == "de" and artifact.metadata["language"] == "de"
    assert mp3_length(artifact.data) > 1
    unknown = AudioSummary().run(make_input(metadata={"language": "tlh"}), CTX)
    assert unknown.metadata["voice"] == "en-us" and unknown.metadata["voice_source"] == "fallback"
    unset = AudioSummary().run(make_input(metadata={}), CTX)
    assert unset.metadata["voice"] == "en-us" and unset.metadata["voice_source"] == "default"
    chosen = AudioSummary({"voice": "en-gb"}).run(make_input(metadata={"language": "de"}), CTX)
    assert chosen.metadata["voice"] == "en-gb" and chosen.metadata["voice_source"] == "config"
    with pytest.raises(ValueError, match="no voice 'zz-nope'"):
        AudioSummary({"voice": "zz-nope"}).run(make_input(), CTX)


@needs_espeak
def test_audio_respects_max_chars():
    long_answer = " ".join(f"Sentence {i} talks about quarterly revenue [1]." for i in range(40))
    artifact = AudioSummary({"max_chars": 200}).run(make_input(long_answer), CTX)
    assert artifact.metadata["truncated"] is True and artifact.metadata["chars"] <= 200
    text, cut = speech_text(QUERY, ANSWER, include_query=True, max_chars=5000)
    assert not cut and "[1]" not in text and text.startswith(QUERY)


def test_audio_without_espeak_names_the_package(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing on it
    with pytest.raises(EspeakMissing, match="install the espeak-ng system package"):
        AudioSummary().run(make_input(), CTX)


def test_audio_voice_setting_cannot_smuggle_an_option():
    for bad in ("--help", "de -w /etc/passwd", "DE"):
        with pytest.raises(ValidationError):
            AudioSummary({"voice": bad})
