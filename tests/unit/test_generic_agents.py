"""The generic agents: ``llm_prompt`` against a local OpenAI-compatible server, ``mcp`` against local MCP servers
(stdio subprocess and streamable HTTP in a thread) that the tests start."""

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

from pipeline.agents.base import (
    AgentContext,
    AgentSkipped,
    Document,
    PreSearchInput,
    ResponseAgentInput,
    Source,
    Stage,
)
from pipeline.agents.llm_prompt import LlmPrompt
from pipeline.agents.mcp_tool import McpTool, McpToolError
from pipeline.agents.registry import AgentRegistry
from pipeline.llm import LLMClient, LLMError
from tests.support.fake_llm import FakeLLM
from tests.support.mcp_server import build_server

REPO = Path(__file__).resolve().parents[2]
STDIO_SERVER = [sys.executable, "-m", "tests.support.mcp_server"]


# --- llm_prompt ----------------------------------------------------------------------------------------------------


@pytest.fixture
def fake():
    with FakeLLM(model="fake-model") as server:
        yield server


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
    assert out.metadata == {"rewrite": "solar capacity Texas 2025", "rewrite_previous_query": "how much solar did Texas add"}


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


@pytest.fixture(scope="module")
def mcp_http_url():
    """The test MCP server over streamable HTTP, served by uvicorn in a thread of this process."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(build_server().streamable_http_app(), host="127.0.0.1", port=port,
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True, name="mcp-test-server")
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "MCP test server did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}/mcp"
    server.should_exit = True
    thread.join(timeout=10)


RESPONSE_INPUT = ResponseAgentInput(
    answer="Q4 revenue reached $412 million [1].",
    sources=[Source(document_id="press-q4", title="Q4 results", score=0.9)],
    query="Northwind Q4 results",
    documents=[Document(id="press-q4", title="Q4 results", text="Revenue reached $412 million.", score=0.9)],
    metadata={"language": "de", "routing": {"team": "finance"}},
)
RESPONSE = AgentContext(pipeline_stage=Stage.RESPONSE)


def test_mcp_over_stdio_maps_arguments_and_stores_the_structured_result():
    agent = McpTool({
        "type": "mcp",
        "context_forge_tool_id": "make_outline",
        "command": STDIO_SERVER,
        "cwd": str(REPO),
        "argument_mapping": {"title": "query", "max_slides": "config.max_slides", "language": "metadata.language",
                             "sources": "sources"},
        "settings": {"max_slides": 7},
    })
    artifact = agent.run(RESPONSE_INPUT, RESPONSE)
    assert artifact.agent_id == "mcp" and artifact.content_type == "application/json"
    assert artifact.filename == "mcp-make_outline.json"
    result = json.loads(artifact.data)
    # What the tool received, echoed back: each mapped pipeline field arrived as its argument.
    assert result["received"] == {
        "title": "Northwind Q4 results",
        "max_slides": 7,
        "language": "de",
        "sources": [{"document_id": "press-q4", "title": "Q4 results", "score": 0.9}],
    }
    assert result["outline"] == "Northwind Q4 results: 7 slides (de)"
    assert artifact.metadata["tool"] == "make_outline"
    assert artifact.metadata["arguments"]["max_slides"] == 7
    assert artifact.metadata["structured"] is True


def test_mcp_over_http_nested_metadata_and_a_missing_key_leaves_the_tools_default(mcp_http_url):
    agent = McpTool({
        "context_forge_tool_id": "make_outline",
        "server_url": mcp_http_url,
        "argument_mapping": {"title": "metadata.routing.team", "max_slides": "config.slides.count",
                             "language": "metadata.not_there"},
        "settings": {"slides": {"count": 3}},
    })
    result = json.loads(agent.run(RESPONSE_INPUT, RESPONSE).data)
    assert result["received"]["title"] == "finance"
    assert result["received"]["max_slides"] == 3
    assert result["received"]["language"] == ""  # not sent, so the tool's default applied
    assert "language" not in agent.arguments(RESPONSE_INPUT)


def test_mcp_a_binary_resource_becomes_the_artifact_bytes(mcp_http_url):
    agent = McpTool({
        "context_forge_tool_id": "make_file",
        "server_url": mcp_http_url,
        "argument_mapping": {"name": "config.name", "content": "answer"},
        "settings": {"name": "summary.md"},
    })
    artifact = agent.run(RESPONSE_INPUT, RESPONSE)
    assert artifact.data == b"Q4 revenue reached $412 million [1]."
    assert artifact.content_type == "text/markdown"
    assert artifact.filename == "summary.md" and artifact.type == "md"


def test_mcp_a_tool_error_is_the_agents_error(mcp_http_url):
    agent = McpTool({"context_forge_tool_id": "fail", "server_url": mcp_http_url,
                     "argument_mapping": {"message": "query"}})
    with pytest.raises(McpToolError, match="reported an error.*Northwind Q4 results"):
        agent.run(RESPONSE_INPUT, RESPONSE)


def test_mcp_an_unreachable_server_fails_fast_with_the_reason():
    agent = McpTool({"context_forge_tool_id": "make_outline", "server_url": f"http://127.0.0.1:{free_port()}/mcp",
                     "call_timeout_s": 5})
    started = time.monotonic()
    with pytest.raises(McpToolError, match="failed"):
        agent.run(RESPONSE_INPUT, RESPONSE)
    assert time.monotonic() - started < 5


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"context_forge_tool_id": "t"}, "exactly one of server_url"),
        ({"context_forge_tool_id": "t", "server_url": "http://x/mcp", "command": ["x"]}, "exactly one"),
        ({"context_forge_tool_id": "t", "server_url": "ftp://x/mcp"}, "http"),
        ({"context_forge_tool_id": "t", "server_url": "http://x/mcp",
          "argument_mapping": {"n": "config.max_slides"}}, "no 'max_slides' in settings"),
        ({"context_forge_tool_id": "t", "server_url": "http://x/mcp",
          "argument_mapping": {"n": "answers"}}, "not a pipeline field"),
        ({"context_forge_tool_id": "t", "server_url": "http://x/mcp", "type": "http"}, "type"),
    ],
)
def test_mcp_refuses_a_bad_config_when_it_is_saved(config, message):
    with pytest.raises(ValidationError, match=message):
        McpTool(config)


def test_both_generic_agents_are_registered_through_their_entry_points():
    registry = AgentRegistry.discover()
    assert registry.get("llm_prompt") is LlmPrompt and LlmPrompt.stage == Stage.PRE_SEARCH
    assert registry.get("mcp") is McpTool and McpTool.stage == Stage.RESPONSE
