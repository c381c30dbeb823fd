"""Pre-search: a configurable LLM call: a prompt template filled from pipeline fields, the reply mapped into the job.

The template uses ``str.format`` placeholders: ``{query}``, ``{metadata}`` (the job metadata as JSON) or one key of
it (``{metadata[language]}``; a missing key is empty), ``{collection_id}``, ``{user_id}``, and ``{documents}`` /
``{answer}`` (numbered documents and the answer, empty at this stage: the agent runs before search, so that its
output can steer it). A template naming anything else is refused when the config is saved. The reply goes into:

- ``output: "metadata"`` (default): ``metadata[metadata_key]``: the reply text, or its JSON value with
  ``parse_json: true`` (and ``json_schema``, the endpoint is asked for that shape); a reply cut at ``max_tokens``
  is stored with ``metadata["<metadata_key>_truncated"] = true``, or is an error when its JSON did not end;
- ``output: "query"``: the reply replaces the query (the previous one is kept in
  ``metadata["<metadata_key>_previous_query"]``); an empty reply, one cut at ``max_tokens`` or one too long for a
  query is an error, never the query;
- ``output: "both"``: both.

The prompt is fitted to the model's context (``agentsearch.pipeline.platform.prompt_budget``) with room for
``max_tokens`` of reply: ``{documents}`` gives way first; a template that does not fit even without them is not sent (an
error).

Without an LLM endpoint (``AGENTSEARCH_OPENAI_BASE_URL`` / ``_MODEL``) the agent reports ``skipped`` with that
reason.

Usage::

    agent = LlmPrompt({
        "template": "Rewrite this question as a short keyword search query: {query}",
        "output": "query",
    })
    out = agent.run(PreSearchInput(query="what did the board decide about buybacks last quarter?"), ctx)
    out.query      # "board decision share buyback Q4"

    LlmPrompt({"template": "Which department does this concern? One word. {query}", "metadata_key": "department"})
"""

from __future__ import annotations

import json
import re
import string
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from agentsearch.pipeline.agents.base import (
    AgentConfig,
    AgentContext,
    AgentSkipped,
    PreSearchAgent,
    PreSearchInput,
    PreSearchOutput,
)
from agentsearch.pipeline.platform.llm import LLMError, reply_json
from agentsearch.pipeline.platform.prompt_budget import fit, require_fit

PLACEHOLDERS = ("query", "metadata", "collection_id", "user_id", "documents", "answer")
_FENCED = re.compile(r"^```\w*\s*|\s*```$")
DEFAULT_REPLY_TOKENS = 512
MAX_QUERY_CHARS = 1000


class _Missing(dict):
    """Metadata for ``{metadata[key]}``: a key the job does not have is an empty string, not a crash."""

    def __missing__(self, key: str) -> str:
        return ""

    def __format__(self, spec: str) -> str:
        return json.dumps(dict(self), ensure_ascii=False, default=str)

    def __str__(self) -> str:
        return json.dumps(dict(self), ensure_ascii=False, default=str)


def template_fields(template: str) -> list[str]:
    """The root names a template refers to (``{metadata[language]}`` -> ``metadata``)."""
    roots = []
    for _, name, _, _ in string.Formatter().parse(template):
        if name is None:
            continue
        root = re.split(r"[.\[]", name, maxsplit=1)[0]
        roots.append(root)
    return roots


