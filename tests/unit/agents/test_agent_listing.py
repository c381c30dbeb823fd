"""``agentsearch agents list --json`` and ``GET /v1/agents`` describe every registered agent with the same keys."""

from __future__ import annotations

import json
from types import SimpleNamespace

from click.testing import CliRunner

from agentsearch.api.routes.agents import list_agents
from agentsearch.cli import main
from agentsearch.pipeline.agents.registry import AgentRegistry


def test_agents_list_json_prints_every_registered_agent():
    result = CliRunner().invoke(main, ["agents", "list", "--json"])
    assert result.exit_code == 0, result.output
    listed = json.loads(result.stdout)
    registry = AgentRegistry.discover()
    assert [a["id"] for a in listed] == [cls.agent_id for cls in registry]
    assert len(listed) == len(registry) and {"llm_prompt", "mcp", "language_detector"} <= {a["id"] for a in listed}
    for entry in listed:
        assert {"id", "stage", "version", "config_schema"} <= set(entry)
        assert entry["stage"] in ("pre_search", "post_search", "response")
        assert entry["config_schema"]["type"] == "object"
    mcp = next(a for a in listed if a["id"] == "mcp")
    assert mcp["stage"] == "response" and "argument_mapping" in mcp["config_schema"]["properties"]


def test_the_api_lists_the_same_entries_as_the_cli():
    registry = AgentRegistry.discover()
    from_api = list_agents(SimpleNamespace(registry=registry))
    from_cli = json.loads(CliRunner().invoke(main, ["agents", "list", "--json"]).stdout)
    assert from_api == from_cli
    # The keys the route had before are kept next to "id".
    assert all(e["id"] == e["agent_id"] and "description" in e and "cache_ttl_s" in e for e in from_api)


def test_agents_list_without_json_prints_one_line_per_agent():
    result = CliRunner().invoke(main, ["agents", "list"])
    assert result.exit_code == 0
    lines = result.stdout.strip().splitlines()
    assert len(lines) == len(AgentRegistry.discover())
    assert any(line.startswith("llm_prompt ") and "pre_search" in line for line in lines)
