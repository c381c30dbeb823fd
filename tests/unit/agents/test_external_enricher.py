"""The external enricher on real text, with the fake toolbox of ``post_search_fakes`` (real MiniLM embeddings)."""

from __future__ import annotations

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import fakeredis
import pytest
from pydantic import ValidationError

from agentsearch.pipeline.agents.base import AgentContext, AgentSkipped, Document, Stage
from agentsearch.pipeline.agents.builtin.external_enricher import ExternalEnricher, parse_path, resolve_path
from agentsearch.pipeline.agents.builtin.fact_checker import FactChecker
from agentsearch.pipeline.agents.builtin.pii_redactor import PiiRedactor
from agentsearch.pipeline.agents.builtin.relevance_filter import RelevanceFilter
from agentsearch.pipeline.agents.builtin.reranker import Reranker
from agentsearch.pipeline.agents.references import UnresolvedReference
from agentsearch.pipeline.platform.breakers import AgentBreaker
from agentsearch.pipeline.platform.egress import EgressPolicy
from agentsearch.pipeline.security.registered_tools import RegisteredTool
from tests.support.toolbox import RegisteredToolbox
from tests.unit.agents.post_search_fakes import ctx_with, run

COMPANIES = {
    "nw": {"company": {"name": "Northwind Energy", "industry": "Utilities", "tags": ["wind", "solar"],
                       "size": {"employees": 1840}}},
    "helios": {"company": {"name": "Helios", "industry": "Solar", "tags": [], "size": {}}},
}


class CompanyServer:
    """A local JSON API: /companies/<id> (slow-* sleeps 1.5 s, stuck-* until the server closes, boom is a 500,
    deep-<n> a reply nested n objects deep, unknown ids are 404), /down/<id> always 500."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        self.headers: list[dict[str, str]] = []
        self._stop = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                server.requests.append(self.path)
                server.headers.append({k.lower(): v for k, v in self.headers.items()})
                path = urlsplit(self.path).path
                kind, _, key = path.strip("/").partition("/")
                if kind == "down" or key == "boom":
                    return self._send(500, {"error": "internal"})
                if key.startswith("slow-"):
                    server._stop.wait(1.5)
                    key = key[len("slow-"):]
                if key.startswith("stuck-"):
                    server._stop.wait()
                    return
                if key == "garbage":
                    return self._send(200, b"<html>not json</html>")
                if key.startswith("deep-"):
                    depth = int(key[len("deep-"):])
                    return self._send(200, b'{"company": ' + b'{"a": ' * depth + b"1" + b"}" * depth + b"}")
                if key not in COMPANIES:
                    return self._send(404, {"error": "unknown company"})
                return self._send(200, COMPANIES[key])

            def _send(self, status: int, payload) -> None:
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self._stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def company_api():
    server = CompanyServer()
    yield server
    server.close()


MAPPING = {"industry": "$.company.industry", "first_tag": "$.company.tags[0]",
           "employees": "$.company.size.employees", "company": "$.company.name"}


COMPANY_PATH = "/companies/{metadata.company}?q={query}&doc={document_id}"


def endpoint(api: CompanyServer, path: str = COMPANY_PATH, name: str = "companies", allow_internal: bool = True,
             **options) -> RegisteredTool:
    """The endpoint as an operator registers it; the test server is on 127.0.0.1, so --allow-internal."""
    return RegisteredTool(name=name, kind="http", url=api.url + path, allow_internal=allow_internal, **options)


def enricher(name: str = "companies", **config) -> ExternalEnricher:
    return ExternalEnricher({"endpoint": name, "mapping": MAPPING, **config})


def tools_for(*endpoints: RegisteredTool, **extra) -> AgentContext:
    return ctx_with(RegisteredToolbox(endpoints, **extra))


def company_doc(doc_id: str, company: str | None) -> Document:
    metadata = {"company": company} if company else {}
    return Document(id=doc_id, title=doc_id, text="A company profile.", metadata=metadata)


def test_json_paths():
    data = {"a": {"b c": [{"d": 1}, {"d": 2}]}, "list": [10, 20, 30]}
    assert resolve_path(data, parse_path("$.a['b c'][1].d")) == 2
    assert resolve_path(data, parse_path('$.list[-1]')) == 30
    assert resolve_path(data, parse_path("$")) == data
    assert repr(resolve_path(data, parse_path("$.list[3]"))) == "MISSING"
    assert repr(resolve_path(data, parse_path("$.a.x"))) == "MISSING"
    for bad in ("a.b", "$.a..b", "$[x]"):
        with pytest.raises(ValueError):
            parse_path(bad)


def test_external_enricher_maps_reply_paths_into_metadata(company_api):
    docs = [company_doc("d1", "nw"), company_doc("d2", "helios")]
    ctx = tools_for(endpoint(company_api, headers={"X-Api-Key": "k-123"}))
    out = run(enricher(), docs, "wind & solar/2025?", ctx)
    assert ctx.tools.lookups == [("http", "companies")]
    d1, d2 = out.documents
    assert {k: d1.metadata[k] for k in MAPPING} == {"industry": "Utilities", "first_tag": "wind", "employees": 1840,
                                                    "company": "Northwind Energy"}
    assert "enrichment_error" not in d1.metadata and "enrichment_missing" not in d1.metadata
    # A path the reply lacks leaves the key out and is listed; the mapped rest is there (the "company" key replaced).
    assert d2.metadata["industry"] == "Solar" and "first_tag" not in d2.metadata and "employees" not in d2.metadata
    assert d2.metadata["enrichment_missing"] == ["$.company.tags[0]", "$.company.size.employees"]
    # Placeholders are URL-encoded: the query cannot add parameters or path segments.
    path, _, query = company_api.requests[0].partition("?")
    assert path == "/companies/nw"
    assert parse_qs(query) == {"q": ["wind & solar/2025?"], "doc": ["d1"]}
    assert "wind%20%26%20solar%2F2025%3F" in query
    assert company_api.headers[0]["x-api-key"] == "k-123"  # the registered header
    # The summary names the registered endpoint, not its URL (the operator's).
    assert out.metadata["enrichment"] == {
        "enriched": 2, "failed": 0, "not_attempted": 0, "requests": 2, "endpoint": "companies", "breaker": "closed",
        "breaker_scope": "process"}


@pytest.mark.parametrize(
    ("doc_id", "segment"),
    [("..", "%2E%2E"), (".", "%2E"), ("v1.2", "v1%2E2"), ("a/b?c#d%2F", "a%2Fb%3Fc%23d%252F")],
)
def test_external_enricher_keeps_a_value_inside_its_own_path_segment(company_api, doc_id, segment):
    """A dot segment is resolved by the client before it sends: with the id '..' the enricher asked for
    /details, outside the operator's /companies/."""
    ctx = tools_for(endpoint(company_api, path="/companies/{document_id}/details"))
    run(enricher(), [company_doc(doc_id, None)], "q", ctx)
    assert company_api.requests == [f"/companies/{segment}/details"]  # the path as it arrived, undecoded


