"""A toolbox for agent unit tests that need registered tools or collection ownership, without a database.

It answers like ``agentsearch.pipeline.agents.toolbox.AgentTools`` bound to a user: ``registered_tool(kind, name)`` from
the tools it was given, ``owned_collection(id)`` for the ids it was told the user owns, and the operator's
``egress_policy``; anything else (search, embed, llm, breaker) can be added as attributes.

Usage::

    tools = RegisteredToolbox([RegisteredTool(name="make_outline", kind="mcp", command=[sys.executable, "-m",
                                                "tests.support.mcp_server"], cwd=str(REPO))])
    McpTool({"context_forge_tool_id": "make_outline"}).run(inp, AgentContext(pipeline_stage=..., tools=tools))
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agentsearch.pipeline.agents.references import collection_missing, tool_missing
from agentsearch.pipeline.platform.egress import EgressPolicy
from agentsearch.pipeline.security.registered_tools import RegisteredTool


class RegisteredToolbox:
    def __init__(self, tools: Iterable[RegisteredTool] = (), owned: Iterable[str] = (),
                 egress_policy: EgressPolicy | None = None, **extra: Any) -> None:
        self.tools = {(t.kind, t.name): t for t in tools}
        self.owned = set(owned)
        self.egress_policy = egress_policy or EgressPolicy()
        self.lookups: list[tuple[str, str]] = []
        for name, value in extra.items():
            setattr(self, name, value)

    def registered_tool(self, kind: str, name: str) -> RegisteredTool:
        self.lookups.append((kind, name))
        if (kind, name) not in self.tools:
            raise tool_missing(kind, name)
        return self.tools[(kind, name)]

    def owned_collection(self, collection_id: str) -> str:
        if collection_id not in self.owned:
            raise collection_missing(collection_id)
        return collection_id
