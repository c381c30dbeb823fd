"""Post-search: enrich each document with data from a configured HTTP endpoint.

For each of the first ``max_documents`` documents the agent GETs ``url_template`` with its placeholders filled in,
URL-encoded: ``{document_id}``, ``{query}`` and ``{metadata.<key>}`` (the document's metadata). The JSON reply is
mapped into the document's metadata by ``mapping: {"metadata_key": "$.path.to.value"}``; paths are dotted and
indexed (``$.data.items[0].name``, ``$['key with spaces']``, negative indexes count from the end).

Failures stay per document: a timeout (``timeout_s``, per request, below the agent's deadline), a connection error,
an HTTP error, a reply that is not JSON, or a placeholder the document cannot fill is written to that document's
``metadata["enrichment_error"]`` and the other documents are still enriched. A path the reply does not hold is
listed in ``metadata["enrichment_missing"]``. Requests stop being started once ``total_timeout_s`` is spent.

The endpoint has its own circuit breaker (``fail_max`` failures - timeouts, connection errors, 429 and 5xx, replies
that are not JSON - open it for ``reset_timeout_s``; a 4xx for one document is that document's answer, not an
endpoint failure). While it is open, no request is made and documents get ``enrichment_error: "circuit open ..."``.
When the toolbox offers ``ctx.tools.breaker(name, fail_max, reset_timeout_s)`` (an object with ``admits()`` and
``record(error)``, like ``pipeline.breakers.AgentBreaker``), that breaker is used and shared by every worker;
otherwise the breaker lives in this process (pybreaker, in memory).

The template's scheme and host are fixed: placeholders are refused there, and placeholder values are
percent-encoded (``/``, ``?``, ``#`` too), so a document can only change the path or query it is put in.

Usage::

    agent = ExternalEnricher({
        "url_template": "https://crm.example/api/companies/{metadata.company_id}?q={query}",
        "headers": {"Authorization": "Bearer ..."},
        "mapping": {"industry": "$.company.industry", "employees": "$.company.size.employees"},
        "timeout_s": 2.0,
    })
    out = agent.run(PostSearchInput(documents=docs, query="q"), ctx)
    out.documents[0].metadata["industry"]   # "Utilities"
    out.metadata["enrichment"]              # {"enriched": 4, "failed": 1, "not_attempted": 0, "breaker": "closed"}
"""

from __future__ import annotations

import json
import re
import threading
import time
from typing import Any
from urllib.parse import quote, urlsplit

import httpx
from pydantic import Field, field_validator, model_validator

from pipeline.agents.base import (
    AgentConfig,
    AgentContext,
    AgentSkipped,
    Document,
    PostSearchAgent,
    PostSearchInput,
    PostSearchOutput,
)
from pipeline.breakers import AgentBreaker
from pipeline.kv import canonical_hash

_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
# One step of a JSON path: .name | [index] | ['key'] | ["key"]
_PATH_STEP = re.compile(
    r"\.([A-Za-z_$][\w$-]*)|\[(-?\d+)\]|\[\s*'((?:[^'\\]|\\.)*)'\s*\]|\[\s*\"((?:[^\"\\]|\\.)*)\"\s*\]"
)


# --- JSON paths -------------------------------------------------------------------------------------------------


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING = _Missing()


def parse_path(path: str) -> list[str | int]:
    """``$.a.b[0]['c d']`` -> ``["a", "b", 0, "c d"]``; ValueError if it is not such a path."""
    path = path.strip()
    if not path.startswith("$"):
        raise ValueError(f"JSON path {path!r} must start with '$'")
    steps: list[str | int] = []
    pos = 1
    while pos < len(path):
        m = _PATH_STEP.match(path, pos)
        if m is None:
            raise ValueError(f"JSON path {path!r}: cannot read {path[pos:]!r}")
        name, index, single, double = m.groups()
        if index is not None:
            steps.append(int(index))
        else:
            quoted = single if single is not None else double
            steps.append(name if name is not None else re.sub(r"\\(.)", r"\1", quoted))
        pos = m.end()
    return steps


def resolve_path(data: Any, steps: list[str | int]) -> Any:
    """The value at ``steps`` in ``data``, or ``MISSING``."""
    for step in steps:
        if isinstance(step, int):
            if not isinstance(data, list) or not -len(data) <= step < len(data):
                return MISSING
            data = data[step]
        else:
            if not isinstance(data, dict) or step not in data:
                return MISSING
            data = data[step]
    return data


