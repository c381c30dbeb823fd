"""What the MCP tools send to the API: a tool's arguments turned into the body of an API request.

A collection is named by id or by name (an MCP client's model knows names better than UUIDs); retrieval options
the tool takes as parameters of their own (``strategy``) join the ``search`` overrides the API validates. The
API checks everything else, with the same words it gives an HTTP client.

Usage::

    ref = CollectionRef.parse("handbook")                 # by name; CollectionRef.parse("0f8c...") by id
    body = search_body(collection_id, "notice period", top_k=5, strategy="keyword")
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Literal

from mcp.server.mcpserver.exceptions import ToolError

from agentsearch.pipeline.retrieval.config import Strategy

# How long a tool waits for a job or an ingest before it answers with what to poll. The API's own `?wait=` stops
# at 60 s; past that the tool polls. Two minutes keeps a call within what MCP clients wait for a tool by default.
MAX_WAIT_S = 120.0
DEFAULT_WAIT_S = 30.0

Mode = Literal["single", "iterative"]


@dataclass(frozen=True)
class CollectionRef:
    """A collection as a tool's caller names it: by its id, or by its name (unique per user; TEAM/NAME: a team's)."""

    id: uuid.UUID | None = None
    name: str | None = None

    @classmethod
    def parse(cls, value: str) -> CollectionRef:
        text = value.strip()
        if not text:
            raise ToolError("collection: give a collection id or name")
        try:
            return cls(id=uuid.UUID(text))
        except ValueError:
            return cls(name=text)

    def __str__(self) -> str:
        return str(self.id) if self.id is not None else repr(self.name)


def search_body(collection_id: uuid.UUID, query: str, *, top_k: int | None = None, strategy: Strategy | None = None,
                search: dict[str, Any] | None = None, agents: list[str] | None = None,
                also_search: list[uuid.UUID] | None = None, mode: Mode = "single",
                use_cache: bool = True, metadata_filter: dict[str, Any] | None = None,
                stage_timeouts: dict[str, float] | None = None) -> dict[str, Any]:
    """The body of ``POST /v1/search`` for these arguments; options left unset stay out, so the API's defaults
    (and the collection's agent set) apply."""
    overrides = dict(search or {})
    if strategy is not None:
        if overrides.get("strategy", strategy) != strategy:
            raise ToolError(f"strategy is given twice with different values: strategy={strategy!r} and "
                            f"search.strategy={overrides['strategy']!r}; give one")
        overrides["strategy"] = strategy
    body: dict[str, Any] = {"collection_id": str(collection_id), "query": query, "mode": mode,
                            "use_cache": use_cache}
    if top_k is not None:
        body["top_k"] = top_k
    if overrides:
        body["search"] = overrides
    if agents is not None:
        body["agents"] = agents
    if also_search:
        body["also_search"] = [str(c) for c in also_search]
    if metadata_filter is not None:
        body["filter"] = metadata_filter
    if stage_timeouts is not None:
        body["stage_timeouts"] = stage_timeouts  # checked by the API, whose 422 names the stage at fault
    return body
