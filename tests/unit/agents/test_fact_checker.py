"""The fact checker on real text, with the fake toolbox of ``post_search_fakes`` (real MiniLM embeddings)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agentsearch.pipeline.agents.base import AgentSkipped, Document
from agentsearch.pipeline.agents.builtin.fact_checker import FactChecker, quantities
from agentsearch.pipeline.agents.references import CollectionReference, UnresolvedReference
from agentsearch.pipeline.platform.llm import LLMClient
from agentsearch.pipeline.retrieval.analyzer import KeywordAnalyzer
from tests.unit.agents.post_search_fakes import CORPUS, TRUSTED_ID, FakeTools, ctx_with, run

TRUSTED = [CORPUS[i] for i in ("nw-2024-q3", "nw-2024-q4", "nw-2025-q4", "nw-safety-2024", "nw-kestrel-storage")]
AGREES = Document(
    id="wire-agrees", title="Northwind closes 2024 with double-digit growth", score=0.8,
    text="Northwind Energy said fourth-quarter 2024 revenue was $349 million, up 14% from $306 million a year "
         "earlier. Full-year 2024 revenue came to $1,226 million, an increase of 12% over 2023.",
)
CONTRADICTS = Document(
    id="blog-contradicts", title="Northwind beats every expectation", score=0.7,
    text="Northwind Energy said fourth-quarter 2024 revenue was $412 million, up 35% from $306 million a year "
         "earlier. Full-year 2024 revenue came to $1.6 billion, an increase of 30% over 2023.",
)
HALF_RIGHT = Document(
    id="digest-mixed", title="Energy digest", score=0.6,
    text="Full-year 2024 revenue at Northwind came to $1.226 billion, an increase of 12% over 2023. "
         "Turbine availability averaged 91.2% in the third quarter of 2024, compared with 96.9% a year earlier.",
)


def test_quantities_normalise_scales_and_keep_years_as_context():
    analyzer = KeywordAnalyzer()
    a = quantities("Revenue totaled $1.226 billion in 2024, up 12%.", analyzer)
    b = quantities("Revenue totaled $1,226 million in 2024, up 12 percent.", analyzer)
    assert [(q.kind, q.value) for q in a] == [("amount", 1.226e9), ("year", 2024.0), ("percent", 12.0)]
    assert [(q.kind, q.value) for q in b] == [("amount", 1.226e9), ("year", 2024.0), ("percent", 12.0)]
    assert "revenu" in a[0].context


def test_fact_checker_marks_agreeing_numbers_supported_and_contradicting_ones_unsupported(embedder):
    tools = FakeTools(embedder, TRUSTED)
    out = run(FactChecker({"trusted_collection_id": TRUSTED_ID}), [AGREES, CONTRADICTS], "Northwind 2024 revenue",
              ctx_with(tools))
    agrees, contradicts = (d.metadata["fact_check"] for d in out.documents)
    assert agrees["status"] == "supported" and agrees["support"] >= 0.6
    assert [c["status"] for c in agrees["claims"]] == ["supported", "supported"]
    assert agrees["claims"][0]["numbers"]["agree"] == ["$349 million", "14%", "$306 million"]
    assert agrees["claims"][0]["evidence"] == {
        "document_id": "nw-2024-q4",
        "sentence": "Fourth-quarter 2024 revenue was $349 million, up 14% from $306 million in Q4 2023.",
    }
    assert contradicts["status"] == "unsupported" and contradicts["support"] == 0.0
    assert [c["status"] for c in contradicts["claims"]] == ["contradicted", "contradicted"]
    assert contradicts["claims"][0]["numbers"]["contradict"] == ["$412 million", "35%"]
    assert contradicts["claims"][1]["numbers"]["contradict"] == ["$1.6 billion", "30%"]
    assert out.metadata["fact_check"] == {"checked": 2, "supported": 1, "mixed": 0, "unsupported": 1,
                                          "trusted_collection_id": TRUSTED_ID}
    # Every claim was looked up in the trusted collection, not the searched one.
    assert tools.searches and {s[0] for s in tools.searches} == {TRUSTED_ID}


def test_fact_checker_mixed_document_and_drop_unsupported(embedder):
    tools = FakeTools(embedder, TRUSTED)
    out = run(FactChecker({"trusted_collection_id": TRUSTED_ID, "drop_unsupported": True}),
              [AGREES, CONTRADICTS, HALF_RIGHT], "Northwind 2024", ctx_with(tools))
    assert [d.id for d in out.documents] == ["wire-agrees", "digest-mixed"]
    mixed = out.documents[1].metadata["fact_check"]
    assert mixed["status"] == "mixed"
    assert [c["status"] for c in mixed["claims"]] == ["supported", "contradicted"]
    assert mixed["claims"][1]["numbers"] == {"agree": ["96.9%"], "contradict": ["91.2%"]}
    assert 0 < mixed["support"] < out.documents[0].metadata["fact_check"]["support"]
    assert out.metadata["fact_check"]["dropped"] == ["blog-contradicts"]


def test_fact_checker_finds_no_support_for_claims_the_trusted_collection_does_not_make(embedder):
    offtopic = Document(id="recipe", title="Sourdough basics",
                        text="A sourdough starter needs equal weights of flour and water, fed every 12 hours. "
                             "Bakers in San Francisco popularised the style in 1849.")
    out = run(FactChecker({"trusted_collection_id": TRUSTED_ID}), [offtopic], "bread",
              ctx_with(FakeTools(embedder, TRUSTED)))
    report = out.documents[0].metadata["fact_check"]
    assert report["status"] == "unsupported"
    assert all(c["status"] == "unsupported" and c["support"] < 0.6 for c in report["claims"])


def test_fact_checker_llm_entailment_replaces_the_offline_verdicts(embedder, fake_llm):
    fake_llm.script('[{"claim": 1, "verdict": "supported"}, {"claim": 2, "verdict": "contradicted"}]')
    tools = FakeTools(embedder, TRUSTED, llm=LLMClient(base_url=fake_llm.base_url, model="fake"))
    out = run(FactChecker({"trusted_collection_id": TRUSTED_ID, "mode": "llm"}), [AGREES], "q", ctx_with(tools))
    report = out.documents[0].metadata["fact_check"]
    assert report["method"] == "llm" and report["status"] == "mixed" and report["support"] == 0.5
    assert [(c["status"], c["offline_status"]) for c in report["claims"]] == [("supported", "supported"),
                                                                              ("contradicted", "supported")]
    prompt = fake_llm.requests[0]["messages"][-1]["content"]
    assert "Claim 1: Northwind Energy said fourth-quarter 2024 revenue was $349 million" in prompt
    assert "Fourth-quarter 2024 revenue was $349 million, up 14% from $306 million in Q4 2023." in prompt


def test_fact_checker_keeps_offline_verdicts_when_the_llm_reply_is_malformed(embedder, fake_llm):
    fake_llm.script("Both claims look plausible to me.", '[{"claim": 5, "verdict": "maybe"}]')
    tools = FakeTools(embedder, TRUSTED, llm=LLMClient(base_url=fake_llm.base_url, model="fake"))
    out = run(FactChecker({"trusted_collection_id": TRUSTED_ID, "mode": "auto"}), [AGREES, CONTRADICTS], "q",
              ctx_with(tools))
    agrees, contradicts = (d.metadata["fact_check"] for d in out.documents)
    assert len(fake_llm.requests) == 2
    assert (agrees["status"], contradicts["status"]) == ("supported", "unsupported")
    assert agrees["method"] == contradicts["method"] == "offline"
    assert "not JSON" in agrees["llm_error"] and "no usable verdict" in contradicts["llm_error"]


def test_fact_checker_skips_without_a_trusted_collection_or_a_toolbox(embedder):
    with pytest.raises(AgentSkipped, match="trusted_collection_id"):
        run(FactChecker(), [AGREES], "q", ctx_with(FakeTools(embedder, TRUSTED)))
    with pytest.raises(AgentSkipped, match="toolbox"):
        run(FactChecker({"trusted_collection_id": TRUSTED_ID}), [AGREES], "q")


def test_fact_checker_refuses_a_trusted_collection_the_jobs_user_does_not_own_before_searching(embedder):
    tools = FakeTools(embedder, TRUSTED, owned=("0f0f0f0f-0000-4000-8000-000000000000",))
    with pytest.raises(UnresolvedReference) as caught:
        run(FactChecker({"trusted_collection_id": TRUSTED_ID}), [AGREES], "q", ctx_with(tools))
    assert str(caught.value) == f"trusted_collection_id: collection {TRUSTED_ID} not found"
    assert tools.searches == []  # nothing was read from it
    assert FactChecker.references == {"trusted_collection_id": CollectionReference()}


@pytest.mark.parametrize("config", [{"max_claims": 0}, {"support_threshold": 0.3, "context_threshold": 0.5},
                                    {"strategy": "fuzzy"}, {"trusted": "x"}, {"trusted_collection_id": "trusted-ir"}])
def test_fact_checker_refuses_bad_config(config):
    with pytest.raises(ValidationError):
        FactChecker(config)
