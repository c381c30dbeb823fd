"""The generic agents: ``llm_prompt`` against a local OpenAI-compatible server, ``mcp`` against local MCP servers
(stdio subprocess and streamable HTTP in a thread) that the tests start, registered as an operator would register
them and handed to the agent through its toolbox (``tests.support.toolbox``)."""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import uvicorn
from pydantic import ValidationError

from agentsearch.pipeline.agents.base import (
    AgentContext,
    AgentSkipped,
    Document,
    PreSearchInput,
    ResponseAgentInput,
    Source,
    Stage,
)
from agentsearch.pipeline.agents.builtin.llm_prompt import LlmPrompt
from agentsearch.pipeline.agents.builtin.mcp_tool import McpTool, McpToolError
from agentsearch.pipeline.agents.references import ToolReference, UnresolvedReference
from agentsearch.pipeline.agents.registry import AgentRegistry
from agentsearch.pipeline.platform.egress import EgressPolicy
from agentsearch.pipeline.platform.llm import LLMClient, LLMError
from agentsearch.pipeline.security.registered_tools import RegisteredTool
from tests.support import llm_fixtures
from tests.support.fake_llm import FakeLLM
from tests.support.mcp_server import build_server
from tests.support.toolbox import RegisteredToolbox

REPO = Path(__file__).resolve().parents[3]
STDIO_SERVER = [sys.executable, "-m", "tests.support.mcp_server"]


# --- llm_prompt ----------------------------------------------------------------------------------------------------


fake = llm_fixtures.fake


def pre_ctx(fake: FakeLLM | None) -> AgentContext:
    llm = LLMClient(fake.base_url, model="fake-model", backoff_s=0.01) if fake else None
    return AgentContext(pipeline_stage=Stage.PRE_SEARCH, tools=SimpleNamespace(llm=llm))


def test_llm_prompt_fills_the_template_and_replaces_the_query(fake):
    fake.script('"board decision share buyback Q4"')
    agent = LlmPrompt({
        "template": "Rewrite as a keyword query ({metadata[language]}, intent {metadata[intent]}): {query}",
        "system": "You write search queries.",
        "output": "query",
    })
    inp = PreSearchInput(query="what did the board decide about buybacks?", metadata={"language": "en"})
    out = agent.run(inp, pre_ctx(fake))
    system, user = fake.requests[0]["messages"]
    assert system == {"role": "system", "content": "You write search queries."}
    # A metadata key the job does not have is filled with nothing rather than failing the agent.
    assert user == {"role": "user",
                    "content": "Rewrite as a keyword query (en, intent ): what did the board decide about buybacks?"}
    assert fake.requests[0]["model"] == "fake-model"
    assert out.query == "board decision share buyback Q4"  # quotes around the reply are not part of the query
    assert out.metadata == {"llm_prompt_previous_query": "what did the board decide about buybacks?"}


def test_llm_prompt_maps_a_json_reply_into_metadata_and_keeps_the_query(fake):
    fake.script('```json\n{"department": "finance", "confidence": 0.9}\n```')
    agent = LlmPrompt({"template": "Classify: {query}\nKnown so far: {metadata}", "metadata_key": "routing",
                       "parse_json": True})
    inp = PreSearchInput(query="Q4 revenue", metadata={"language": "en"})
    out = agent.run(inp, pre_ctx(fake))
    assert fake.requests[0]["messages"] == [
        {"role": "user", "content": 'Classify: Q4 revenue\nKnown so far: {"language": "en"}'}
    ]
    assert out.query == "Q4 revenue"
    assert out.metadata == {"routing": {"department": "finance", "confidence": 0.9}}


def test_llm_prompt_both_outputs(fake):
    fake.script("solar capacity Texas 2025")
    out = LlmPrompt({"template": "{query}", "output": "both", "metadata_key": "rewrite"}).run(
        PreSearchInput(query="how much solar did Texas add"), pre_ctx(fake))
    assert out.query == "solar capacity Texas 2025"
    assert out.metadata == {"rewrite": "solar capacity Texas 2025",
                            "rewrite_previous_query": "how much solar did Texas add"}


