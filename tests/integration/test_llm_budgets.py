"""The answer step's LLM budgets (AGENTSEARCH_ANSWER_LLM_TIMEOUT_S, AGENTSEARCH_JUDGE_LLM_TIMEOUT_S) against a slow
OpenAI-compatible server: a reply a budget cuts ends in the offline answer (or the offline verdicts), and the job's
record names the setting that cut it, so the user sees what to raise.

As in test_answer_stream, an API and a thread-pool worker of this module's own carry the settings; they share the
suite's database, Milvus and cache Redis, on a broker and result backend of their own.
"""

from __future__ import annotations

import json
import re
import time
import uuid

import httpx
import pytest

from agentsearch.pipeline.text.spans import sentence_spans
from tests.integration.conftest import extra_api_and_worker, wait_job
from tests.support.fake_llm import FakeLLM

pytestmark = pytest.mark.integration

BROKER_DB, RESULTS_DB = 9, 10
ANSWER_BUDGET_S, JUDGE_BUDGET_S = 2, 1
SLOW_S = 20  # far past either budget: only the budget can end the wait
SLOW_ANSWER = "slow-answer"  # a question holding this is answered too late


def slow_server(body: dict):
    """Late for the judge, and for a question naming SLOW_ANSWER; otherwise at once, with source 1's first sentence
    and a word of the model's own: not word for word in the source, so the judge is asked about it."""
    system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
    if '"verdicts"' in system:
        return FakeLLM.delay(SLOW_S, json.dumps({"verdicts": []}))
    first = sentence_spans(re.findall(r"^\[1\][^\n]*\n(.+)$", user, re.MULTILINE)[0])[0].text
    draft = json.dumps({"sentences": [{"text": f"{first.rstrip('.')} (reported).", "sources": [1]}]})
    question = user.rsplit("Question:", 1)[-1]
    return FakeLLM.delay(SLOW_S, draft) if SLOW_ANSWER in question else draft


@pytest.fixture(scope="module")
def llm():
    with FakeLLM(default=slow_server) as server:
        yield server


@pytest.fixture(scope="module")
def budget_api(stack, collection, llm, tmp_path_factory) -> str:
    """An API and a worker whose answers come from the slow server, held to short budgets; the API's URL."""
    env = {**stack.env, "AGENTSEARCH_BROKER_URL": f"{stack.redis_base}/{BROKER_DB}",
           "AGENTSEARCH_RESULT_BACKEND": f"{stack.redis_base}/{RESULTS_DB}",
           "AGENTSEARCH_OPENAI_BASE_URL": llm.base_url, "AGENTSEARCH_OPENAI_MODEL": "fake-model",
           "AGENTSEARCH_ANSWER_LLM_TIMEOUT_S": str(ANSWER_BUDGET_S),
           "AGENTSEARCH_JUDGE_LLM_TIMEOUT_S": str(JUDGE_BUDGET_S)}
    with extra_api_and_worker(tmp_path_factory.mktemp("llm-budgets"), env, queues="celery,artifacts",
                              concurrency=4, name="budgets") as url:
        yield url


def ask(url: str, key: str, collection_id: str, query: str) -> tuple[dict, float]:
    """The finished job, and how long it took from its submission."""
    with httpx.Client(base_url=url, timeout=60, headers={"Authorization": f"Bearer {key}"}) as http:
        started = time.monotonic()
        response = http.post("/v1/search", json={"collection_id": collection_id, "query": query, "agents": [],
                                                 "use_cache": False})
        assert response.status_code == 202, response.text
        job = wait_job(http, response.json()["job_id"], timeout_s=120)
        return job, time.monotonic() - started


def test_an_answer_the_budget_cuts_is_the_offline_one_and_the_record_names_the_setting(stack, collection, budget_api):
    job, took = ask(budget_api, stack.api_key, collection, f"solar output {SLOW_ANSWER} {uuid.uuid4().hex[:6]}")
    assert job["status"] == "succeeded", job.get("error")
    response = job["response"]
    meta = response["metadata"]["answer"]
    assert meta["method"] == "extractive" and response["answer"].strip()
    assert meta["fallback_reason"].startswith(
        f"the LLM's reply was cut at {ANSWER_BUDGET_S} s by AGENTSEARCH_ANSWER_LLM_TIMEOUT_S (LLMError: ")
    assert meta["llm_cut"] == {"setting": "AGENTSEARCH_ANSWER_LLM_TIMEOUT_S", "budget_s": ANSWER_BUDGET_S}
    assert response["degraded"] and any("AGENTSEARCH_ANSWER_LLM_TIMEOUT_S" in r for r in response["degraded_reasons"])
    assert took < SLOW_S, took  # the budget ended the wait, not the server


def test_a_judge_the_budget_cuts_leaves_the_offline_verdicts_and_the_record_names_the_setting(
        stack, collection, budget_api):
    job, took = ask(budget_api, stack.api_key, collection, f"solar output {uuid.uuid4().hex[:6]}")
    assert job["status"] == "succeeded", job.get("error")
    meta = job["response"]["metadata"]["answer"]
    check = meta["check"]
    assert check["judge"] == "offline only", check
    assert check["judge_error"].startswith(
        f"the LLM's reply was cut at {JUDGE_BUDGET_S} s by AGENTSEARCH_JUDGE_LLM_TIMEOUT_S")
    assert check["judge_cut"] == {"setting": "AGENTSEARCH_JUDGE_LLM_TIMEOUT_S", "budget_s": JUDGE_BUDGET_S}
    assert "llm_cut" not in meta  # the answer itself came in time
    assert took < SLOW_S, took