class LlmPrompt(PreSearchAgent):
    agent_id = "llm_prompt"
    version = "1"
    description = (
        "A prompt template filled from pipeline fields ({query}, {metadata[key]}, ...) sent to the configured LLM; "
        "the reply goes into the query and/or metadata (skipped without an LLM)."
    )
    default_timeout_s = 30.0
    cache_ttl_s = 3600

    class Config(AgentConfig):
        template: str = Field(..., min_length=1, description="str.format template; placeholders: "
                              + ", ".join("{" + p + "}" for p in PLACEHOLDERS) + ", {metadata[<key>]}.")
        system: str | None = Field(None, description="Optional system message.")
        output: Literal["metadata", "query", "both"] = Field("metadata", description="Where the reply goes.")
        metadata_key: str = Field("llm_prompt", min_length=1, max_length=100, pattern=r"^[A-Za-z_][\w.-]*$")
        parse_json: bool = Field(False, description="Store the reply's JSON value (code fences tolerated).")
        temperature: float = Field(0.0, ge=0.0, le=2.0)
        max_tokens: int | None = Field(
            None, ge=1, le=32000, description=f"Longest reply, in tokens; unset: {DEFAULT_REPLY_TOKENS}."
        )
        json_schema: dict[str, Any] | None = Field(
            None, description="With parse_json: the JSON Schema the reply must follow (an object), sent to endpoints "
                              "that constrain their output to it."
        )
        llm_timeout_s: float = Field(20.0, gt=0, le=300, description="Budget of the LLM call, retries included.")

        @field_validator("template")
        @classmethod
        def _known_placeholders(cls, value: str) -> str:
            try:
                roots = template_fields(value)
            except ValueError as exc:  # unbalanced braces
                raise ValueError(f"template is not a valid format string: {exc}") from None
            unknown = sorted({r for r in roots if r not in PLACEHOLDERS})
            if "" in unknown:
                raise ValueError("template placeholders must be named, e.g. {query}; write {{ and }} for braces")
            if unknown:
                raise ValueError(f"unknown placeholder(s) {', '.join('{' + u + '}' for u in unknown)}; "
                                 f"known: {', '.join('{' + p + '}' for p in PLACEHOLDERS)}")
            return value

        @field_validator("json_schema")
        @classmethod
        def _object_schema(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
            # Endpoints take an object at the root only (OpenAI); one refusing a schema is asked without any again.
            if value is not None and value.get("type") != "object":
                raise ValueError('json_schema must describe an object: {"type": "object", "properties": {...}}')
            return value

        @model_validator(mode="after")
        def _json_for_metadata(self) -> LlmPrompt.Config:
            if self.parse_json and self.output == "query":
                raise ValueError("parse_json applies to the metadata output; the query is always text")
            if self.json_schema is not None and not self.parse_json:
                raise ValueError("json_schema needs parse_json: true")
            return self

    config: Config

    def fill(self, inp: PreSearchInput, ctx: AgentContext, documents: list[str] | None = None) -> str:
        """The template filled from the job; ``documents`` replaces the numbered documents (fitted to a budget)."""
        if documents is None:
            documents = document_blocks(ctx)
        values: dict[str, Any] = {
            "query": inp.query,
            "metadata": _Missing(inp.metadata),
            "collection_id": inp.collection_id or ctx.collection_id or "",
            "user_id": inp.user_id or ctx.user_id or "",
            "documents": "\n\n".join(documents),
            "answer": "",
        }
        return self.config.template.format(**values)

    def run(self, inp: PreSearchInput, ctx: AgentContext) -> PreSearchOutput:
        llm = ctx.llm
        if llm is None:
            raise AgentSkipped(
                "no LLM endpoint configured (set AGENTSEARCH_OPENAI_BASE_URL and AGENTSEARCH_OPENAI_MODEL); "
                "llm_prompt needs one"
            )
        cfg = self.config
        reply_tokens = cfg.max_tokens or DEFAULT_REPLY_TOKENS
        system = [{"role": "system", "content": cfg.system}] if cfg.system else []
        documents = document_blocks(ctx)
        if documents and "documents" in template_fields(cfg.template):
            # The documents are what gives way: the template and the job's fields are sent whole or not at all.
            bare = [*system, {"role": "user", "content": self.fill(inp, ctx, [])}]
            documents = fit(llm, bare, documents, reply_tokens)
        messages = [*system, {"role": "user", "content": self.fill(inp, ctx, documents)}]
        require_fit(llm, messages, reply_tokens)
        reply = llm.reply(messages, timeout_s=cfg.llm_timeout_s, temperature=cfg.temperature, max_tokens=reply_tokens,
                          json_schema=cfg.json_schema if cfg.parse_json else None)
        key = cfg.metadata_key
        metadata: dict[str, Any] = {}
        query = inp.query
        if cfg.output in ("query", "both"):
            text = _FENCED.sub("", reply.text.strip()).strip().strip('"').strip()
            if not text:
                raise LLMError("the LLM's reply was empty; the query is left as it was")
            if reply.truncated:
                raise LLMError(f"the LLM's reply was cut at max_tokens ({reply_tokens}); the query is left as it was")
            if len(text) > MAX_QUERY_CHARS:
                raise LLMError(f"the LLM's reply is {len(text)} characters, too long for a query; the query is left "
                               "as it was")
            query = " ".join(text.split())
            metadata[f"{key}_previous_query"] = inp.query
        if cfg.output in ("metadata", "both"):
            metadata[key] = reply_json(reply) if cfg.parse_json else reply.text.strip()
            if reply.truncated:
                metadata[f"{key}_truncated"] = True
        return PreSearchOutput(query=query, metadata=metadata)


def document_blocks(ctx: AgentContext) -> list[str]:
    """The job's documents as the numbered blocks ``{documents}`` shows."""
    return [f"[{n}] {d.title}\n{d.text}".strip() for n, d in enumerate(ctx.retrieved_documents or [], 1)]
