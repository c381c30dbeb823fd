"""Agents for the fault drills (registered in the stack's workers through AGENTSEARCH_AGENT_MODULES).

Each one that has a side effect writes it to a JSON Lines file in ``log_dir``: ``start`` when the call begins,
``done`` when it has finished its work. A call interrupted by a killed process leaves a ``start`` without a
``done``; a side effect *completed* twice for one job leaves two ``done`` lines for the same query, and that is what
the drills count as a duplicate. Queries are unique per job, so the query names the job.
"""

from __future__ import annotations

import json
import os
import threading
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


def log_event(log_dir: str | None, name: str, event: str, query: str) -> None:
    if not log_dir:
        return
    line = json.dumps({"event": event, "query": query, "pid": os.getpid(), "t": time.time()}) + "\n"
    # One short write to a file opened for appending: lines from concurrent processes never interleave.
    with open(Path(log_dir) / f"{name}.jsonl", "a") as fh:
        fh.write(line)


class WorkConfig(AgentConfig):
    log_dir: str | None = None
    work_s: float = Field(0.1, ge=0)


class ChaosStep(PreSearchAgent):
    agent_id = "chaos_step"
    description = "Works for work_s, logging the call; passes the query through."
    cacheable = False

    class Config(WorkConfig):
        pass

    def run(self, inp: PreSearchInput, ctx: AgentContext) -> PreSearchOutput:
        log_event(self.config.log_dir, "step", "start", inp.query)
        time.sleep(self.config.work_s)
        log_event(self.config.log_dir, "step", "done", inp.query)
        return PreSearchOutput(query=inp.query, metadata={"chaos_step": os.getpid()})


class ChaosResponder(ResponseAgent):
    agent_id = "chaos_responder"
    description = "Works for work_s, logging the call; makes a small text artifact (a side effect per job)."

    class Config(WorkConfig):
        pass

    def run(self, inp: ResponseAgentInput, ctx: AgentContext) -> AgentArtifact:
        log_event(self.config.log_dir, "responder", "start", inp.query)
        time.sleep(self.config.work_s)
        log_event(self.config.log_dir, "responder", "done", inp.query)
        return AgentArtifact(agent_id=self.agent_id, type="txt", data=f"{inp.query}\n{inp.answer}".encode(),
                             filename="chaos.txt", content_type="text/plain")


class ChaosHang(PreSearchAgent):
    agent_id = "chaos_hang"
    description = "Never returns."
    cacheable = False

    def run(self, inp: PreSearchInput, ctx: AgentContext) -> PreSearchOutput:
        threading.Event().wait()
        raise AssertionError("unreachable")


class ChaosHangResponder(ResponseAgent):
    agent_id = "chaos_hang_responder"
    description = "A response agent that never returns."

    def run(self, inp: ResponseAgentInput, ctx: AgentContext) -> AgentArtifact:
        threading.Event().wait()
        raise AssertionError("unreachable")


class ChaosFlapper(PreSearchAgent):
    agent_id = "chaos_flapper"
    description = "Fails while the switch file says 'fail'; logs every call. The config stays the same while it flaps."
    cacheable = False

    class Config(AgentConfig):
        switch: str
        log_dir: str | None = None

    def run(self, inp: PreSearchInput, ctx: AgentContext) -> PreSearchOutput:
        log_event(self.config.log_dir, "flapper", "start", inp.query)
        if Path(self.config.switch).read_text().strip() == "fail":
            raise ConnectionError("the flapping upstream is down")
        return PreSearchOutput(query=inp.query)
