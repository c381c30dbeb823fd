"""Specialist profiles: several iterative searches side by side, each with its own query, target and thresholds,
merged by category, one list per profile's category with the counts beside them::

    {"<category>": [item, ...], ..., "total": n, "by_category_count": {"<category>": k, ...}}

A profile's ``query_template`` holds ``{query}`` where the job's query goes ("{query} product launches and API
releases"); a template without it is a standing query (what a scheduled profile set runs). A document found by two
profiles is listed once, in the category that scored it best: a briefing should not show it twice.

Usage::

    profiles = ProfileSet(profiles=[Profile(name="research", query_template="{query} study results", target=2),
                                    Profile(name="industry", query_template="{query} company launch", target=3)])
    config = profiles.profiles[0].iterative_config(IterativeConfig())
    merged = merge_by_category({"research": [judged, ...], "industry": [...]})
    merged["total"], merged["by_category_count"]
"""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, field_validator, model_validator

from agentsearch.pipeline.agentic.config import IterativeConfig, Thresholds, check_search_overrides
from agentsearch.pipeline.agentic.loop import JudgedDocument

RESERVED_NAMES = frozenset({"total", "by_category_count"})


class Profile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=64, pattern=r"^[a-z0-9][a-z0-9_-]*$",
                      description="The category its results are merged under.")
    query_template: str = Field("{query}", min_length=1, max_length=2000)
    target: StrictInt | None = Field(None, ge=1, le=100, description="Results to keep; unset: the job's target.")
    collections: list[uuid.UUID] = Field(default_factory=list, max_length=20,
                                         description="Collections searched; empty: the job's collection.")
    thresholds: Thresholds | None = None
    max_iterations: StrictInt | None = Field(None, ge=1, le=10)
    per_iteration: StrictInt | None = Field(None, ge=1, le=50)
    search: dict[str, Any] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _not_reserved(cls, value: str) -> str:
        if value in RESERVED_NAMES:
            raise ValueError(f"{value!r} is a key of the merged result; choose another name")
        return value

    @field_validator("search")
    @classmethod
    def _search(cls, value: dict[str, Any]) -> dict[str, Any]:
        return check_search_overrides(value)

    @field_validator("query_template")
    @classmethod
    def _template(cls, value: str) -> str:
        try:
            value.format(query="x")
        except (KeyError, IndexError, ValueError) as exc:
            raise ValueError(f"query_template may only use {{query}}: {exc}") from None
        return value

    def render(self, query: str) -> str:
        return " ".join(self.query_template.format(query=query).split())

    def iterative_config(self, base: IterativeConfig) -> IterativeConfig:
        """The job's iterative settings with this profile's own target, thresholds, budget and search options (each
        only where the profile sets it)."""
        update: dict[str, Any] = {}
        if self.target is not None:
            update["target"] = self.target
        if self.thresholds is not None:
            update["thresholds"] = self.thresholds
        if self.max_iterations is not None:
            update["max_iterations"] = self.max_iterations
        if self.per_iteration is not None:
            update["per_iteration"] = self.per_iteration
        if self.search:
            update["search"] = {**base.search, **self.search}
        # Validated again: the combination must hold too.
        return IterativeConfig.model_validate({**base.model_dump(), **update})


class ProfileSet(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    profiles: list[Profile] = Field(min_length=1, max_length=10)

    @model_validator(mode="after")
    def _unique_names(self) -> ProfileSet:
        names = [p.name for p in self.profiles]
        if len(set(names)) != len(names):
            raise ValueError("profile names must be unique: each is a category of the merged result")
        return self


def item(judged: JudgedDocument) -> dict[str, Any]:
    """One merged result: what a reader of a briefing needs, not the whole loop record."""
    doc, evaluation = judged.document, judged.evaluation
    return {
        "document_id": doc.id,
        "title": doc.title,
        "text": doc.text,
        "url": doc.metadata.get("url"),
        "collection_id": doc.metadata.get("collection_id"),
        "score": doc.score,
        "overall": evaluation.overall,
        "evaluation": evaluation.model_dump(exclude={"document_id"}),
        "iteration": judged.iteration,
        "query": judged.query,
    }


def _identity(judged: JudgedDocument) -> str:
    meta = judged.document.metadata
    return meta.get("url") or f"{meta.get('collection_id', '')}/{judged.document.id}"


def merge_by_category(results: dict[str, list[JudgedDocument]]) -> dict[str, Any]:
    """``{category: [item, ...], "total": n, "by_category_count": {...}}``; a document found by several profiles
    stays only where it scored best."""
    best: dict[str, tuple[float, str]] = {}
    for category, judged_list in results.items():
        for judged in judged_list:
            score = judged.evaluation.overall if judged.evaluation.overall is not None else 0.0
            key = _identity(judged)
            if key not in best or score > best[key][0]:
                best[key] = (score, category)
    merged: dict[str, Any] = {}
    counts: dict[str, int] = {}
    for category, judged_list in results.items():
        items = [item(j) for j in judged_list if best[_identity(j)][1] == category]
        merged[category] = items
        counts[category] = len(items)
    merged["total"] = sum(counts.values())
    merged["by_category_count"] = counts
    return merged
