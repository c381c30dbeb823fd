"""A real LLM in the stack: llama.cpp's ``llama-server`` with SmolLM2-135M-Instruct
(``agentsearch.devstack.llm_server``), and a stack whose workers answer with it through ``AGENTSEARCH_OPENAI_BASE_URL``
/ ``_MODEL``.

- a chat completion is answered, and a search job's answer step asks the model over the job's sources;
- ``response_format`` with a JSON schema: the reply parses and has the schema's shape;
- a server of one 512-token slot, as ``/props`` says: a longer prompt is refused with 400
  ``exceed_context_size_error`` (which the project's client does not retry), and a reply that runs into the slot's
  end stops there with ``finish_reason: length``;
- four requests at once are answered together, one slot each.

The server is built once per machine (``make llm-server``; minutes) and starts in about a second.
"""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest

from agentsearch.devstack.llm_server import SERVED_MODEL, LLMServer
from agentsearch.pipeline.platform.llm import LLMClient, LLMError
from tests.integration.conftest import SAMPLE_CORPUS, search

pytestmark = pytest.mark.integration

SMALL_CTX = 512
REPORT = json.loads(SAMPLE_CORPUS.read_text().splitlines()[0])["text"]  # a paragraph of ~150 tokens
LONG_TEXT = " ".join([REPORT] * 12)  # far past SMALL_CTX tokens


def written_tokens(server: LLMServer) -> int:
    """How many tokens the server's model has written: what every request to it adds to."""
    return int(server.metrics()["tokens_predicted_total"])


