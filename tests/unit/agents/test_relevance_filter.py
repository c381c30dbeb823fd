"""The relevance filter on real text, with the fake toolbox of ``post_search_fakes`` (real MiniLM embeddings)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agentsearch.pipeline.agents.base import Document
from agentsearch.pipeline.agents.builtin.relevance_filter import RelevanceFilter
from tests.unit.agents.post_search_fakes import CORPUS, run

LONG_TEXT = CORPUS["grid-integration-basics"].text


def test_relevance_filter_drops_low_quality_domain_old_and_short_documents_with_reasons():
    docs = [
        Document(id="blog", text=LONG_TEXT, score=0.9, metadata={"url": "https://medium.com/@someone/grid-tips-1a2b",
                                                                 "published": "2025-05-01"}),
        Document(id="sub", text=LONG_TEXT, score=0.8, metadata={"url": "https://Blog.HackerNoon.com./ai-grid"}),
        Document(id="lookalike", text=LONG_TEXT, score=0.8, metadata={"url": "https://notmedium.com/grid"}),
        Document(id="old", text=LONG_TEXT, score=0.85, metadata={"published": "2022-03-01"}),
        Document(id="short", text="Grid integration is hard.", score=0.95, metadata={"published": "2025-05-01"}),
        Document(id="fresh", text=LONG_TEXT, score=0.7, metadata={"url": "https://www.iea.org/reports/grid",
                                                                  "published": "2025-04-20T09:30:00Z"}),
        Document(id="undated", text=LONG_TEXT, score=0.6),
    ]
    agent = RelevanceFilter({"max_age_days": 365, "reference_date": "2025-06-30", "min_words": 20})
    out = run(agent, docs)
    assert [d.id for d in out.documents] == ["lookalike", "fresh", "undated"]
    assert out.metadata["filtered"] == [
        {"document_id": "blog", "reason": "low_quality_domain", "detail": "medium.com"},
        {"document_id": "sub", "reason": "low_quality_domain", "detail": "hackernoon.com"},
        {"document_id": "old", "reason": "too_old", "detail": "published 2022-03-01, 1217 days ago (max 365)"},
        {"document_id": "short", "reason": "too_short", "detail": "4 words (min 20)"},
    ]
    assert out.metadata["filtered_counts"] == {"low_quality_domain": 2, "too_old": 1, "too_short": 1}


def test_relevance_filter_min_score_undated_and_defaults():
    docs = [Document(id="high", text=LONG_TEXT, score=0.8), Document(id="low", text=LONG_TEXT, score=0.2,
                                                                      metadata={"url": "dev.to/post"})]
    out = run(RelevanceFilter({"min_score": 0.5, "max_age_days": 30, "keep_undated": False}), docs)
    assert out.documents == []
    assert out.metadata["filtered"] == [
        {"document_id": "high", "reason": "undated", "detail": "no usable metadata.published"},
        {"document_id": "low", "reason": "min_score", "detail": "score 0.2000 below 0.5"},
    ]
    # Defaults: the blocked-domain list applies (also to a URL without a scheme); no score or age rule.
    out = run(RelevanceFilter(), docs)
    assert [d.id for d in out.documents] == ["high"]
    assert out.metadata["filtered"][0]["reason"] == "low_quality_domain"


@pytest.mark.parametrize("config", [{"max_age_days": -1}, {"blocked_domains": ["https://medium.com/"]},
                                    {"min_words": -5}, {"reference_date": "yesterday"}, {"domains": []}])
def test_relevance_filter_refuses_bad_config(config):
    with pytest.raises(ValidationError):
        RelevanceFilter(config)
