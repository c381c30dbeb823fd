"""How a search is run: strategy, fusion, candidate pool, scoring weights, thresholds and dedup.

Validated when built, so a bad setting is refused when a job is submitted, not in the middle of it. Numbers are
numbers only (pydantic's strict types): lax validation read ``true`` as 1 and ``"5"`` as 5, so a client's
``"min_score": true`` became a threshold of 1.0 instead of a 422 naming it.

Usage::

    config = SearchConfig(strategy="hybrid", fusion="weighted", semantic_weight=0.7, keyword_weight=0.3)
    config = SearchConfig(strategy="adaptive", min_score=0.2, recency_weight=0.1)
    config = SearchConfig(filter={"eq": {"key": "region", "value": "emea"}})     # see
    agentsearch.pipeline.retrieval.filters
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, model_validator

from agentsearch.pipeline.retrieval.filters import MetadataFilter

Strategy = Literal["semantic", "keyword", "hybrid", "adaptive"]


class SearchConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    strategy: Strategy = "hybrid"
    fusion: Literal["rrf", "weighted"] = "weighted"
    semantic_weight: StrictFloat = Field(1.0, ge=0.0, le=10.0)
    keyword_weight: StrictFloat = Field(1.0, ge=0.0, le=10.0)
    rrf_k: StrictInt = Field(60, ge=1, le=1000)
    sentence_weight: StrictFloat = Field(
        1.0, ge=0.0, le=10.0, description="Weight of the query's best cosine with a stored sentence of each leading "
        "document, beside the fused score (0 turns the signal off)."
    )
    candidates: StrictInt = Field(100, ge=1, le=2000, description="Pool per retriever; does not shrink with top_k.")
    top_k: StrictInt = Field(10, ge=1, le=1000)
    min_score: StrictFloat | None = Field(None, description="Applied after fusion and score adjustments.")
    recency_weight: StrictFloat = Field(0.0, ge=0.0, le=1.0, description="Share of the score given to recency.")
    recency_half_life_days: StrictFloat = Field(365.0, gt=0)
    authority_weight: StrictFloat = Field(0.0, ge=0.0, le=1.0,
                                          description="Share of the score given to source authority.")
    authority: dict[str, StrictFloat] = Field(default_factory=dict,
                                              description="metadata.source -> weight in [0, 1].")
    # 0.95, not 0.85: with MiniLM, distinct reports written from one template sit at 0.83-0.91 cosine while
    # reworded copies of one text sit above 0.97 (measured on the sample corpus; see docs/evaluation.md).
    near_duplicate_threshold: StrictFloat | None = Field(0.95, gt=0.0, le=1.0,
                                                         description="Cosine; None disables.")
    adaptive_min_results: StrictInt = Field(
        3, ge=1, le=1000, description="Adaptive search expands the query and retries below this many results."
    )
    timeout_s: StrictFloat = Field(20.0, gt=0, le=600,
                                   description="Stage deadline: slower retrievers give partial results.")
    filter: MetadataFilter | None = Field(
        None, description="Metadata filter applied inside every Milvus search (agentsearch.pipeline.retrieval.filters)."
    )

    @model_validator(mode="after")
    def _weights(self) -> SearchConfig:
        if self.strategy in ("hybrid", "adaptive") and self.semantic_weight + self.keyword_weight == 0:
            raise ValueError("semantic_weight and keyword_weight cannot both be 0 for hybrid search")
        if self.recency_weight + self.authority_weight > 1:
            raise ValueError("recency_weight + authority_weight must not exceed 1")
        for source, weight in self.authority.items():
            if not 0 <= weight <= 1:
                raise ValueError(f"authority[{source!r}] must be between 0 and 1")
        return self

    def cache_view(self) -> dict:
        """What changes results (everything but the deadline). Without a filter the view is what it was before
        filters existed, so earlier cache entries still answer."""
        return self.model_dump(mode="json", exclude={"timeout_s", *(("filter",) if self.filter is None else ())})