def test_external_enricher_refuses_a_reply_nested_past_the_limit_per_document(company_api):
    """What is mapped from a reply joins the document's metadata; nested thousands deep, the parse raised
    RecursionError out of the agent, and a hundred deep it went into metadata that later steps walk recursively."""
    docs = [company_doc("d1", "deep-100"), company_doc("d2", "deep-3000"), company_doc("d3", "nw")]
    out = run(enricher(mapping={"profile": "$.company"}), docs, "q", tools_for(endpoint(company_api)))
    too_deep, far_too_deep, fine = out.documents
    for doc in (too_deep, far_too_deep):
        assert doc.metadata["enrichment_error"] == "reply nests deeper than 64 levels of arrays and objects"
        assert "profile" not in doc.metadata
    assert fine.metadata["profile"] == COMPANIES["nw"]["company"] and "enrichment_error" not in fine.metadata
    assert out.metadata["enrichment"]["failed"] == 2 and out.metadata["enrichment"]["enriched"] == 1


def test_external_enricher_an_internal_endpoint_is_refused_at_connect_without_the_operators_allowance(company_api):
    docs = [company_doc("d1", "nw"), company_doc("d2", "helios")]
    out = run(enricher(), docs, "q", tools_for(endpoint(company_api, allow_internal=False)))
    for doc in out.documents:
        assert doc.metadata["enrichment_error"].startswith("egress refused: 127.0.0.1 is a loopback address")
        assert "industry" not in doc.metadata
    assert company_api.requests == []  # no request reached the endpoint
    assert out.metadata["enrichment"] | {"breaker": None} == {
        "enriched": 0, "failed": 0, "not_attempted": 2, "requests": 0, "endpoint": "companies", "breaker": None,
        "breaker_scope": "process"}
    # The operator's allowlist (AGENTSEARCH_EGRESS_ALLOW) opens it as --allow-internal does; the refusals above did
    # not count against the endpoint's breaker.
    allowed = tools_for(endpoint(company_api, allow_internal=False), egress_policy=EgressPolicy.parse(["127.0.0.0/8"]))
    out = run(enricher(), docs, "q", allowed)
    assert [d.metadata.get("industry") for d in out.documents] == ["Utilities", "Solar"]
    assert out.metadata["enrichment"]["breaker"] == "closed"


