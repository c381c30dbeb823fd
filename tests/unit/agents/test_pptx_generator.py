"""The pptx generator, each deck reopened with python-pptx."""

from __future__ import annotations

import io

import pytest
from pptx import Presentation
from pydantic import ValidationError

from agentsearch.pipeline.agents.base import AgentSkipped
from agentsearch.pipeline.agents.builtin.pptx_generator import PptxGenerator
from tests.unit.agents.response_fakes import CTX, QUERY, SENTENCES, flat, make_input


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
