"""What a search job is asked to do: the body of ``POST /v1/search``, checked further by
``agentsearch.pipeline.job.submit`` against the settings and the registry, and kept with the job (``Job.request``).

Usage::

    request = SearchRequest(collection_id=collection_id, query="What is the notice period?", top_k=5)
    submitted = submit_job(services, user_id, request)
"""

from __future__ import annotations

import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt

from agentsearch.pipeline.job.conversation import MAX_HISTORY_MESSAGES, HistoryMessage
from agentsearch.pipeline.job.stage_budget import StageTimeouts


class SearchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    collection_id: uuid.UUID = Field(description="The collection searched; its agent configs run.")
    also_search: list[uuid.UUID] | None = Field(
        None, max_length=20, description="More collections searched in parallel; results merged by document id."
    )
    query: str
    # A number only: lax validation read ``true`` as 1 and ``"5"`` as 5.
    top_k: StrictInt | None = Field(None, ge=1)
    agents: list[str] | None = Field(
        None, max_length=50, description="Run these agents with default configs instead of the collection's."
    )
    cot: bool = Field(False, description="Include chain-of-thought steps in the response.")
    use_cache: bool = Field(
        True, description="Answer from an identical earlier job's stored response when there is one."
    )
    search: dict[str, Any] | None = Field(
        None, description="Retrieval overrides for this job (strategy, fusion, weights, min_score, ...), "
        "validated as agentsearch.pipeline.retrieval.config.SearchConfig."
    )
    mode: Literal["single", "iterative"] = Field(
        "single", description="single: one search; iterative: search, evaluate, refine until a target or a budget."
    )
    iterative: dict[str, Any] | None = Field(
        None, description="Iterative settings (target, max_iterations, per_iteration, thresholds, ...), validated "
        "as agentsearch.pipeline.agentic.config.IterativeConfig; mode iterative only."
    )
    profiles: list[dict[str, Any]] | None = Field(
        None, max_length=10, description="Specialist profiles run in parallel and merged by category "
        "(agentsearch.pipeline.agentic.profiles.Profile); mode iterative only."
    )
    seen: dict[str, Any] | None = Field(
        None, description="Skip what this user was shown recently (enabled, window_days, near_duplicate, scope); "
        "on by default with profiles."
    )
    filter: dict[str, Any] | None = Field(
        None, description="Metadata filter applied to every search of the job (eq, ne, in, range, exists, and, or, "
        "not), validated as agentsearch.pipeline.retrieval.filters.MetadataFilter; see docs/filters.md.",
        examples=[{"and": [{"eq": {"key": "region", "value": "emea"}},
                           {"range": {"key": "published", "gte": "2024-01-01"}}]}],
    )
    conversation_id: uuid.UUID | None = Field(
        None, description="Ask in this conversation (POST /v1/conversations): its earlier turns are the job's history, "
        "and the job's question and answer become its next turn when it succeeds. Not with history."
    )
    history: list[HistoryMessage] | None = Field(
        None, max_length=MAX_HISTORY_MESSAGES, description="Earlier messages of a conversation the client keeps "
        "itself ({role: user|assistant, content}, oldest first); nothing is recorded. Not with conversation_id.",
    )
    stage_timeouts: StageTimeouts | None = Field(
        None, description="Seconds per stage (pre_search, post_search, response) for this job, each overriding the "
        "collection's; at most the job deadline. See docs/stage-deadlines.md."
    )