def test_external_enricher_an_unregistered_or_removed_endpoint_is_the_agents_error(company_api):
    with pytest.raises(UnresolvedReference, match="endpoint: no http tool named 'companies' is registered; "
                                                  "operators register tools"):
        run(enricher(), [company_doc("d1", "nw")], "q", tools_for())
    assert company_api.requests == []


def test_external_enricher_times_out_a_slow_document_and_enriches_the_others(company_api):
    docs = [company_doc("slow", "stuck-nw"), company_doc("fast", "nw")]
    started = time.monotonic()
    out = run(enricher(timeout_s=0.3), docs, "q", tools_for(endpoint(company_api)))
    assert time.monotonic() - started < 10  # the reply that never comes was not waited for
    slow, fast = out.documents
    assert slow.metadata["enrichment_error"].startswith("timeout after 0.3 s")
    assert "industry" not in slow.metadata
    assert fast.metadata["industry"] == "Utilities"
    assert out.metadata["enrichment"]["failed"] == 1 and out.metadata["enrichment"]["enriched"] == 1


def test_external_enricher_records_500_404_non_json_and_missing_placeholders_per_document(company_api):
    docs = [company_doc("a", "boom"), company_doc("b", "nobody"), company_doc("c", "garbage"),
            company_doc("d", None), company_doc("e", "nw")]
    out = run(enricher(), docs, "q", tools_for(endpoint(company_api)))
    errors = [d.metadata.get("enrichment_error") for d in out.documents]
    assert errors[0] == "HTTP 500"
    assert errors[1] == "HTTP 404"
    assert errors[2].startswith("reply is not JSON")
    assert errors[3] == "document has no metadata.company for the URL"
    assert errors[4] is None and out.documents[4].metadata["industry"] == "Utilities"
    assert len(company_api.requests) == 4  # no request for the document that could not fill the URL
    assert out.metadata["enrichment"]["failed"] == 4 and out.metadata["enrichment"]["enriched"] == 1


def test_external_enricher_breaker_opens_after_fail_max_failures_and_stops_calling(company_api):
    agent = enricher("down", fail_max=3, reset_timeout_s=60)
    ctx = tools_for(endpoint(company_api, "/down/{document_id}", "down"), endpoint(company_api))
    docs = [company_doc(f"d{i}", "nw") for i in range(6)]
    out = run(agent, docs, "q", ctx)
    assert len(company_api.requests) == 3  # the endpoint saw fail_max requests, then none
    errors = [d.metadata["enrichment_error"] for d in out.documents]
    assert errors[:3] == ["HTTP 500"] * 3
    assert all(e.startswith("circuit open for") for e in errors[3:])
    assert out.metadata["enrichment"] == {
        "enriched": 0, "failed": 3, "not_attempted": 3, "requests": 3, "endpoint": "down", "breaker": "open",
        "breaker_scope": "process"}
    # A second run (another agent instance, same endpoint and limits) still finds the circuit open.
    again = run(ExternalEnricher(agent.config), docs[:2], "q", ctx)
    assert len(company_api.requests) == 3
    assert all(d.metadata["enrichment_error"].startswith("circuit open") for d in again.documents)
    # The other endpoint of the same server has its own breaker.
    assert run(enricher(), [company_doc("x", "nw")], "q", ctx).documents[0].metadata["industry"] == "Utilities"


def test_external_enricher_uses_a_shared_breaker_when_the_toolbox_offers_one(company_api):
    made = []

    class ToolsWithBreaker(RegisteredToolbox):
        redis = fakeredis.FakeRedis(server=fakeredis.FakeServer())

        def breaker(self, name, fail_max, reset_timeout_s):
            made.append((name, fail_max, reset_timeout_s))
            return AgentBreaker(name, self.redis, fail_max, reset_timeout_s)

    agent = enricher("down", fail_max=2)
    tools = ToolsWithBreaker([endpoint(company_api, "/down/{document_id}", "down")])
    out = run(agent, [company_doc(f"d{i}", "nw") for i in range(4)], ctx=ctx_with(tools))
    assert len(company_api.requests) == 2
    assert made and made[0][0].startswith("external_enricher:") and made[0][1:] == (2, 60.0)
    assert out.metadata["enrichment"]["breaker_scope"] == "shared" and out.metadata["enrichment"]["breaker"] == "open"


