"""Fixtures for tests of the LLM routes: the local fake endpoint (``fake``) and a client of it (``llm``) that backs
off in hundredths of a second, so retries cost a test nothing.

A test module takes them in under their own names::

    from tests.support import llm_fixtures

    fake, llm = llm_fixtures.fake, llm_fixtures.llm
"""

from __future__ import annotations

import pytest

from agentsearch.pipeline.platform.llm import LLMClient
from tests.support.fake_llm import FakeLLM


@pytest.fixture
def fake():
    with FakeLLM(model="fake-model") as server:
        yield server


@pytest.fixture
def llm(fake):
    return LLMClient(fake.base_url, model="fake-model", backoff_s=0.01, max_backoff_s=0.05)
