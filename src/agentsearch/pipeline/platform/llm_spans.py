"""A span for every LLM call, in OpenTelemetry's GenAI semantic conventions, so a trace store shows each call's model,
tokens and (where the operator allows) its prompt and completion under the job's stage or agent that made it.

The client (``agentsearch.pipeline.platform.llm``) opens one span per call, retries included, named
``chat {model}``, of kind CLIENT, child of whatever span is current (the ``answer`` stage, an ``agent <id>``).
Attributes, as the conventions name them:

- ``gen_ai.operation.name`` ``chat``; ``gen_ai.provider.name`` ``openai`` (the wire protocol every endpoint here
  speaks) and its older name ``gen_ai.system``; ``server.address`` / ``server.port`` of the endpoint;
- ``gen_ai.request.model``, ``.temperature``, ``.max_tokens``; ``gen_ai.output.type`` ``json`` when a JSON schema
  constrained the reply;
- ``gen_ai.response.finish_reasons``, ``gen_ai.usage.input_tokens`` / ``output_tokens`` as the endpoint counted
  them; ``error.type`` on a failed call, and ``agentsearch.llm.attempts``;
- with ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`` (the conventions' own opt-in; off by default,
  since prompts carry the documents' text): ``gen_ai.input.messages`` and ``gen_ai.output.messages`` as JSON.

OpenInference's names for the same facts (``openinference.span.kind`` ``LLM``, ``llm.model_name``,
``llm.token_count.*``, ``input.value`` / ``output.value`` under the same opt-in) are set beside them: Arize Phoenix
files a span as an LLM call by them.

Nothing is recorded until ``agentsearch.pipeline.observability.tracing.configure_tracing`` hands this module its
provider (``use_provider``): the client then pays one ``None`` check per call.

Usage::

    with llm_span("http://127.0.0.1:8080/v1", "SmolLM2", messages, temperature=0.0, max_tokens=64) as call:
        reply = ...                                        # the call itself, retries included
        call.replied(reply.text, reply.finish_reason, reply.prompt_tokens, reply.completion_tokens)
    # an exception leaving the block marks the span as an error with its type
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

from opentelemetry.trace import Span, SpanKind, Status, StatusCode, TracerProvider

CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
PROVIDER_NAME = "openai"
# A prompt holds whole documents: past this many characters, the captured text is cut (trace stores limit
# attribute sizes too, and a span is sent in one request).
MAX_CAPTURED_CHARS = 32_000

_provider: TracerProvider | None = None


def use_provider(provider: TracerProvider | None) -> None:
    """Record LLM calls with ``provider`` (``None``: record nothing)."""
    global _provider
    _provider = provider


def capture_content() -> bool:
    return os.environ.get(CAPTURE_CONTENT_ENV, "").strip().lower() in ("1", "true", "yes")


def _cut(text: str) -> str:
    return text if len(text) <= MAX_CAPTURED_CHARS else text[:MAX_CAPTURED_CHARS] + "…"


class LLMCall:
    """The open span of one call: ``replied`` records what came back, ``attempt`` counts the tries."""

    def __init__(self, span: Span | None, capture: bool) -> None:
        self.span = span
        self.capture = capture
        self.attempts = 0
        # What a streamed reply's chunks said: the finish reason comes with the last text, the usage (llama.cpp,
        # vLLM, OpenAI when asked) with the final chunk.
        self.finish_reason: str | None = None
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None

    def attempt(self) -> None:
        self.attempts += 1

    def chunk(self, chunk: Any) -> None:
        """Read one streamed chunk for its finish reason and token usage."""
        if self.span is None:
            return
        for choice in getattr(chunk, "choices", None) or []:
            self.finish_reason = getattr(choice, "finish_reason", None) or self.finish_reason
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            self.input_tokens = getattr(usage, "prompt_tokens", None)
            self.output_tokens = getattr(usage, "completion_tokens", None)

    def replied(self, text: str, finish_reason: str | None, input_tokens: int | None = None,
                output_tokens: int | None = None) -> None:
        span = self.span
        if span is None:
            return
        if finish_reason:
            span.set_attribute("gen_ai.response.finish_reasons", [finish_reason])
        for names, count in ((("gen_ai.usage.input_tokens", "llm.token_count.prompt"), input_tokens),
                             (("gen_ai.usage.output_tokens", "llm.token_count.completion"), output_tokens)):
            if count is not None:
                for name in names:
                    span.set_attribute(name, count)
        if input_tokens is not None and output_tokens is not None:
            span.set_attribute("llm.token_count.total", input_tokens + output_tokens)
        if self.capture:
            message = {"role": "assistant", "parts": [{"type": "text", "content": _cut(text)}],
                       "finish_reason": finish_reason or "stop"}
            span.set_attribute("gen_ai.output.messages", json.dumps([message], ensure_ascii=False))
            span.set_attribute("output.value", _cut(text))


def _request_attributes(base_url: str, model: str, temperature: float, max_tokens: int | None,
                        json_output: bool) -> dict[str, Any]:
    address = urlsplit(base_url)
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat", "gen_ai.provider.name": PROVIDER_NAME, "gen_ai.system": PROVIDER_NAME,
        "gen_ai.request.model": model, "gen_ai.request.temperature": temperature,
        "openinference.span.kind": "LLM", "llm.model_name": model, "llm.provider": PROVIDER_NAME,
    }
    if address.hostname:
        attributes["server.address"] = address.hostname
        attributes["server.port"] = address.port or (443 if address.scheme == "https" else 80)
    if max_tokens is not None:
        attributes["gen_ai.request.max_tokens"] = max_tokens
    if json_output:
        attributes["gen_ai.output.type"] = "json"
    return attributes


@contextmanager
def llm_span(base_url: str, model: str, messages: list[dict[str, str]], *, temperature: float,
             max_tokens: int | None = None, json_output: bool = False) -> Iterator[LLMCall]:
    """One LLM call's span (see the module's docstring); a no-op ``LLMCall`` while tracing is off."""
    provider = _provider
    if provider is None:
        yield LLMCall(None, False)
        return
    capture = capture_content()
    # Not made current: nothing runs inside a call that could be its child, and a streamed call's span stays open
    # across the generator's yields, where another context may be current.
    span = provider.get_tracer("agentsearch").start_span(
        f"chat {model}", kind=SpanKind.CLIENT,
        attributes=_request_attributes(base_url, model, temperature, max_tokens, json_output))
    if capture:
        inputs = [{"role": m.get("role", "user"), "parts": [{"type": "text", "content": _cut(m.get("content", ""))}]}
                  for m in messages]
        span.set_attribute("gen_ai.input.messages", json.dumps(inputs, ensure_ascii=False))
        span.set_attribute("input.value", _cut(json.dumps(messages, ensure_ascii=False)))
    call = LLMCall(span, capture)
    try:
        yield call
    except GeneratorExit:
        raise  # a streamed reply its reader stopped taking: not a failed call
    except BaseException as exc:
        span.set_attribute("error.type", type(exc).__name__)
        span.set_status(Status(StatusCode.ERROR, str(exc)[:500]))
        raise
    finally:
        if call.attempts:
            span.set_attribute("agentsearch.llm.attempts", call.attempts)
        span.end()
