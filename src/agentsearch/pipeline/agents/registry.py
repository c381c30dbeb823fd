"""Finds agents: the ``agentsearch.agents`` entry-point group, plus modules named in settings.

Built-in and third-party agents are found the same way: a distribution declares
``[project.entry-points."agentsearch.agents"] my_agent = "my_pkg.my_agent:MyAgent"``.

Usage::

    registry = AgentRegistry.discover()
    agent_cls = registry.get("language_detector")
    agent = registry.build("language_detector", {"min_confidence": 0.5})   # config validated here
"""

from __future__ import annotations

import importlib
import inspect
import logging
from collections.abc import Iterable
from importlib.metadata import entry_points
from typing import Any

from agentsearch.pipeline.agents.base import Agent, PostSearchAgent, PreSearchAgent, ResponseAgent

ENTRY_POINT_GROUP = "agentsearch.agents"
log = logging.getLogger("agentsearch.registry")
_BASES = (Agent, PreSearchAgent, PostSearchAgent, ResponseAgent)


class UnknownAgent(KeyError):
    def __init__(self, agent_id: str) -> None:
        super().__init__(agent_id)
        self.agent_id = agent_id

    def __str__(self) -> str:
        return f"unknown agent id {self.agent_id!r}"


class AgentRegistry:
    def __init__(self, agents: Iterable[type[Agent]] = ()) -> None:
        self._agents: dict[str, type[Agent]] = {}
        for cls in agents:
            self.register(cls)

    @classmethod
    def discover(cls, extra_modules: Iterable[str] = ()) -> AgentRegistry:
        registry = cls()
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            try:
                agent_cls = ep.load()
            except Exception:  # one broken plugin must not hide every other agent
                log.exception("could not load agent entry point %s = %s", ep.name, ep.value)
                continue
            registry.register(agent_cls)
        for module_name in extra_modules:
            module = importlib.import_module(module_name)
            for _, obj in inspect.getmembers(module, inspect.isclass):
                # Helper base classes without an agent_id are not agents.
                if (issubclass(obj, Agent) and obj not in _BASES and obj.__module__ == module.__name__
                        and getattr(obj, "agent_id", None)):
                    registry.register(obj)
        return registry

    def register(self, cls: type[Agent]) -> None:
        if not (inspect.isclass(cls) and issubclass(cls, Agent)) or not getattr(cls, "agent_id", None):
            raise TypeError(f"{cls!r} is not an Agent class with an agent_id")
        existing = self._agents.get(cls.agent_id)
        if existing is not None and existing is not cls:
            raise ValueError(f"agent id {cls.agent_id!r} is claimed by {existing!r} and {cls!r}")
        self._agents[cls.agent_id] = cls

    def get(self, agent_id: str) -> type[Agent]:
        try:
            return self._agents[agent_id]
        except KeyError:
            raise UnknownAgent(agent_id) from None

    def build(self, agent_id: str, config: dict[str, Any] | None = None) -> Agent:
        return self.get(agent_id)(config)

    def __contains__(self, agent_id: object) -> bool:
        return agent_id in self._agents

    def __iter__(self):
        return iter(sorted(self._agents.values(), key=lambda c: (c.stage, c.agent_id)))

    def __len__(self) -> int:
        return len(self._agents)

    def describe(self) -> list[dict[str, Any]]:
        """Every agent as ``GET /v1/agents`` and ``agentsearch agents list --json`` show it."""
        return [describe_agent(cls) for cls in self]


def describe_agent(cls: type[Agent]) -> dict[str, Any]:
    """One registry entry: id, stage, version, description, limits, config JSON schema and named resources."""
    return {
        "id": cls.agent_id,
        "agent_id": cls.agent_id,
        "stage": cls.stage.value,
        "version": cls.version,
        "description": cls.description,
        "default_timeout_s": cls.default_timeout_s,
        "cacheable": cls.cacheable,
        "cache_ttl_s": cls.cache_ttl_s,
        "config_schema": cls.Config.model_json_schema(),
        # Config fields that must name a registered tool or one of the user's collections.
        "references": {field: ref.describe() for field, ref in getattr(cls, "references", {}).items()},
    }
