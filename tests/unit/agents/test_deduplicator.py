"""The deduplicator, called directly (no runner, no Redis)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agentsearch.pipeline.agents.base import AgentContext, Document, PostSearchInput, Stage
from agentsearch.pipeline.agents.builtin.deduplicator import Deduplicator

POST = AgentContext(pipeline_stage=Stage.POST_SEARCH)


PRESS_RELEASE = (
    "Helios Energy reported fourth quarter 2025 revenue of $412 million, an increase of 18 percent compared with "
    "the same quarter of 2024. The growth was driven by new utility-scale solar installations in Texas and Arizona, "
    "which added 1.2 gigawatts of capacity. Chief executive Maria Lopez said the company expects to reach full-year "
    "2026 revenue between $1.7 billion and $1.8 billion."
)
REWORDED = (
    "Helios Energy has reported fourth quarter 2025 revenue of $412 million, an increase of 18 percent compared "
    "with the same quarter a year earlier. The growth was driven by new utility-scale solar installations in Texas "
    "and Arizona, which together added 1.2 gigawatts of capacity. Chief executive Maria Lopez said the company now "
    "expects to reach full-year 2026 revenue between $1.7 billion and $1.8 billion."
)
SAME_TOPIC = (
    "Helios Energy's fourth quarter 2025 results were shaped by falling module prices. Analysts at Northbridge "
    "Capital note that the company's solar revenue depends on utility contracts in Texas, and warn that "
    "interconnection delays could slow new capacity additions in 2026."
)


def docs(*items: tuple[str, str, float]) -> list[Document]:
    return [Document(id=i, title="Helios Energy Q4 2025", text=t, score=s) for i, t, s in items]


def test_deduplicator_drops_a_reworded_copy_and_keeps_a_different_document_on_the_topic():
    documents = docs(("wire", REWORDED, 0.81), ("press", PRESS_RELEASE, 0.86), ("analyst", SAME_TOPIC, 0.74))
    out = Deduplicator().run(PostSearchInput(documents=documents, query="Helios Q4 revenue"), POST)
    assert [d.id for d in out.documents] == ["press", "analyst"]
    assert out.metadata == {"duplicates_removed": 1, "duplicates": [{"document_id": "wire", "duplicate_of": "press"}]}


def test_deduplicator_keeps_the_higher_scored_copy_whatever_the_input_order():
    documents = docs(("press", PRESS_RELEASE, 0.52), ("wire", REWORDED, 0.91))
    out = Deduplicator().run(PostSearchInput(documents=documents, query="Helios Q4 revenue"), POST)
    assert [d.id for d in out.documents] == ["wire"]
    assert out.documents[0].score == 0.91


def test_deduplicator_threshold_decides_what_counts_as_a_duplicate():
    documents = docs(("press", PRESS_RELEASE, 0.86), ("wire", REWORDED, 0.81))
    strict = Deduplicator({"threshold": 0.95}).run(PostSearchInput(documents=documents, query="q"), POST)
    assert [d.id for d in strict.documents] == ["press", "wire"]


def test_deduplicator_leaves_distinct_documents_alone_and_handles_none():
    documents = docs(("press", PRESS_RELEASE, 0.86), ("analyst", SAME_TOPIC, 0.74))
    out = Deduplicator().run(PostSearchInput(documents=documents, query="q"), POST)
    assert out.documents == documents and out.metadata["duplicates_removed"] == 0
    assert Deduplicator().run(PostSearchInput(documents=[], query="q"), POST).documents == []


@pytest.mark.parametrize("config", [{"threshold": 0}, {"threshold": 1.5}, {"shingle_size": 0}])
def test_deduplicator_refuses_bad_config(config):
    with pytest.raises(ValidationError):
        Deduplicator(config)