def test_llm_prompt_never_empties_the_query(fake):
    fake.script("   ")
    with pytest.raises(LLMError, match="empty"):
        LlmPrompt({"template": "{query}", "output": "query"}).run(PreSearchInput(query="q"), pre_ctx(fake))


def test_llm_prompt_is_skipped_without_an_llm():
    agent = LlmPrompt({"template": "{query}"})
    for ctx in (pre_ctx(None), AgentContext(pipeline_stage=Stage.PRE_SEARCH)):
        with pytest.raises(AgentSkipped, match="no LLM endpoint configured"):
            agent.run(PreSearchInput(query="q"), ctx)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"template": "Answer {question}"}, "unknown placeholder"),
        ({"template": "Answer {}"}, "must be named"),
        ({"template": "Answer {query"}, "not a valid format string"),
        ({"template": "{query}", "output": "query", "parse_json": True}, "parse_json"),
        ({"template": "{query}", "output": "answer"}, "output"),
    ],
)
def test_llm_prompt_refuses_a_bad_config_when_it_is_saved(config, message):
    with pytest.raises(ValidationError, match=message):
        LlmPrompt(config)


# --- mcp -----------------------------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class CountingApp:
    """An ASGI app passed through, counting the HTTP requests that reached it."""

    def __init__(self, app) -> None:
        self.app, self.requests = app, 0

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http":
            self.requests += 1
        await self.app(scope, receive, send)


@pytest.fixture(scope="module")
def mcp_http_server():
    """The test MCP server over streamable HTTP, served by uvicorn in a thread of this process."""
    port = free_port()
    app = CountingApp(build_server().streamable_http_app())
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True, name="mcp-test-server")
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "MCP test server did not start"
        time.sleep(0.05)
    yield SimpleNamespace(url=f"http://127.0.0.1:{port}/mcp", app=app)
    server.should_exit = True
    thread.join(timeout=10)


@pytest.fixture(scope="module")
def mcp_http_url(mcp_http_server) -> str:
    return mcp_http_server.url


RESPONSE_INPUT = ResponseAgentInput(
    answer="Q4 revenue reached $412 million [1].",
    sources=[Source(document_id="press-q4", title="Q4 results", score=0.9)],
    query="Northwind Q4 results",
    documents=[Document(id="press-q4", title="Q4 results", text="Revenue reached $412 million.", score=0.9)],
    metadata={"language": "de", "routing": {"team": "finance"}},
)
STDIO_TOOL = RegisteredTool(name="make_outline", kind="mcp", command=STDIO_SERVER, cwd=str(REPO))


def http_tool(url: str, name: str = "outline-http", server_tool: str = "make_outline",
              allow_internal: bool = True) -> RegisteredTool:
    # The test server listens on 127.0.0.1: reaching it takes the operator's --allow-internal.
    return RegisteredTool(name=name, kind="mcp", url=url, server_tool=server_tool, allow_internal=allow_internal)


def response_ctx(*tools: RegisteredTool, egress_policy: EgressPolicy | None = None) -> AgentContext:
    return AgentContext(pipeline_stage=Stage.RESPONSE,
                        tools=RegisteredToolbox(tools, egress_policy=egress_policy))


def test_mcp_over_stdio_maps_arguments_and_stores_the_structured_result():
    agent = McpTool({
        "type": "mcp",
        "context_forge_tool_id": "make_outline",
        "argument_mapping": {"title": "query", "max_slides": "config.max_slides", "language": "metadata.language",
                             "sources": "sources"},
        "settings": {"max_slides": 7},
    })
    ctx = response_ctx(STDIO_TOOL)
    artifact = agent.run(RESPONSE_INPUT, ctx)
    assert ctx.tools.lookups == [("mcp", "make_outline")]
    assert artifact.agent_id == "mcp" and artifact.content_type == "application/json"
    assert artifact.filename == "mcp-make_outline.json"
    result = json.loads(artifact.data)
    # What the tool received, echoed back: each mapped pipeline field arrived as its argument.
    assert result["received"] == {
        "title": "Northwind Q4 results",
        "max_slides": 7,
        "language": "de",
        "sources": [{"document_id": "press-q4", "title": "Q4 results", "score": 0.9, "location": None, "url": None}],
    }
    assert result["outline"] == "Northwind Q4 results: 7 slides (de)"
    assert artifact.metadata["tool"] == "make_outline" and artifact.metadata["registered_tool"] == "make_outline"
    assert artifact.metadata["arguments"]["max_slides"] == 7
    assert artifact.metadata["structured"] is True
    # The operator's command line is not shown to the user.
    assert "mcp_server" not in json.dumps(artifact.metadata)


