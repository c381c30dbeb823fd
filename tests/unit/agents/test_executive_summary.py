"""The executive summary, called directly (no runner, no Redis)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agentsearch.pipeline.agents.base import AgentContext, AgentSkipped, ResponseAgentInput, Source, Stage
from agentsearch.pipeline.agents.builtin.executive_summary import ExecutiveSummary

RESPONSE = AgentContext(pipeline_stage=Stage.RESPONSE)


LONG_ANSWER = (
    "Q4 2025 revenue reached $412 million, up 18% from the prior year [1]. "
    "Growth came mainly from the solar segment, where new utility-scale installations in Texas and Arizona added "
    "1.2 gigawatts of capacity during the quarter while average selling prices held steady despite the pressure "
    "from imported modules [2]. "
    "Operating margin improved to 14.2% as component costs fell [1]. "
    "Management expects 2026 revenue between $1.7 and $1.8 billion [3]. "
    "The board approved a $150 million share buyback to be executed over the next eighteen months [1]. "
    "Headcount grew to 4,300 employees, mostly in installation crews [2]."
)
SOURCES = [
    Source(document_id="press", title="Fourth quarter 2025 results press release", score=0.86),
    Source(document_id="segment", title="Solar segment operating review for the fourth quarter", score=0.8),
    Source(document_id="outlook", title="Guidance and outlook for fiscal year 2026", score=0.71),
]
QUERY = "How did revenue develop in Q4 2025?"


def summary(answer: str, **config) -> str:
    artifact = ExecutiveSummary(config).run(ResponseAgentInput(answer=answer, sources=SOURCES, query=QUERY), RESPONSE)
    assert artifact.filename.endswith(".txt") and artifact.content_type.startswith("text/plain")
    return artifact.data.decode("utf-8")


def test_executive_summary_lists_key_points_and_sources_when_they_fit():
    text = summary(LONG_ANSWER, max_words=400, max_points=3)
    assert text.startswith(f"Executive summary: {QUERY}\n")
    points = [line for line in text.splitlines() if line.startswith("- ")]
    assert points == [
        "- Q4 2025 revenue reached $412 million, up 18% from the prior year [1].",
        "- Growth came mainly from the solar segment, where new utility-scale installations in Texas and Arizona "
        "added 1.2 gigawatts of capacity during the quarter while average selling prices held steady despite the "
        "pressure from imported modules [2].",
        "- Operating margin improved to 14.2% as component costs fell [1].",
    ]
    for i, source in enumerate(SOURCES, start=1):
        assert f"[{i}] {source.title}" in text
    assert len(text.split()) <= 400


@pytest.mark.parametrize("max_words", [20, 45, 60, 100])
def test_executive_summary_respects_max_words_for_a_long_answer(max_words):
    text = summary(LONG_ANSWER, max_words=max_words, max_points=10)
    assert len(text.split()) <= max_words


def test_executive_summary_within_the_limit_when_no_point_needs_cutting():
    short = "Q4 2025 revenue reached $412 million [1]. Operating margin improved to 14.2% [1]."
    text = summary(short, max_words=40)
    assert len(text.split()) <= 40
    assert "- Operating margin improved to 14.2% [1]." in text


@pytest.mark.parametrize("answer", ["", "   \n"])
def test_executive_summary_skips_an_empty_answer(answer):
    with pytest.raises(AgentSkipped):
        ExecutiveSummary().run(ResponseAgentInput(answer=answer, sources=SOURCES, query=QUERY), RESPONSE)


def test_executive_summary_refuses_a_filename_that_is_not_a_plain_txt_name():
    for filename in ("../summary.txt", "summary.exe", "sub/summary.txt"):
        with pytest.raises(ValidationError):
            ExecutiveSummary({"filename": filename})

