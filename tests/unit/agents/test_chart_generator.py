"""The chart generator: Pillow reads the PNG, xml.etree the SVG, and the extraction of labelled numbers from real
sentences."""

from __future__ import annotations

import io
import math

import pytest
from defusedxml import ElementTree
from PIL import Image
from pydantic import ValidationError

from agentsearch.pipeline.agents.base import AgentSkipped, Document, ResponseAgentInput, Source
from agentsearch.pipeline.agents.builtin.chart_generator import ChartGenerator, extract_data_points
from tests.unit.agents.response_fakes import CTX, corpus, make_input


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
    root = ElementTree.fromstring(artifact.data)
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
