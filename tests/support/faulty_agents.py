"""Agents that misbehave on purpose, for the integration tests (registered through AGENTSEARCH_AGENT_MODULES).

Each records its calls in a file of ``log_dir`` (one line per call: the pid of the worker process), so a test can
tell whether an agent was really invoked and by which process.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from pydantic import Field

from agentsearch.pipeline.agents.base import (
    AgentArtifact,
    AgentConfig,
    AgentContext,
    PreSearchAgent,
    PreSearchInput,
    PreSearchOutput,
    ResponseAgent,
    ResponseAgentInput,
)


def record_call(log_dir: str | None, name: str) -> None:
    if log_dir:
        with open(Path(log_dir) / f"{name}.calls", "a") as fh:
            fh.write(f"{os.getpid()}\n")


class LoggedConfig(AgentConfig):
    log_dir: str | None = None
    tag: str = "default"


class ExplodingAgent(PreSearchAgent):
    agent_id = "test_exploding"
    description = "Always raises."

    def run(self, inp: PreSearchInput, ctx: AgentContext) -> PreSearchOutput:
        raise RuntimeError("boom: the exploding agent exploded")


class SleepyAgent(PreSearchAgent):
    agent_id = "test_sleepy"
    description = "Sleeps for sleep_s, then passes the query through."

    class Config(AgentConfig):
        sleep_s: float = Field(60.0, ge=0)

    def run(self, inp: PreSearchInput, ctx: AgentContext) -> PreSearchOutput:
        time.sleep(self.config.sleep_s)
        return PreSearchOutput(query=inp.query, metadata={"slept_s": self.config.sleep_s})


class GatedAgent(PreSearchAgent):
    agent_id = "test_gated"
    description = "Waits until the file `gate` exists (at most max_wait_s), then passes the query through."
    # A test opens the gate when it has done what it does mid-job, however long that took on a loaded machine.
    default_timeout_s = 120.0

    class Config(AgentConfig):
        gate: str
        max_wait_s: float = Field(90.0, gt=0)

    def run(self, inp: PreSearchInput, ctx: AgentContext) -> PreSearchOutput:
        deadline = time.monotonic() + self.config.max_wait_s
        while not Path(self.config.gate).exists():
            if time.monotonic() > deadline:
                raise TimeoutError(f"the gate {self.config.gate} never opened")
            time.sleep(0.05)
        return PreSearchOutput(query=inp.query, metadata={"gate": "opened"})


class FlakyAgent(PreSearchAgent):
    agent_id = "test_flaky"
    description = "Fails while `fail` is set; logs every call."

    class Config(LoggedConfig):
        fail: bool = True

    def run(self, inp: PreSearchInput, ctx: AgentContext) -> PreSearchOutput:
        record_call(self.config.log_dir, f"flaky-{self.config.tag}")
        if self.config.fail:
            raise ConnectionError("flaky upstream is down")
        return PreSearchOutput(query=inp.query)


class CountingAgent(PreSearchAgent):
    agent_id = "test_counting"
    description = "Passes the query through; logs every call that is not a cache hit."
    cache_ttl_s = 600

    class Config(LoggedConfig):
        pass

    def run(self, inp: PreSearchInput, ctx: AgentContext) -> PreSearchOutput:
        record_call(self.config.log_dir, f"counting-{self.config.tag}")
        return PreSearchOutput(query=inp.query, metadata={"counted_by": self.config.tag})


class ExplodingResponder(ResponseAgent):
    agent_id = "test_exploding_responder"
    description = "A response agent that always raises."

    def run(self, inp: ResponseAgentInput, ctx: AgentContext) -> AgentArtifact:
        raise ValueError("renderer crashed")


class SlowResponder(ResponseAgent):
    agent_id = "test_slow_responder"
    description = "Renders for sleep_s, logging when it starts and when it is done, then makes a small text file."
    default_timeout_s = 30.0

    class Config(LoggedConfig):
        sleep_s: float = Field(3.0, ge=0)

    def run(self, inp: ResponseAgentInput, ctx: AgentContext) -> AgentArtifact:
        record_call(self.config.log_dir, f"slow-{self.config.tag}-started")
        time.sleep(self.config.sleep_s)
        record_call(self.config.log_dir, f"slow-{self.config.tag}-done")
        return AgentArtifact(agent_id=self.agent_id, type="txt", data=f"rendered for {inp.query}".encode(),
                             filename="slow.txt", content_type="text/plain; charset=utf-8")