def client(server: LLMServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url, api_key="not-needed", max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def small_server(tmp_path_factory):
    with LLMServer(tmp_path_factory.mktemp("llm-server-small"), ctx_size=SMALL_CTX, parallel=1) as running:
        yield running


@pytest.fixture(scope="module")
def llm_collection(llm_stack) -> str:
    documents = [json.loads(line) for line in SAMPLE_CORPUS.read_text().splitlines() if line.strip()]
    return llm_stack.ingest("llm-corpus", documents)


def test_the_server_answers_a_chat_completion_and_says_its_context(llm_server):
    print(f"\nllm server started in {llm_server.start_s:.1f} s")
    reply = LLMClient(llm_server.url, llm_server.model).complete(
        [{"role": "user", "content": "What is the capital of France? Answer in one word."}], timeout_s=60)
    assert "paris" in reply.lower(), reply
    assert [model.id for model in client(llm_server).models.list()] == [SERVED_MODEL] == [llm_server.model]
    props = llm_server.get("/props").json()
    assert props["default_generation_settings"]["n_ctx"] == llm_server.ctx_size // llm_server.parallel == 2048
    assert props["total_slots"] == llm_server.parallel == 4
    assert len(llm_server.tokenize("Northwind Energy")) >= 2


def test_a_search_job_asks_the_model_over_its_sources(llm_stack, llm_collection, llm_server):
    before = written_tokens(llm_server)
    with llm_stack.http() as http:
        job = search(http, llm_collection, "What was Northwind Energy's revenue in the second quarter of 2024?",
                     timeout_s=180, agents=[], use_cache=False, top_k=2)
    assert job["status"] == "succeeded", job
    response = job["response"]
    assert response["answer"].strip() and len(response["sources"]) == 2, response
    # The model was asked and wrote: the server's count of written tokens grew. (Its count of prompt tokens read
    # says less: a slot that read the same sources for an earlier job reuses them.) Whether its answer is kept or
    # the offline one stands in (a small model's sentences may not hold up against the sources) is the answer
    # step's rule; either way the job records that it asked this model.
    assert written_tokens(llm_server) > before
    assert SERVED_MODEL in json.dumps(response["metadata"]["answer"]), response["metadata"]["answer"]


def test_a_json_schema_response_format_is_honoured(llm_server):
    # Every string is bounded: the grammar made from the schema then ends the object within ``max_tokens`` (4
    # strings of at most 40 characters, a number of at most 16 digits, the punctuation), whatever a 135M model
    # writes. Unbounded, it may repeat one word inside a string until the tokens run out ("Boulogne-Boulogne-..."),
    # and whether it does depends on what else the server was computing with it.
    text = {"type": "string", "maxLength": 40}
    schema = {"type": "object", "properties": {"city": text, "population": {"type": "integer"},
                                                  "rivers": {"type": "array", "items": text, "maxItems": 3}},
              "required": ["city", "population", "rivers"], "additionalProperties": False}
    reply = client(llm_server).chat.completions.create(
        model=llm_server.model, temperature=0, max_tokens=400,
        messages=[{"role": "user", "content": "Describe Paris: its population and its rivers."}],
        response_format={"type": "json_schema", "json_schema": {"name": "city", "schema": schema, "strict": True}})
    choice = reply.choices[0]
    assert choice.finish_reason == "stop", choice
    data = json.loads(choice.message.content)
    assert set(data) == {"city", "population", "rivers"}, data
    assert isinstance(data["city"], str) and isinstance(data["population"], int), data
    assert isinstance(data["rivers"], list) and len(data["rivers"]) <= 3, data
    assert all(isinstance(text, str) and len(text) <= 40 for text in [data["city"], *data["rivers"]]), data


def test_a_prompt_past_its_slot_is_refused_with_400(small_server):
    assert small_server.get("/props").json()["default_generation_settings"]["n_ctx"] == SMALL_CTX
    n_tokens = len(small_server.tokenize(LONG_TEXT))
    assert n_tokens > SMALL_CTX, n_tokens
    messages = [{"role": "user", "content": f"Summarise this report.\n\n{LONG_TEXT}"}]
    with pytest.raises(openai.BadRequestError) as refused:
        client(small_server).chat.completions.create(model=small_server.model, messages=messages)
    error = refused.value.body
    assert refused.value.status_code == 400 and error["type"] == "exceed_context_size_error", error
    assert f"exceeds the available context size ({SMALL_CTX} tokens)" in error["message"], error

    # The project's client does not retry it: the same prompt would be refused again.
    with pytest.raises(LLMError) as failed:
        LLMClient(small_server.url, small_server.model).complete(messages, timeout_s=30)
    assert failed.value.status == 400 and not failed.value.transient and failed.value.attempts == 1


def test_a_reply_stops_at_the_end_of_its_slot(small_server):
    # A prompt that fills most of the slot, so the reply soon reaches its end.
    messages = [{"role": "user", "content": f"Repeat this report word for word.\n\n{REPORT}\n\n{REPORT}"}]
    reply = client(small_server).chat.completions.create(model=small_server.model, messages=messages, temperature=0)
    usage = reply.usage
    assert usage.prompt_tokens < SMALL_CTX, usage
    assert reply.choices[0].finish_reason == "length", reply
    assert SMALL_CTX - 1 <= usage.prompt_tokens + usage.completion_tokens <= SMALL_CTX, usage


def test_four_requests_at_once_are_answered_by_four_slots(llm_server):
    busy_most, done = 0, threading.Event()

    def watch_slots() -> None:
        nonlocal busy_most
        while not done.is_set():
            slots = llm_server.get("/slots").json()
            busy_most = max(busy_most, sum(1 for slot in slots if slot["is_processing"]))
            time.sleep(0.02)

    def ask(i: int) -> openai.types.chat.ChatCompletion:
        return client(llm_server).chat.completions.create(
            model=llm_server.model, temperature=0, max_tokens=64,
            messages=[{"role": "user", "content": f"Write a long story about lighthouse number {i}."}])

    watcher = threading.Thread(target=watch_slots)
    watcher.start()
    started = time.monotonic()
    try:
        with ThreadPoolExecutor(4) as pool:
            replies = list(pool.map(ask, range(4)))
    finally:
        done.set()
        watcher.join()
    elapsed = time.monotonic() - started
    tokens = sum(reply.usage.completion_tokens for reply in replies)
    print(f"\n4 requests at once: {tokens} tokens in {elapsed:.1f} s ({tokens / elapsed:.0f} tokens/s), "
          f"{busy_most} slots busy at most")
    assert all(reply.choices[0].message.content.strip() for reply in replies), replies
    assert busy_most == 4
