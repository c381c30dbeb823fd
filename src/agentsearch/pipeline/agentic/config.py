"""Settings of the iterative mode, validated when built: a bad value is refused when a job is submitted.

The defaults: keep results scoring at least 4.0 (of 5) in the first iteration and 3.8 after (a later iteration's
results come from a refined query; the slightly lower bar lets them add to what the first kept), 5 results
evaluated per iteration, stop at the target count or when the budget of iterations is spent. docs/evaluation.md
measures them. Without
``max_iterations`` the budget (1-3) is chosen from the query's complexity (``sufficiency.choose_budget``). Numbers
are numbers only, as in ``SearchConfig``: ``"target": true`` is refused, not read as 1.

Usage::

    config = IterativeConfig(target=3, max_iterations=2, thresholds=Thresholds(first=4.0, later=3.8))
    config.thresholds.base(1), config.thresholds.base(2)     # 4.0, 3.8
    config = reduced_for_test_mode(config)                   # AGENTSEARCH_TEST_MODE's limits
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    ValidationError,
    field_validator,
    model_validator,
)

from agentsearch.pipeline.retrieval.config import SearchConfig

# Test mode (AGENTSEARCH_TEST_MODE): one iteration, one result wanted, two results fetched per search, so a whole
# iterative job runs in a few seconds.
TEST_MODE_MAX_ITERATIONS = 1
TEST_MODE_TARGET = 1
TEST_MODE_PER_ITERATION = 2


class Thresholds(BaseModel):
    """The overall score (mean of the four criteria, 1-5) a result needs to be kept."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    first: StrictFloat = Field(4.0, ge=1.0, le=5.0, description="Threshold of the first iteration.")
    later: StrictFloat = Field(3.8, ge=1.0, le=5.0, description="Threshold of every later iteration.")
    adaptive: bool = Field(
        False, description="Move the threshold with each batch's score distribution (mean + 0.5 sd), within "
        "max_shift of the configured value."
    )
    max_shift: StrictFloat = Field(0.5, ge=0.0, le=2.0, description="How far the adaptive threshold may move.")

    def base(self, iteration: int) -> float:
        """The configured threshold of iteration ``iteration`` (1-based)."""
        return self.first if iteration <= 1 else self.later


class IterativeConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    target: StrictInt = Field(5, ge=1, le=100, description="Stop once this many results are kept.")
    max_iterations: StrictInt | None = Field(
        None, ge=1, le=10, description="Budget of iterations; unset: 1-3 chosen by the query's complexity."
    )
    per_iteration: StrictInt = Field(5, ge=1, le=50, description="New results evaluated per iteration.")
    thresholds: Thresholds = Field(default_factory=Thresholds)
    sufficiency: bool = Field(True, description="Grade whether the kept results answer the query; stop if they do.")
    max_queries: StrictInt = Field(3, ge=1, le=10,
                                   description="Queries per iteration (the refined one plus follow-ups).")
    llm: Literal["auto", "off"] = Field(
        "auto", description="auto: evaluate, refine, grade and compress with the LLM when one is configured."
    )
    llm_guard: bool = Field(
        True, description="Check the LLM's scores of each batch against the retrieval; when they disagree, "
        "evaluate, refine and grade offline for the rest of the run.")
    llm_guard_min_rank_correlation: StrictFloat = Field(
        0.0, ge=-1.0, le=1.0, description="The guard fires when the rank correlation (Kendall tau-b) of the LLM's "
        "scores with the retrieval scores of a batch is below this.")
    llm_timeout_s: StrictFloat = Field(20.0, gt=0, le=120, description="Budget of each LLM call, retries included.")
    compress: bool = Field(True, description="Compress long kept documents to their query-relevant sentences.")
    compress_min_chars: StrictInt = Field(1200, ge=100, le=100_000,
                                          description="Documents shorter than this stay whole.")
    compress_max_chars: StrictInt = Field(600, ge=50, le=20_000, description="Length a compressed document aims for.")
    compress_concurrency: StrictInt = Field(2, ge=1, le=16, description="Documents compressed at once.")
    search: dict[str, Any] = Field(default_factory=dict, description="SearchConfig overrides for every search.")

    @field_validator("search")
    @classmethod
    def _valid_search(cls, value: dict[str, Any]) -> dict[str, Any]:
        return check_search_overrides(value)

    @model_validator(mode="after")
    def _compression_shrinks(self) -> IterativeConfig:
        if self.compress and self.compress_max_chars >= self.compress_min_chars:
            raise ValueError("compress_max_chars must be below compress_min_chars")
        return self


def check_search_overrides(value: dict[str, Any]) -> dict[str, Any]:
    """``SearchConfig`` overrides as the loop takes them: valid, and without ``top_k`` (the loop sets it)."""
    if "top_k" in value:
        raise ValueError("top_k is set by the loop (per_iteration); leave it out of search")
    if "filter" in value:
        raise ValueError("the metadata filter is set once for the whole job: the request's top-level filter")
    try:
        SearchConfig(**value)
    except ValidationError as exc:
        raise ValueError(f"invalid search overrides: {exc.errors()[0]['msg']}") from None
    return value


def reduced_for_test_mode(config: IterativeConfig) -> IterativeConfig:
    """The reduced limits of test mode (``AGENTSEARCH_TEST_MODE``): a config may ask for less, never for more."""
    return config.model_copy(update={
        "max_iterations": min(config.max_iterations or TEST_MODE_MAX_ITERATIONS, TEST_MODE_MAX_ITERATIONS),
        "target": min(config.target, TEST_MODE_TARGET),
        "per_iteration": min(config.per_iteration, TEST_MODE_PER_ITERATION),
        "max_queries": 1,
    })