# --- the endpoint's breaker -------------------------------------------------------------------------------------


_breakers: dict[tuple[str, int, float], AgentBreaker] = {}
_breakers_lock = threading.Lock()


def memory_breaker(name: str, fail_max: int, reset_timeout_s: float) -> AgentBreaker:
    with _breakers_lock:
        key = (name, fail_max, reset_timeout_s)
        if key not in _breakers:
            _breakers[key] = AgentBreaker(name, None, fail_max, reset_timeout_s)
        return _breakers[key]


class EndpointError(Exception):
    """The endpoint failed (counts for its breaker)."""


class DocumentError(Exception):
    """This document could not be enriched, but the endpoint is fine."""


class _NotAttempted(DocumentError):
    """No request was made for this document (open circuit, time budget spent)."""


# --- the agent --------------------------------------------------------------------------------------------------


class ExternalEnricher(PostSearchAgent):
    agent_id = "external_enricher"
    version = "1"
    description = ("Calls a configured HTTP endpoint per document (URL template) and maps JSON paths of the reply "
                   "into document metadata; own timeout and circuit breaker.")
    default_timeout_s = 30.0
    cache_ttl_s = 300  # external data moves; and a partly failed run should not be served for long

    class Config(AgentConfig):
        url_template: str | None = Field(
            None, description="http(s) URL with {document_id}, {query}, {metadata.<key>} placeholders."
        )
        headers: dict[str, str] = Field(default_factory=dict)
        mapping: dict[str, str] = Field(default_factory=dict, description='{"metadata_key": "$.path.to.value"}')
        timeout_s: float = Field(3.0, gt=0.0, le=60.0, description="Per request.")
        total_timeout_s: float = Field(
            20.0, gt=0.0, le=300.0, description="No new request after this; keep it below the agent deadline."
        )
        max_documents: int = Field(10, ge=1, le=100)
        fail_max: int = Field(5, ge=1, le=1000, description="Endpoint failures that open its circuit.")
        # Whole seconds: the breaker keeps its opening time at one-second resolution.
        reset_timeout_s: float = Field(60.0, ge=1.0, le=3600.0)
        max_response_bytes: int = Field(1_000_000, ge=1024, le=50_000_000)

        @field_validator("url_template")
        @classmethod
        def _template(cls, template: str | None) -> str | None:
            if template is None:
                return None
            parts = urlsplit(template)
            if parts.scheme not in ("http", "https") or not parts.netloc:
                raise ValueError("url_template must be an absolute http(s) URL")
            if "{" in parts.netloc or "}" in parts.netloc:
                raise ValueError("placeholders are not allowed in the URL's host")
            for name in _PLACEHOLDER.findall(template):
                if name not in ("document_id", "query") and not (name.startswith("metadata.") and len(name) > 9):
                    raise ValueError(
                        f"unknown placeholder {{{name}}}: use {{document_id}}, {{query}} or {{metadata.<key>}}"
                    )
            return template

        @field_validator("mapping")
        @classmethod
        def _paths(cls, mapping: dict[str, str]) -> dict[str, str]:
            for key, path in mapping.items():
                if not key.strip():
                    raise ValueError("mapping keys must be non-empty metadata keys")
                parse_path(path)
            return mapping

        @model_validator(mode="after")
        def _consistent(self) -> "ExternalEnricher.Config":
            if self.url_template and not self.mapping:
                raise ValueError("mapping is empty: nothing of the reply would be kept")
            if self.timeout_s > self.total_timeout_s:
                raise ValueError("timeout_s must not be above total_timeout_s")
            return self

    def __init__(self, config=None) -> None:
        super().__init__(config)
        self._paths = {key: parse_path(path) for key, path in self.config.mapping.items()}

    def endpoint(self) -> str:
        parts = urlsplit(self.config.url_template or "")
        return f"{parts.scheme}://{parts.netloc}{parts.path}"

    def render_url(self, doc: Document, query: str) -> str:
        def fill(m: re.Match) -> str:
            name = m.group(1)
            if name == "document_id":
                value: Any = doc.id
            elif name == "query":
                value = query
            else:
                key = name[len("metadata."):]
                value = doc.metadata.get(key, MISSING)
                if value is MISSING and "." in key:  # nested metadata: {metadata.company.id}
                    value = resolve_path(doc.metadata, key.split("."))
                if value is MISSING or value is None:
                    raise DocumentError(f"document has no metadata.{key} for the URL")
            if not isinstance(value, str):
                value = json.dumps(value) if isinstance(value, (dict, list, bool)) else str(value)
            return quote(value, safe="")

        return _PLACEHOLDER.sub(fill, self.config.url_template or "")

    def _breaker(self, ctx: AgentContext):
        name = f"external_enricher:{canonical_hash(self.endpoint())}"
        shared = getattr(ctx.tools, "breaker", None)
        if callable(shared):
            return shared(name, self.config.fail_max, self.config.reset_timeout_s), "shared"
        return memory_breaker(name, self.config.fail_max, self.config.reset_timeout_s), "process"

    def _fetch(self, client: httpx.Client, url: str) -> Any:
        try:
            with client.stream("GET", url) as response:
                status = response.status_code
                body = bytearray()
                for chunk in response.iter_bytes():
                    body += chunk
                    if len(body) > self.config.max_response_bytes:
                        raise EndpointError(f"reply larger than {self.config.max_response_bytes} bytes")
        except httpx.TimeoutException as exc:
            raise EndpointError(f"timeout after {self.config.timeout_s:g} s ({type(exc).__name__})") from exc
        except httpx.HTTPError as exc:
            raise EndpointError(f"{type(exc).__name__}: {exc}") from exc
        if status == 429 or status >= 500:
            raise EndpointError(f"HTTP {status}")
        if status >= 400:
            raise DocumentError(f"HTTP {status}")
        if status >= 300:
            raise EndpointError(f"HTTP {status} (redirects are not followed)")
        try:
            return json.loads(bytes(body))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise EndpointError(f"reply is not JSON: {exc}") from exc

    def run(self, inp: PostSearchInput, ctx: AgentContext) -> PostSearchOutput:
        cfg = self.config
        if not cfg.url_template:
            raise AgentSkipped("no url_template configured")
        breaker, scope = self._breaker(ctx)
        started = time.monotonic()
        counts = {"enriched": 0, "failed": 0, "not_attempted": 0, "requests": 0}
        out_docs: list[Document] = []
        timeout = httpx.Timeout(cfg.timeout_s)
        with httpx.Client(timeout=timeout, headers=cfg.headers, follow_redirects=False) as client:
            for index, doc in enumerate(inp.documents):
                if index >= cfg.max_documents:
                    out_docs.append(doc)
                    continue
                metadata = dict(doc.metadata)
                metadata.pop("enrichment_error", None)
                metadata.pop("enrichment_missing", None)
                try:
                    if time.monotonic() - started >= cfg.total_timeout_s:
                        raise _NotAttempted(f"not attempted: total_timeout_s ({cfg.total_timeout_s:g} s) spent")
                    url = self.render_url(doc, inp.query)
                    if not breaker.admits():
                        raise _NotAttempted(f"circuit open for {self.endpoint()} after repeated failures")
                    counts["requests"] += 1
                    try:
                        data = self._fetch(client, url)
                    except EndpointError as exc:
                        breaker.record(exc)
                        raise
                    except DocumentError:
                        breaker.record(None)  # the endpoint answered: a 4xx is this document's answer
                        raise
                    breaker.record(None)
                except (EndpointError, DocumentError) as exc:
                    metadata["enrichment_error"] = str(exc)
                    counts["not_attempted" if isinstance(exc, _NotAttempted) else "failed"] += 1
                    out_docs.append(doc.model_copy(update={"metadata": metadata}))
                    continue
                missing = []
                for key, steps in self._paths.items():
                    value = resolve_path(data, steps)
                    if value is MISSING:
                        missing.append(cfg.mapping[key])
                    else:
                        metadata[key] = value
                if missing:
                    metadata["enrichment_missing"] = missing
                counts["enriched"] += 1
                out_docs.append(doc.model_copy(update={"metadata": metadata}))
        summary = {**counts, "endpoint": self.endpoint(), "breaker": getattr(breaker, "state", "unknown"),
                   "breaker_scope": scope}
        return PostSearchOutput(documents=out_docs, metadata={"enrichment": summary})
