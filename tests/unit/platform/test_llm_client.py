"""The LLM client's replies, structured output and what it learns of the endpoint (context size, tokenizer)."""

from __future__ import annotations

import json
import threading

import httpx
import pytest

import agentsearch.pipeline.platform.llm as llm_module
from agentsearch.pipeline.platform.llm import LLMClient, LLMError, LLMReply, parse_json_reply, reply_json
from agentsearch.pipeline.platform.settings import Settings
from tests.support import llm_fixtures
from tests.support.fake_llm import FakeLLM

fake = llm_fixtures.fake
SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
HI = [{"role": "user", "content": "hi"}]


@pytest.fixture
def llm(fake):
    return LLMClient(fake.base_url, model="fake-model", backoff_s=0.01, max_backoff_s=0.05)


def refusing_response_format(body: dict):
    if "response_format" in body:
        return FakeLLM.error(400, "'response_format' of type 'json_schema' is not supported")
    return '{"ok": true}'


def test_a_reply_says_how_it_ended_and_complete_is_its_text(fake, llm):
    fake.script("hello", "hello again")
    reply = llm.reply(HI, timeout_s=5, max_tokens=8)
    assert reply == LLMReply("hello", "stop", 0, 0) and not reply.truncated
    assert fake.requests[0]["max_tokens"] == 8
    assert llm.complete(HI, timeout_s=5) == "hello again"


def test_a_json_schema_is_sent_as_response_format(fake, llm):
    fake.script('{"ok": true}', '{"ok": true}')
    assert llm.complete_json(HI, timeout_s=5, json_schema={**SCHEMA, "title": "check reply"}) == {"ok": True}
    assert fake.requests[0]["response_format"] == {
        "type": "json_schema", "json_schema": {"name": "check_reply", "schema": {**SCHEMA, "title": "check reply"}}}
    llm.complete(HI, timeout_s=5)
    assert "response_format" not in fake.requests[1]  # only when asked


def test_an_endpoint_refusing_response_format_is_asked_again_without_it_and_never_again(fake, llm):
    fake.script(refusing_response_format, refusing_response_format, refusing_response_format)
    assert llm.complete_json(HI, timeout_s=5, json_schema=SCHEMA) == {"ok": True}
    assert ["response_format" in r for r in fake.requests] == [True, False]
    assert llm.structured_output is False
    assert llm.complete_json(HI, timeout_s=5, json_schema=SCHEMA) == {"ok": True}
    assert len(fake.requests) == 3 and "response_format" not in fake.requests[2]
    # Another client of the same endpoint in this process knows it too.
    assert LLMClient(fake.base_url, model="fake-model").structured_output is False


def test_a_streamed_reply_refused_for_its_response_format_is_streamed_without_it(fake, llm):
    fake.script(refusing_response_format, FakeLLM.streamed(['{"ok"', ": true}"]))
    assert "".join(llm.stream(HI, timeout_s=5, json_schema=SCHEMA)) == '{"ok": true}'
    assert ["response_format" in r for r in fake.requests] == [True, False]


def test_another_400_is_not_taken_for_a_refused_format(fake, llm):
    fake.script(FakeLLM.error(400, "the request exceeds the available context size"))
    with pytest.raises(LLMError, match="context size") as info:
        llm.complete_json(HI, timeout_s=5, json_schema=SCHEMA)
    assert info.value.status == 400 and llm.structured_output is True and len(fake.requests) == 1


def test_structured_output_can_be_turned_off_by_setting(fake):
    settings = Settings(openai_base_url=fake.base_url, openai_model="other-model", llm_structured_output=False)
    client = LLMClient.from_settings(settings)
    fake.script('{"ok": true}')
    assert client.complete_json(HI, timeout_s=5, json_schema=SCHEMA) == {"ok": True}
    assert "response_format" not in fake.requests[0]


def test_a_503_while_the_server_loads_is_retried(fake, llm):
    fake.script(FakeLLM.error(503, "Loading model"), '{"ok": true}')
    assert llm.complete_json(HI, timeout_s=5, json_schema=SCHEMA) == {"ok": True}
    assert len(fake.requests) == 2


def test_a_reply_cut_at_max_tokens_is_an_error_when_its_json_did_not_end():
    with pytest.raises(LLMError, match="cut at max_tokens"):
        reply_json(LLMReply('{"terms": ["wind", "sol', "length"))
    with pytest.raises(LLMError, match="not JSON"):
        reply_json(LLMReply('{"terms": ["wind", "sol', "stop"))
    # JSON that ended before the model rambled on to the limit is still its answer.
    assert reply_json(LLMReply('{"terms": ["wind"]} and some more words', "length")) == {"terms": ["wind"]}


