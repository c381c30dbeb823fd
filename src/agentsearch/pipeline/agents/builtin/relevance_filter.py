"""Post-search: drop documents that are unlikely to help, and say which and why.

Four rules, each off when unset:

- ``min_score``: a document scored below it goes (after a reranker, this is the reranker's score);
- ``blocked_domains``: a document whose ``metadata["url"]`` host is one of them, or a subdomain of one, goes (the
  default list is open blogging platforms, where anyone publishes without review: medium.com, dev.to,
  hackernoon.com, towardsdatascience.com, levelup.gitconnected.com; ``www.medium.com`` and ``blog.medium.com``
  match ``medium.com``, ``notmedium.com`` does not);
- ``max_age_days``: a document whose ``metadata["published"]`` (ISO date or date-time) is older than that, counted
  from ``reference_date`` (today, UTC, by default), goes; undated or unparseable ones stay unless
  ``keep_undated`` is false;
- ``min_words``: a document with fewer words of text goes.

Every removal is listed in ``metadata["filtered"]`` as ``{"document_id", "reason", "detail"}`` (``reason`` is one of
``min_score``, ``low_quality_domain``, ``too_old``, ``undated``, ``too_short``; the first rule that fails is named),
with counts per reason in ``metadata["filtered_counts"]``.

Usage::

    agent = RelevanceFilter({"min_score": 0.3, "max_age_days": 365, "min_words": 40})
    out = agent.run(PostSearchInput(documents=docs, query="q"), ctx)
    out.metadata["filtered"]   # [{"document_id": "blog-7", "reason": "low_quality_domain", "detail": "medium.com"}]
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any
from urllib.parse import urlsplit

from pydantic import Field, field_validator

from agentsearch.pipeline.agents.base import (
    AgentConfig,
    AgentContext,
    Document,
    PostSearchAgent,
    PostSearchInput,
    PostSearchOutput,
)
from agentsearch.pipeline.text import words

DEFAULT_BLOCKED_DOMAINS = [
    "medium.com", "dev.to", "hackernoon.com", "towardsdatascience.com", "levelup.gitconnected.com",
]


def url_host(url: Any) -> str | None:
    if not isinstance(url, str) or not url.strip():
        return None
    url = url.strip()
    if "://" not in url:
        url = "//" + url  # "medium.com/@x/post" has no scheme but still names a host
    try:
        host = urlsplit(url).hostname
    except ValueError:
        return None
    return host.rstrip(".").lower() if host else None


def blocked_domain(host: str | None, domains: list[str]) -> str | None:
    """The blocked domain ``host`` is, or is under; None if none."""
    if not host:
        return None
    return next((d for d in domains if host == d or host.endswith("." + d)), None)


def published_date(value: Any) -> date | None:
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).date()
    except ValueError:
        pass
    try:
        return date.fromisoformat(text[:10])
    except ValueError:
        return None


class RelevanceFilter(PostSearchAgent):
    agent_id = "relevance_filter"
    version = "1"
    description = "Drops documents below a score, from low-quality domains, too old or too short; reports why."
    default_timeout_s = 5.0
    cache_ttl_s = 3600

    class Config(AgentConfig):
        min_score: float | None = Field(None, description="Drop documents scored below this.")
        blocked_domains: list[str] = Field(default_factory=lambda: list(DEFAULT_BLOCKED_DOMAINS))
        max_age_days: int | None = Field(None, ge=0, description="Drop documents published longer ago than this.")
        reference_date: date | None = Field(None, description="The day ages are counted from (default: today, UTC).")
        keep_undated: bool = Field(True, description="With max_age_days, keep documents without a usable date.")
        min_words: int = Field(10, ge=0, description="Drop documents with fewer words of text (0: off).")

        @field_validator("blocked_domains")
        @classmethod
        def _normalise_domains(cls, domains: list[str]) -> list[str]:
            cleaned = []
            for d in domains:
                d = d.strip().lower().rstrip(".")
                d = d[4:] if d.startswith("www.") else d
                if not d or "/" in d or " " in d:
                    raise ValueError(f"not a domain name: {d!r}")
                cleaned.append(d)
            return cleaned

    config: Config

    def _reason(self, doc: Document, today: date) -> tuple[str, str] | None:
        cfg = self.config
        if cfg.min_score is not None and doc.score < cfg.min_score:
            return "min_score", f"score {doc.score:.4f} below {cfg.min_score:g}"
        domain = blocked_domain(url_host(doc.metadata.get("url")), cfg.blocked_domains)
        if domain:
            return "low_quality_domain", domain
        if cfg.max_age_days is not None:
            published = published_date(doc.metadata.get("published"))
            if published is None:
                if not cfg.keep_undated:
                    return "undated", "no usable metadata.published"
            else:
                age = (today - published).days
                if age > cfg.max_age_days:
                    return "too_old", f"published {published.isoformat()}, {age} days ago (max {cfg.max_age_days})"
        if cfg.min_words:
            count = len(words(doc.text))
            if count < cfg.min_words:
                return "too_short", f"{count} words (min {cfg.min_words})"
        return None

    def run(self, inp: PostSearchInput, ctx: AgentContext) -> PostSearchOutput:
        today = self.config.reference_date or datetime.now(UTC).date()
        kept, filtered = [], []
        counts: dict[str, int] = {}
        for doc in inp.documents:
            reason = self._reason(doc, today)
            if reason is None:
                kept.append(doc)
            else:
                filtered.append({"document_id": doc.id, "reason": reason[0], "detail": reason[1]})
                counts[reason[0]] = counts.get(reason[0], 0) + 1
        return PostSearchOutput(documents=kept, metadata={"filtered": filtered, "filtered_counts": counts})
