"""What an LLM endpoint said about itself (its context size, whether it tokenizes, whether it takes a response
format), kept once per endpoint and model for every ``agentsearch.pipeline.platform.llm.LLMClient`` of the process.

Usage::

    facts = endpoint_facts("http://127.0.0.1:8080/v1", "smollm2")
    with facts.lock:
        if facts.context is None or time.monotonic() >= facts.context_until:
            ...                                   # ask the endpoint, then keep its answer for ENDPOINT_FACTS_TTL_S
"""

from __future__ import annotations

import threading

# What an endpoint said about itself is asked again after this long (a server restarted with another model).
ENDPOINT_FACTS_TTL_S = 600.0
# An endpoint that could not be reached is asked again sooner: it may have been starting.
UNREACHABLE_TTL_S = 30.0


class EndpointFacts:
    """What one endpoint said about itself (context size, whether it tokenizes), shared by its clients."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.context: int | None = None
        self.context_until = 0.0  # monotonic time the context answer stays valid; 0: never asked
        self.tokenizes: bool | None = None  # None: not asked yet
        self.tokenize_after = 0.0  # monotonic time before which an unreachable /tokenize is not asked again
        self.structured_output = True


_ENDPOINTS: dict[str, EndpointFacts] = {}
_ENDPOINTS_LOCK = threading.Lock()


def endpoint_facts(base_url: str, model: str) -> EndpointFacts:
    """The facts of the endpoint serving ``model`` at ``base_url``: one object for every client of it."""
    key = f"{base_url.rstrip('/')}#{model}"
    with _ENDPOINTS_LOCK:
        return _ENDPOINTS.setdefault(key, EndpointFacts())