def test_the_longest_json_value_in_prose_is_the_reply():
    assert parse_json_reply('Passage [3] is best: [3, 1, 2]. Done.') == [3, 1, 2]
    assert parse_json_reply('Sure! {"a": [1, 2]} Hope that helps.') == {"a": [1, 2]}
    assert parse_json_reply('{"a": 1} then {"b": [1, 2, 3, 4]}') == {"b": [1, 2, 3, 4]}
    with pytest.raises(LLMError):
        parse_json_reply("{not json} [nor this")


# --- what the endpoint says about its model ------------------------------------------------------------------------


@pytest.fixture
def endpoint(monkeypatch):
    """llama.cpp's /props and /tokenize (one token a word) behind the client's probe, counting requests."""
    seen: list[str] = []
    routes = {"/props": {"default_generation_settings": {"n_ctx": 2048}}}

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(f"{request.method} {request.url.path}")
        if request.url.path == "/tokenize" and "tokenize" in routes:
            words = json.loads(request.content)["content"].split()
            return httpx.Response(200, json={"tokens": list(range(len(words)))})
        if request.url.path in routes:
            return httpx.Response(200, json=routes[request.url.path])
        return httpx.Response(404, json={"error": "not found"})

    monkeypatch.setattr(llm_module, "_PROBE", httpx.Client(transport=httpx.MockTransport(handle)))
    routes["tokenize"] = True
    return routes, seen


def client(name: str, **kwargs) -> LLMClient:
    return LLMClient(f"http://{name}.test:8080/v1", model="m", **kwargs)


def test_the_context_comes_from_llama_cpp_props_once(endpoint):
    _, seen = endpoint
    llm = client("props")
    assert llm.context_tokens() == 2048 and llm.context_tokens() == 2048
    assert client("props").context_tokens() == 2048  # the next job's client asks nobody
    assert seen == ["GET /props"]


def test_the_configured_context_wins_and_an_unknown_one_is_none(endpoint):
    routes, seen = endpoint
    assert client("configured", context_tokens=512).context_tokens() == 512 and seen == []
    routes.pop("/props")
    routes["/v1/models"] = {"data": [{"id": "m", "max_model_len": 32768}]}
    assert client("vllm").context_tokens() == 32768
    routes.pop("/v1/models")
    assert client("nothing").context_tokens() is None


def test_tokens_are_counted_by_the_endpoint_when_it_tokenizes(endpoint):
    routes, seen = endpoint
    llm = client("tok")
    assert llm.count_tokens("three words here") == 3 and llm.count_tokens("") == 0
    routes.pop("tokenize")
    plain = client("plain")
    text = "an endpoint without a tokenizer"
    assert plain.count_tokens(text) == llm_module.estimate_tokens(text)
    assert plain.count_tokens(text) == llm_module.estimate_tokens(text)
    assert seen.count("POST /tokenize") == 2  # once for each endpoint: the missing route is remembered


def test_an_unreachable_endpoint_is_estimated_and_asked_again_later(monkeypatch):
    tries: list[str] = []

    def refuse(request: httpx.Request) -> httpx.Response:
        tries.append(request.url.path)
        raise httpx.ConnectError("refused", request=request)

    monkeypatch.setattr(llm_module, "_PROBE", httpx.Client(transport=httpx.MockTransport(refuse)))
    llm = client("down")
    assert llm.context_tokens() is None and llm.count_tokens("abc def") == llm_module.estimate_tokens("abc def")
    assert llm.count_tokens("ghi") == llm_module.estimate_tokens("ghi")
    assert tries == ["/props", "/tokenize"]  # the second text did not wait for it again
    assert llm._endpoint.tokenizes is None  # not taken for an endpoint without the route
    llm._endpoint.tokenize_after = 0.0  # the pause over
    llm.count_tokens("ghi")
    assert tries[-1] == "/tokenize"


def test_threads_sharing_a_client_ask_the_endpoint_once(endpoint):
    _, seen = endpoint
    llm = client("threads")
    results: list[int | None] = []
    threads = [threading.Thread(target=lambda: results.append(llm.context_tokens())) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [2048] * 16 and seen == ["GET /props"]


def test_settings_are_validated():
    with pytest.raises(ValueError):
        Settings(llm_context_tokens=10)
    with pytest.raises(ValueError):
        LLMClient("http://x/v1", "m", context_tokens=0)
