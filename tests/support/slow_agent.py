"""A pre-search agent that takes too long: it sleeps ``sleep_s``, then answers the query ``"too late"``, so a step
that waited for it (instead of cutting it at its timeout or its stage's deadline) shows. Never cached.

A helper base class without an agent_id: a test names its own, and its time::

    class Slow(SlowAgent):
        agent_id = "slow"
        sleep_s = 1.0
"""

from __future__ import annotations

import time

from agentsearch.pipeline.agents.base import PreSearchAgent, PreSearchOutput


class SlowAgent(PreSearchAgent):
    cacheable = False
    sleep_s: float = 1.0

    def run(self, inp, ctx):
        time.sleep(self.sleep_s)
        return PreSearchOutput(query="too late")