def test_mcp_a_stdio_server_gets_the_registered_environment_and_directory_not_the_workers(monkeypatch, tmp_path):
    monkeypatch.setenv("WORKER_DATABASE_PASSWORD", "s3cret")  # what a worker's environment holds
    tool = RegisteredTool(name="env-probe", kind="mcp", server_tool="environment",
                          command=[sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                                   "from tests.support.mcp_server import build_server; build_server().run('stdio')",
                                   str(REPO)],
                          env={"TOOLS_TOKEN": "t-1"}, cwd=str(tmp_path))
    artifact = McpTool({"context_forge_tool_id": "env-probe"}).run(RESPONSE_INPUT, response_ctx(tool))
    seen = json.loads(artifact.data)
    assert "TOOLS_TOKEN" in seen["variables"] and "PATH" in seen["variables"]
    assert "WORKER_DATABASE_PASSWORD" not in seen["variables"]
    assert set(seen["variables"]) <= {"TOOLS_TOKEN", "PATH", "HOME", "LOGNAME", "SHELL", "TERM", "USER", "LC_CTYPE"}
    assert Path(seen["cwd"]).resolve() == tmp_path.resolve()


def test_mcp_over_http_nested_metadata_and_a_missing_key_leaves_the_tools_default(mcp_http_url):
    agent = McpTool({
        "context_forge_tool_id": "outline-http",
        "argument_mapping": {"title": "metadata.routing.team", "max_slides": "config.slides.count",
                             "language": "metadata.not_there"},
        "settings": {"slides": {"count": 3}},
    })
    result = json.loads(agent.run(RESPONSE_INPUT, response_ctx(http_tool(mcp_http_url))).data)
    assert result["received"]["title"] == "finance"
    assert result["received"]["max_slides"] == 3
    assert result["received"]["language"] == ""  # not sent, so the tool's default applied
    assert "language" not in agent.arguments(RESPONSE_INPUT)


def test_mcp_a_binary_resource_becomes_the_artifact_bytes(mcp_http_url):
    agent = McpTool({
        "context_forge_tool_id": "file-http",
        "argument_mapping": {"name": "config.name", "content": "answer"},
        "settings": {"name": "summary.md"},
    })
    artifact = agent.run(RESPONSE_INPUT, response_ctx(http_tool(mcp_http_url, "file-http", "make_file")))
    assert artifact.data == b"Q4 revenue reached $412 million [1]."
    assert artifact.content_type == "text/markdown"
    assert artifact.filename == "summary.md" and artifact.type == "md"


def test_mcp_a_tool_error_is_the_agents_error(mcp_http_url):
    agent = McpTool({"context_forge_tool_id": "fail-http", "argument_mapping": {"message": "query"}})
    with pytest.raises(McpToolError, match=r"reported an error.*Northwind Q4 results"):
        agent.run(RESPONSE_INPUT, response_ctx(http_tool(mcp_http_url, "fail-http", "fail")))


def test_mcp_an_unreachable_server_fails_fast_with_the_reason():
    agent = McpTool({"context_forge_tool_id": "outline-http", "call_timeout_s": 5})
    started = time.monotonic()
    with pytest.raises(McpToolError, match="failed"):
        agent.run(RESPONSE_INPUT, response_ctx(http_tool(f"http://127.0.0.1:{free_port()}/mcp")))
    assert time.monotonic() - started < 5


