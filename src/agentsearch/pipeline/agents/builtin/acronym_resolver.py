"""Pre-search: expand acronyms in the query from a per-collection dictionary and from the collection's own text.

Two sources, merged: the ``acronyms`` of the agent's config, and the definitions mined from the collection's
indexed text ("power purchase agreement (PPA)", "fourth quarter (Q4)": see ``agentsearch.pipeline.text.acronyms``), read
through ``ctx.tools.acronyms`` (cached per index epoch). The configured dictionary wins where both define an acronym.
The query keeps the acronym and gains its expansion, so documents using either form match; an acronym whose
expansion the query already spells out is left alone.

Usage::

    agent = AcronymResolver({"acronyms": {"Q4": "fourth quarter"}})      # mined definitions are used too
    out = agent.run(PreSearchInput(query="PPA prices in Q4", collection_id=cid), ctx)
    out.query                          # "PPA (power purchase agreement) prices in Q4 (fourth quarter)"
    out.metadata["acronym_sources"]    # {"PPA": "mined", "Q4": "config"}
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field, field_validator

from agentsearch.pipeline.agents.base import (
    AgentConfig,
    AgentContext,
    AgentSkipped,
    PreSearchAgent,
    PreSearchInput,
    PreSearchOutput,
)


class AcronymResolver(PreSearchAgent):
    agent_id = "acronym_resolver"
    version = "2"
    description = ("Expands acronyms in the query from a configured dictionary and definitions mined from the "
                   "collection.")
    default_timeout_s = 5.0

    class Config(AgentConfig):
        acronyms: dict[str, str] = Field(default_factory=dict, description="Acronym -> expansion.")
        case_sensitive: bool = Field(True, description="Match 'PPA' but not 'ppa' (avoids expanding plain words).")
        use_mined: bool = Field(
            True, description="Also use the acronym definitions mined from the collection's text (config wins)."
        )

        @field_validator("acronyms")
        @classmethod
        def _non_empty_entries(cls, value: dict[str, str]) -> dict[str, str]:
            for key, expansion in value.items():
                if not key.strip() or not expansion.strip():
                    raise ValueError(f"acronym {key!r} needs a non-empty name and expansion")
            return value

    config: Config

    def run(self, inp: PreSearchInput, ctx: AgentContext) -> PreSearchOutput:
        mined, mining_error = self._mined(inp, ctx)
        dictionary = {**mined, **self.config.acronyms}
        if not dictionary:
            reason = "no acronyms configured or mined from the collection"
            raise AgentSkipped(f"{reason} ({mining_error})" if mining_error else reason)
        case_sensitive = self.config.case_sensitive
        flags = 0 if case_sensitive else re.IGNORECASE
        lookup = {(k if case_sensitive else k.lower()): k for k in dictionary}
        # Longest first, so "EU ETS" is not hidden by "EU".
        names = sorted(dictionary, key=len, reverse=True)
        pattern = re.compile(r"\b(" + "|".join(re.escape(k) for k in names) + r")\b", flags)
        already = inp.query.lower()
        resolved: dict[str, str] = {}
        sources: dict[str, str] = {}

        def expand(match: re.Match[str]) -> str:
            name = lookup[match.group(1) if case_sensitive else match.group(1).lower()]
            expansion = dictionary[name]
            if expansion.lower() in already:  # "fourth quarter (Q4)" needs no second "(fourth quarter)"
                return match.group(1)
            resolved[match.group(1)] = expansion
            sources[match.group(1)] = "config" if name in self.config.acronyms else "mined"
            return f"{match.group(1)} ({expansion})"

        query = pattern.sub(expand, inp.query)
        metadata: dict[str, Any] = {"acronyms_resolved": resolved, "acronym_sources": sources}
        if mining_error:
            metadata["acronym_mining_error"] = mining_error
        return PreSearchOutput(query=query, metadata=metadata)

    def _mined(self, inp: PreSearchInput, ctx: AgentContext) -> tuple[dict[str, str], str | None]:
        collection_id = inp.collection_id or ctx.collection_id
        if not (self.config.use_mined and ctx.tools is not None and collection_id):
            return {}, None
        try:
            mined = ctx.tools.acronyms(collection_id)
        except Exception as exc:  # noqa: BLE001 - the configured dictionary still works without the mined one
            return {}, f"could not read mined acronyms: {type(exc).__name__}: {exc}"
        return {k: v for k, v in mined.items() if k.strip() and isinstance(v, str) and v.strip()}, None
