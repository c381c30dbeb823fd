"""An answer's LLM calls reach a real trace store as GenAI spans: Arize Phoenix (``phoenix serve``, reading OTLP)
receives the job's ``answer`` stage span and, under it, a ``chat {model}`` span per call to the real llama-server,
with the model, the tokens the server counted, and the prompt and completion only when the operator allows it."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator

import pytest

from agentsearch.devstack.trace_store import TraceStore
from agentsearch.pipeline.documents import Document
from agentsearch.pipeline.job.job_state import JobState
from agentsearch.pipeline.job.workflow import answer_step
from agentsearch.pipeline.observability import tracing
from agentsearch.pipeline.platform.llm import LLMClient
from agentsearch.pipeline.platform.llm_spans import CAPTURE_CONTENT_ENV

pytestmark = pytest.mark.integration

QUESTION = "When did the Harrow Ridge solar farm enter commercial operation?"
DOCUMENTS = [
    Document(id="harrow", title="Harrow Ridge", score=0.9,
             text="The Harrow Ridge solar farm entered commercial operation in March 2024. It delivers 120 MW."),
    Document(id="wind", title="Wind fleet", score=0.4, text="The offshore wind fleet produced 2.1 TWh in 2025."),
]
# The small model on two busy cores: its answer and its judge's verdicts each within this.
LLM_BUDGET_S = 120


class Sink:
    """The answer's stream as a list: it makes the answer step call the LLM streaming, as a job does."""

    def __init__(self) -> None:
        self.pieces: list[str] = []

    def start(self) -> None: ...

    def quick(self, text: str) -> None: ...

    def write(self, piece: str) -> None:
        self.pieces.append(piece)

    def reset(self, reason: str) -> None:
        self.pieces.clear()

    def finish(self, text: str, method: str, fallback_reason: str | None = None) -> None: ...


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Iterator[TraceStore]:
    with TraceStore(tmp_path_factory.mktemp("trace-store")) as running:
        yield running


def traced_answer(store: TraceStore, llm_server, monkeypatch, *, capture: bool, stream: Sink | None) -> list[dict]:
    """One job's answer step with tracing exported to ``store``; the spans the store then holds for the job."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", store.otlp_endpoint)
    monkeypatch.setenv(CAPTURE_CONTENT_ENV, "true" if capture else "false")
    job_id = str(uuid.uuid4())
    tracing.configure_tracing("otlp", "agentsearch-worker", set_global=False)
    try:
        state = JobState(job_id=job_id, collection_id="c1", query=QUESTION, documents=DOCUMENTS)
        answer_step(state, llm=LLMClient(llm_server.url, llm_server.model), stream=stream, timeout_s=LLM_BUDGET_S,
                    judge_timeout_s=LLM_BUDGET_S)
    finally:
        tracing.shutdown_tracing()  # flushes the batch to the store
    trace_id = uuid.UUID(job_id).hex
    deadline = time.monotonic() + 60
    while True:
        spans = store.spans(trace_id=trace_id)
        if any(s["name"].startswith("chat ") for s in spans) or time.monotonic() > deadline:
            return spans


def test_each_llm_call_is_a_genai_span_under_the_answer_stage(store, llm_server, monkeypatch):
    spans = traced_answer(store, llm_server, monkeypatch, capture=False, stream=None)
    [stage] = [s for s in spans if s["name"] == "answer"]
    chats = sorted((s for s in spans if s["name"] == f"chat {llm_server.model}"), key=lambda s: s["start_time"])
    assert chats, [s["name"] for s in spans]
    for chat in chats:
        attributes = chat["attributes"]
        assert chat["parent_id"] == stage["context"]["span_id"]
        assert attributes["gen_ai.operation.name"] == "chat" and attributes["gen_ai.request.model"] == llm_server.model
        assert attributes["server.port"] == llm_server.port
        # What the real server counted, not an estimate.
        assert attributes["gen_ai.usage.input_tokens"] > 0 and attributes["gen_ai.usage.output_tokens"] > 0
        assert "gen_ai.input.messages" not in attributes and "output.value" not in attributes
    draft = chats[0]["attributes"]
    assert draft["gen_ai.response.finish_reasons"][0] in ("stop", "length")


def test_the_prompt_and_completion_are_recorded_when_allowed(store, llm_server, monkeypatch):
    sink = Sink()
    spans = traced_answer(store, llm_server, monkeypatch, capture=True, stream=sink)
    chats = sorted((s for s in spans if s["name"] == f"chat {llm_server.model}"), key=lambda s: s["start_time"])
    assert chats, [s["name"] for s in spans]
    draft = chats[0]["attributes"]  # the streamed draft: the first call
    prompt = json.loads(draft["gen_ai.input.messages"])
    assert any(QUESTION in part["content"] for message in prompt for part in message["parts"])
    [completion] = json.loads(draft["gen_ai.output.messages"])
    assert completion["role"] == "assistant" and completion["parts"][0]["content"].strip()
    assert draft["output.value"] == completion["parts"][0]["content"]
