"""Fixtures of the agents' tests: the real embedder once per module, and a local OpenAI-compatible server."""

from __future__ import annotations

import pytest

from tests.support.fake_llm import FakeLLM
from tests.unit.agents.post_search_fakes import CachedEmbedder


@pytest.fixture(scope="module")
def embedder() -> CachedEmbedder:
    return CachedEmbedder()


@pytest.fixture
def fake_llm():
    with FakeLLM() as server:
        yield server
