"""Fixtures of the agents' tests: the real embedder once per module, a local OpenAI-compatible server, and a fresh
keyword toolbox over the pre-search sample corpus."""

from __future__ import annotations

import pytest

from tests.support.fake_llm import FakeLLM
from tests.unit.agents.post_search_fakes import CachedEmbedder
from tests.unit.agents.pre_search_fakes import CORPUS, FakeTools


@pytest.fixture(scope="module")
def embedder() -> CachedEmbedder:
    return CachedEmbedder()


@pytest.fixture
def fake_llm():
    with FakeLLM() as server:
        yield server


@pytest.fixture
def keyword_tools() -> FakeTools:
    """The pre-search agents' toolbox (``pre_search_fakes.FakeTools``) over its corpus, new for each test: the tests
    give it an LLM and read the calls it recorded."""
    return FakeTools(CORPUS)
