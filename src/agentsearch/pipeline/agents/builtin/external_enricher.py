"""Post-search: enrich each document with data from an operator-registered HTTP endpoint.

The endpoint is an operator's: ``endpoint`` names a tool registered with ``agentsearch tools add NAME --kind http
--url TEMPLATE [--header ...] [--allow-internal]``; the config sets only what to keep from the reply and its
limits. A config carrying ``url_template`` or ``headers`` is refused when it is saved (422 naming the field); so
is one naming an endpoint nobody registered, and a removed one is this agent's ``error`` when it runs.

For each of the first ``max_documents`` documents the agent GETs the registered URL template with its
placeholders filled in, URL-encoded: ``{document_id}``, ``{query}`` and ``{metadata.<key>}`` (the document's
metadata). The JSON reply is mapped into the document's metadata by ``mapping: {"metadata_key": "$.path.to.value"}``;
paths are dotted and indexed (``$.data.items[0].name``, ``$['key with spaces']``, negative indexes count from the
end).

Every connection goes through the egress guard (``agentsearch.pipeline.security``), at connect time: an endpoint whose
host is (or now resolves to) a loopback, private, link-local or cloud metadata address is refused unless the operator
allowed it (``--allow-internal`` for the tool's host, ``AGENTSEARCH_EGRESS_ALLOW``); such a document gets
``enrichment_error: "egress refused: ..."`` and no request is made. Redirects are not followed.

Failures stay per document: a timeout (``timeout_s``, per request, below the agent's deadline), a connection error,
an HTTP error, a reply that is not JSON, larger than ``max_response_bytes`` or nested deeper than a request's own
metadata may be (``agentsearch.pipeline.security.storable.MAX_DEPTH``), or a placeholder the document cannot fill is
written to that document's ``metadata["enrichment_error"]`` and the other documents are still enriched. A path the reply
does not hold is listed in ``metadata["enrichment_missing"]``. Requests stop being started once ``total_timeout_s`` is
spent.

The endpoint has its own circuit breaker (``fail_max`` failures - timeouts, connection errors, 429 and 5xx, replies
that are not JSON or too deep - open it for ``reset_timeout_s``; a 4xx for one document is that document's answer,
not an endpoint failure). While it is open, no request is made and documents get ``enrichment_error: "circuit open
..."``.
When the toolbox offers ``ctx.tools.breaker(name, fail_max, reset_timeout_s)`` (an object with ``admits()`` and
``record(error)``, like ``agentsearch.pipeline.platform.breakers.AgentBreaker``), that breaker is used and shared by
every worker; otherwise the breaker lives in this process (pybreaker, in memory). Either way it is the job's user's own:
the limits come from the user's config, so another user's failures never open it.

The template's scheme and host are fixed: placeholders are refused there (when the tool is registered), and
placeholder values are percent-encoded (``/``, ``?``, ``#``, ``%`` and ``.`` too), so a value stays inside the path
segment or query parameter it is put in. Dots are encoded because a value ``..`` (or ``.``) would otherwise be a
dot segment, which the client resolves before sending: ``/api/{document_id}/details`` with the id ``..`` went to
``/details``.

Usage::

    # ctx.tools: the job's toolbox (agentsearch.pipeline.agents.toolbox.AgentTools), which finds registered tools
    # agentsearch tools add crm --kind http --header "Authorization: Bearer ..." \
    #     --url "https://crm.example/api/companies/{metadata.company_id}?q={query}"
    agent = ExternalEnricher({
        "endpoint": "crm",
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
from typing import Any, ClassVar
from urllib.parse import quote, urlsplit

import httpx
from pydantic import Field, field_validator, model_validator

from agentsearch.pipeline.agents.base import (
    AgentConfig,
    AgentContext,
    AgentSkipped,
    Document,
    PostSearchAgent,
    PostSearchInput,
    PostSearchOutput,
)
from agentsearch.pipeline.agents.references import OperatorOnly, ToolReference, operator_only, resolve_references
from agentsearch.pipeline.platform.breakers import AgentBreaker
from agentsearch.pipeline.platform.egress import EgressPolicy
from agentsearch.pipeline.platform.kv import canonical_hash
from agentsearch.pipeline.security.registered_tools import PLACEHOLDER as _PLACEHOLDER, RegisteredTool
from agentsearch.pipeline.security.storable import DEPTH_MESSAGE, deeper_than
from agentsearch.pipeline.security.transports import egress_refusal, guarded_client

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


class _EgressRefused(_NotAttempted):
    """The egress guard refused the connection: nothing reached the endpoint, so its breaker learns nothing."""


# --- the agent --------------------------------------------------------------------------------------------------


class ExternalEnricher(PostSearchAgent):
    agent_id = "external_enricher"
    version = "2"  # 2: the endpoint is a registered tool, no longer a URL in the config
    description = ("Calls an operator-registered HTTP endpoint per document (URL template) and maps JSON paths of "
                   "the reply into document metadata; own timeout and circuit breaker.")
    default_timeout_s = 30.0
    cache_ttl_s = 300  # external data moves; and a partly failed run should not be served for long

    references: ClassVar[dict[str, Any]] = {"endpoint": ToolReference("http")}

    class Config(AgentConfig):
        endpoint: str | None = Field(
            None, min_length=1, max_length=100,
            description="The registered HTTP endpoint to call (`agentsearch tools add NAME --kind http`).")
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
        # Where requests go and what credentials they carry are the operator's (the registered tool).
        url_template: OperatorOnly = None
        headers: OperatorOnly = None
        _operator_only = operator_only("url_template", "headers", tool_field="endpoint")

        @field_validator("mapping")
        @classmethod
        def _paths(cls, mapping: dict[str, str]) -> dict[str, str]:
            for key, path in mapping.items():
                if not key.strip():
                    raise ValueError("mapping keys must be non-empty metadata keys")
                parse_path(path)
            return mapping

        @model_validator(mode="after")
        def _consistent(self) -> ExternalEnricher.Config:
            if self.endpoint and not self.mapping:
                raise ValueError("mapping is empty: nothing of the reply would be kept")
            if self.timeout_s > self.total_timeout_s:
                raise ValueError("timeout_s must not be above total_timeout_s")
            return self

    config: Config

    def __init__(self, config=None) -> None:
        super().__init__(config)
        self._paths = {key: parse_path(path) for key, path in self.config.mapping.items()}

    @staticmethod
    def endpoint_url(template: str) -> str:
        """The endpoint a template calls, without its query: what the breaker and the summary name."""
        parts = urlsplit(template)
        return f"{parts.scheme}://{parts.netloc}{parts.path}"

    @staticmethod
    def render_url(template: str, doc: Document, query: str) -> str:
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
            # quote leaves '.' as it is; every dot is encoded, since a dot segment can also be made of a value and
            # the template's own text around it ("{document_id}." with the id ".").
            return quote(value, safe="").replace(".", "%2E")

        return _PLACEHOLDER.sub(fill, template)

    def _breaker(self, ctx: AgentContext, endpoint: str):
        # One per user and endpoint: a user's config sets the limits (fail_max, reset_timeout_s, and timeout_s,
        # which makes failures), so one user's circuit must not close the endpoint for the others.
        scope = f"user:{ctx.user_id}" if ctx.user_id else "local"
        name = f"external_enricher:{scope}:{canonical_hash(endpoint)}"
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
            refused = egress_refusal(exc)
            if refused is not None:
                raise _EgressRefused(str(refused)) from exc
            raise EndpointError(f"{type(exc).__name__}: {exc}") from exc
        if status == 429 or status >= 500:
            raise EndpointError(f"HTTP {status}")
        if status >= 400:
            raise DocumentError(f"HTTP {status}")
        if status >= 300:
            raise EndpointError(f"HTTP {status} (redirects are not followed)")
        try:
            data = json.loads(bytes(body))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise EndpointError(f"reply is not JSON: {exc}") from exc
        except RecursionError:
            raise EndpointError(f"reply {DEPTH_MESSAGE}") from None
        # What is mapped from the reply joins the document's metadata, which later steps walk recursively (the PII
        # redactor, JSON in the worker): it is held to the depth a request's own metadata is.
        if deeper_than(data):
            raise EndpointError(f"reply {DEPTH_MESSAGE}")
        return data

    def run(self, inp: PostSearchInput, ctx: AgentContext) -> PostSearchOutput:
        cfg = self.config
        if not cfg.endpoint:
            raise AgentSkipped("no endpoint configured")
        # Looked up now, not when the config was saved: a tool removed since must not be called.
        registered: RegisteredTool = resolve_references(self, ctx.tools)["endpoint"]
        template = registered.url or ""
        endpoint = self.endpoint_url(template)
        policy = registered.egress_policy(getattr(ctx.tools, "egress_policy", None) or EgressPolicy())
        breaker, scope = self._breaker(ctx, endpoint)
        started = time.monotonic()
        counts = {"enriched": 0, "failed": 0, "not_attempted": 0, "requests": 0}
        out_docs: list[Document] = []
        timeout = httpx.Timeout(cfg.timeout_s)
        with guarded_client(policy, timeout=timeout, headers=registered.headers, follow_redirects=False) as client:
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
                    url = self.render_url(template, doc, inp.query)
                    if not breaker.admits():
                        raise _NotAttempted(f"circuit open for {endpoint} after repeated failures")
                    counts["requests"] += 1
                    try:
                        data = self._fetch(client, url)
                    except EndpointError as exc:
                        breaker.record(exc)
                        raise
                    except _EgressRefused:
                        counts["requests"] -= 1
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
        summary = {**counts, "endpoint": registered.name, "breaker": getattr(breaker, "state", "unknown"),
                   "breaker_scope": scope}
        return PostSearchOutput(documents=out_docs, metadata={"enrichment": summary})
