"""Pre-search: expand acronyms in the query from a per-collection dictionary.

The query keeps the acronym and gains its expansion, so documents using either form match.

Usage::

    agent = AcronymResolver({"acronyms": {"PPA": "power purchase agreement", "Q4": "fourth quarter"}})
    agent.run(PreSearchInput(query="PPA prices in Q4"), ctx).query
    # "PPA (power purchase agreement) prices in Q4 (fourth quarter)"
"""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from pipeline.agents.base import AgentConfig, AgentContext, AgentSkipped, PreSearchAgent, PreSearchInput, PreSearchOutput


class AcronymResolver(PreSearchAgent):
    agent_id = "acronym_resolver"
    version = "1"
    description = "Expands acronyms in the query from a configured dictionary."
    default_timeout_s = 5.0

    class Config(AgentConfig):
        acronyms: dict[str, str] = Field(default_factory=dict, description="Acronym -> expansion.")
        case_sensitive: bool = Field(True, description="Match 'PPA' but not 'ppa' (avoids expanding plain words).")

        @field_validator("acronyms")
        @classmethod
        def _non_empty_entries(cls, value: dict[str, str]) -> dict[str, str]:
            for key, expansion in value.items():
                if not key.strip() or not expansion.strip():
                    raise ValueError(f"acronym {key!r} needs a non-empty name and expansion")
            return value

    def run(self, inp: PreSearchInput, ctx: AgentContext) -> PreSearchOutput:
        if not self.config.acronyms:
            raise AgentSkipped("no acronyms configured")
        flags = 0 if self.config.case_sensitive else re.IGNORECASE
        lookup = {(k if self.config.case_sensitive else k.lower()): v for k, v in self.config.acronyms.items()}
        # Longest first, so "EU ETS" is not hidden by "EU".
        names = sorted(self.config.acronyms, key=len, reverse=True)
        pattern = re.compile(r"\b(" + "|".join(re.escape(k) for k in names) + r")\b", flags)
        resolved: dict[str, str] = {}

        def expand(match: re.Match[str]) -> str:
            key = match.group(1) if self.config.case_sensitive else match.group(1).lower()
            expansion = lookup[key]
            resolved[match.group(1)] = expansion
            return f"{match.group(1)} ({expansion})"

        query = pattern.sub(expand, inp.query)
        return PreSearchOutput(query=query, metadata={"acronyms_resolved": resolved})
