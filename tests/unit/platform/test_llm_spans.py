"""Every LLM call as a GenAI span: its model, tokens, finish reason, attempts, and its content only when allowed."""

from __future__ import annotations

import json

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from agentsearch.pipeline.observability import tracing
from agentsearch.pipeline.platform.llm import LLMClient, LLMError
from agentsearch.pipeline.platform.llm_spans import CAPTURE_CONTENT_ENV
from tests.support import llm_fixtures
from tests.support.fake_llm import FakeLLM

fake = llm_fixtures.fake
HI = [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "Say hi"}]


@pytest.fixture
def spans(monkeypatch):
    monkeypatch.delenv(CAPTURE_CONTENT_ENV, raising=False)
    exporter = InMemorySpanExporter()
    tracing.configure_tracing("none", "agentsearch-test", processor=SimpleSpanProcessor(exporter), set_global=False)
    yield exporter
    tracing.shutdown_tracing()


@pytest.fixture
def llm(fake):
    return LLMClient(fake.base_url, model="fake-model", backoff_s=0.01, max_backoff_s=0.05)


def only_span(exporter: InMemorySpanExporter):
    [span] = exporter.get_finished_spans()
    return span, dict(span.attributes or {})


def test_a_reply_is_one_client_span_named_by_the_conventions(spans, fake, llm):
    fake.script("hello")
    with tracing.stage_span("answer", "4c1a6e0e-3f0f-4a51-9d0e-2b1c3a4d5e6f"):
        llm.reply(HI, timeout_s=5, max_tokens=8, temperature=0.2)
    chat = next(s for s in spans.get_finished_spans() if s.name == "chat fake-model")
    stage = next(s for s in spans.get_finished_spans() if s.name == "answer")
    attributes = dict(chat.attributes or {})
    assert chat.kind == SpanKind.CLIENT and chat.parent is not None and chat.parent.span_id == stage.context.span_id
    assert chat.context.trace_id == stage.context.trace_id
    assert attributes["gen_ai.operation.name"] == "chat" and attributes["gen_ai.provider.name"] == "openai"
    assert attributes["gen_ai.request.model"] == "fake-model" and attributes["gen_ai.request.max_tokens"] == 8
    assert attributes["gen_ai.request.temperature"] == 0.2
    assert attributes["server.address"] == "127.0.0.1"
    assert attributes["server.port"] == int(fake.base_url.split(":")[2].split("/")[0])
    assert tuple(attributes["gen_ai.response.finish_reasons"]) == ("stop",)
    assert attributes["gen_ai.usage.input_tokens"] == 0 and attributes["gen_ai.usage.output_tokens"] == 0
    assert attributes["openinference.span.kind"] == "LLM" and attributes["agentsearch.llm.attempts"] == 1
    # Prompts hold the documents' text: not recorded unless the operator says so.
    assert not any(k in attributes for k in ("gen_ai.input.messages", "gen_ai.output.messages", "input.value"))


def test_content_is_recorded_when_the_operator_allows_it(spans, fake, llm, monkeypatch):
    monkeypatch.setenv(CAPTURE_CONTENT_ENV, "true")
    fake.script("hello there")
    llm.reply(HI, timeout_s=5)
    _, attributes = only_span(spans)
    inputs = json.loads(attributes["gen_ai.input.messages"])
    assert [m["role"] for m in inputs] == ["system", "user"] and inputs[1]["parts"][0]["content"] == "Say hi"
    [output] = json.loads(attributes["gen_ai.output.messages"])
    assert output["role"] == "assistant" and output["parts"][0]["content"] == "hello there"
    assert attributes["output.value"] == "hello there"


def test_retries_are_one_span_with_their_count_and_a_failure_is_an_error(spans, fake, llm):
    fake.script(FakeLLM.error(503, "loading model"), "ok")
    llm.reply(HI, timeout_s=5)
    _, attributes = only_span(spans)
    assert attributes["agentsearch.llm.attempts"] == 2
    spans.clear()
    fake.script(FakeLLM.error(401, "bad key"))
    with pytest.raises(LLMError):
        llm.reply(HI, timeout_s=5)
    span, attributes = only_span(spans)
    assert span.status.status_code == StatusCode.ERROR and attributes["error.type"] == "LLMError"


def test_a_streamed_reply_is_one_span_with_its_whole_text(spans, fake, llm, monkeypatch):
    monkeypatch.setenv(CAPTURE_CONTENT_ENV, "1")
    fake.script(FakeLLM.streamed(["Hel", "lo", " world"], interval_s=0.0))
    assert "".join(llm.stream(HI, timeout_s=5)) == "Hello world"
    span, attributes = only_span(spans)
    assert attributes["output.value"] == "Hello world"
    assert tuple(attributes["gen_ai.response.finish_reasons"]) == ("stop",)
    assert span.status.status_code != StatusCode.ERROR


def test_a_stream_its_reader_leaves_ends_its_span_without_an_error(spans, fake, llm):
    fake.script(FakeLLM.streamed(["one ", "two ", "three"], interval_s=0.0))
    pieces = llm.stream(HI, timeout_s=5)
    assert next(pieces) == "one "
    pieces.close()
    span, _ = only_span(spans)
    assert span.status.status_code != StatusCode.ERROR


def test_no_span_once_tracing_is_shut_down(fake, llm):
    exporter = InMemorySpanExporter()
    tracing.configure_tracing("none", "agentsearch-test", processor=SimpleSpanProcessor(exporter), set_global=False)
    fake.script("traced", "not traced")
    llm.reply(HI, timeout_s=5)
    tracing.shutdown_tracing()
    llm.reply(HI, timeout_s=5)
    assert len(exporter.get_finished_spans()) == 1