def test_external_enricher_one_users_failures_do_not_open_the_endpoint_for_another_user(company_api):
    # User A sets a timeout no reply can meet and a one-failure circuit held for an hour. The breakers live in one
    # Redis, as every worker's do (state by name, whatever limits a caller brings).
    redis_client = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    tools = RegisteredToolbox([endpoint(company_api, COMPANY_PATH.replace("{metadata.company}", "slow-nw"))],
                              breaker=lambda name, fail_max, reset_s: AgentBreaker(name, redis_client, fail_max,
                                                                                   reset_s))
    a = AgentContext(pipeline_stage=Stage.POST_SEARCH, user_id="user-a", tools=tools)
    b = AgentContext(pipeline_stage=Stage.POST_SEARCH, user_id="user-b", tools=tools)
    hostile = enricher(timeout_s=0.05, fail_max=1, reset_timeout_s=3600)
    out = run(hostile, [company_doc("d1", "nw"), company_doc("d2", "nw")], "q", a)
    assert out.metadata["enrichment"]["breaker"] == "open"
    assert out.documents[1].metadata["enrichment_error"].startswith("circuit open")
    # User B's enricher on the same endpoint still calls it.
    out = run(enricher(timeout_s=3.0), [company_doc("d3", "nw")], "q", b)
    assert out.documents[0].metadata["industry"] == "Utilities"
    assert out.metadata["enrichment"]["breaker"] == "closed" and out.metadata["enrichment"]["breaker_scope"] == "shared"


def test_external_enricher_max_documents_and_skip_without_an_endpoint(company_api):
    out = run(enricher(max_documents=2), [company_doc(f"d{i}", "nw") for i in range(3)], "q",
              tools_for(endpoint(company_api)))
    assert [("industry" in d.metadata) for d in out.documents] == [True, True, False]
    assert len(company_api.requests) == 2
    with pytest.raises(AgentSkipped, match="endpoint"):
        run(ExternalEnricher(), [company_doc("d", "nw")])


@pytest.mark.parametrize("config", [
    {"endpoint": "crm", "mapping": {"x": "company.name"}},                  # not a JSON path
    {"endpoint": "crm"},                                                     # nothing mapped
    {"endpoint": "crm", "mapping": MAPPING, "timeout_s": 30, "total_timeout_s": 10},
    {"endpoint": "crm", "mapping": MAPPING, "method": "POST"},
    {"endpoint": "", "mapping": MAPPING},
])
def test_external_enricher_refuses_bad_config(config):
    with pytest.raises(ValidationError):
        ExternalEnricher(config)


@pytest.mark.parametrize(("field", "value"), [
    ("url_template", "http://127.0.0.1:6379/{document_id}"),
    ("url_template", "http://169.254.169.254/latest/meta-data/{document_id}"),
    ("headers", {"Authorization": "Bearer x"}),
    ("url_template", None),
])
def test_external_enricher_refuses_a_raw_url_or_headers_naming_the_field(field, value):
    with pytest.raises(ValidationError) as caught:
        ExternalEnricher({"endpoint": "crm", "mapping": MAPPING, field: value})
    (error,) = caught.value.errors()
    assert error["loc"] == (field,) and "operators register tools (`agentsearch tools add`)" in error["msg"]


@pytest.mark.parametrize(("url", "message"), [
    ("http://{metadata.host}/x", "host"),                # the host is fixed
    ("ftp://example.org/{document_id}", "http"),
    ("http://example.org/{doc}", "unknown placeholder"),
])
def test_an_endpoint_with_a_bad_url_template_cannot_be_registered(url, message):
    with pytest.raises(ValidationError, match=message):
        RegisteredTool(name="crm", kind="http", url=url)


def test_every_post_search_agent_builds_with_its_defaults():
    for cls in (Reranker, FactChecker, PiiRedactor, ExternalEnricher, RelevanceFilter):
        agent = cls()
        assert agent.stage == Stage.POST_SEARCH and agent.default_timeout_s > 0 and agent.cache_ttl_s > 0
        assert "Usage::" in sys.modules[cls.__module__].__doc__