def test_mcp_an_internal_server_is_refused_at_connect_without_the_operators_allowance(mcp_http_server):
    agent = McpTool({"context_forge_tool_id": "outline-http", "argument_mapping": {"title": "query"},
                     "settings": {}, "call_timeout_s": 10})
    before = mcp_http_server.app.requests
    with pytest.raises(McpToolError, match=r"egress refused: 127\.0\.0\.1 is a loopback address"):
        agent.run(RESPONSE_INPUT, response_ctx(http_tool(mcp_http_server.url, allow_internal=False)))
    assert mcp_http_server.app.requests == before  # nothing reached the server
    # The operator's allowlist opens it as --allow-internal does.
    allowed = EgressPolicy.parse(["127.0.0.1/32"])
    agent = McpTool({"context_forge_tool_id": "outline-http", "argument_mapping": {"title": "query",
                                                                                  "max_slides": "config.n"},
                     "settings": {"n": 2}})
    artifact = agent.run(RESPONSE_INPUT, response_ctx(http_tool(mcp_http_server.url, allow_internal=False),
                                                      egress_policy=allowed))
    assert json.loads(artifact.data)["received"]["max_slides"] == 2
    assert mcp_http_server.app.requests > before


def test_mcp_an_unregistered_or_removed_tool_is_the_agents_error_and_starts_nothing():
    agent = McpTool({"context_forge_tool_id": "make_outline"})
    with pytest.raises(UnresolvedReference, match="context_forge_tool_id: no mcp tool named 'make_outline' is "
                                                  "registered; operators register tools"):
        agent.run(RESPONSE_INPUT, response_ctx())
    # Without a toolbox there is nothing to find a registered tool in: refused as well.
    with pytest.raises(UnresolvedReference, match="context_forge_tool_id"):
        agent.run(RESPONSE_INPUT, AgentContext(pipeline_stage=Stage.RESPONSE))


@pytest.mark.parametrize("field", ["command", "env", "cwd", "server_url", "headers"])
def test_mcp_refuses_what_only_an_operator_registers(field):
    values = {"command": ["sh", "-c", "id > pwned.txt"], "env": {"LD_PRELOAD": "x"}, "cwd": "/",
              "server_url": "http://169.254.169.254/mcp", "headers": {"Authorization": "x"}}
    with pytest.raises(ValidationError) as caught:
        McpTool({"context_forge_tool_id": "t", field: values[field]})
    (error,) = caught.value.errors()
    assert error["loc"] == (field,)
    assert "operators register tools (`agentsearch tools add`)" in error["msg"]
    # Present at all is refused, even empty.
    with pytest.raises(ValidationError, match=field):
        McpTool({"context_forge_tool_id": "t", field: None})


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({}, "context_forge_tool_id"),
        ({"context_forge_tool_id": ""}, "context_forge_tool_id"),
        ({"context_forge_tool_id": "t", "argument_mapping": {"n": "config.max_slides"}}, "no 'max_slides' in settings"),
        ({"context_forge_tool_id": "t", "argument_mapping": {"n": "answers"}}, "not a pipeline field"),
        ({"context_forge_tool_id": "t", "type": "http"}, "type"),
        ({"context_forge_tool_id": "t", "call_timeout_s": 601}, "call_timeout_s"),
    ],
)
def test_mcp_refuses_a_bad_config_when_it_is_saved(config, message):
    with pytest.raises(ValidationError, match=message):
        McpTool(config)


def test_mcp_config_schema_offers_no_operator_field():
    properties = McpTool.Config.model_json_schema()["properties"]
    assert set(properties) == {"type", "context_forge_tool_id", "argument_mapping", "settings", "call_timeout_s",
                               "filename"}
    assert McpTool.references == {"context_forge_tool_id": ToolReference("mcp")}


def test_both_generic_agents_are_registered_through_their_entry_points():
    registry = AgentRegistry.discover()
    assert registry.get("llm_prompt") is LlmPrompt and LlmPrompt.stage == Stage.PRE_SEARCH
    assert registry.get("mcp") is McpTool and McpTool.stage == Stage.RESPONSE
