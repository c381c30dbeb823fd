"""The LLM provider: one OpenAI-compatible chat client for every LLM variant (agents and answers).

Configured by ``AGENTSEARCH_OPENAI_BASE_URL`` / ``_API_KEY`` / ``_MODEL``; when unset, ``LLMClient.from_settings``
returns ``None`` and callers use their offline path.

``timeout_s`` is the budget of the whole call, retries included: a caller with a deadline passes a budget below
it and gets an answer or an ``LLMError`` in time. Transient errors (connection errors, 408, 409, 429 and 5xx: a
llama.cpp server still loading its model answers 503) are retried up to ``max_retries`` times with exponential
backoff and jitter (a server's ``Retry-After`` is honoured when it fits the budget); anything else (400, 401, 404,
a reply without content) fails at once. The ``openai`` client's own retries are off, so the budget is really the
bound.

A reply says how it ended (``LLMReply.finish_reason``): ``"length"`` is a reply cut at ``max_tokens``, which a
caller wanting JSON or a whole query must not take as complete. ``json_schema`` asks the endpoint to constrain the
reply to that schema (``response_format`` of type ``json_schema``; llama.cpp, vLLM and OpenAI honour it): a small
model then writes valid JSON where it would otherwise add prose or stop half-way. An endpoint that refuses
``response_format`` (a 400 naming it) is asked again without it, and the client remembers not to send it again;
``AGENTSEARCH_LLM_STRUCTURED_OUTPUT=false`` never sends it.

Prompts are budgeted in tokens (``agentsearch.pipeline.platform.prompt_budget``), so the client says what it knows of
the model: ``context_tokens()`` (``AGENTSEARCH_LLM_CONTEXT_TOKENS``, else the endpoint's own figure: llama.cpp's
``/props``, vLLM's ``/v1/models``) and ``count_tokens(text)`` (the endpoint's ``/tokenize`` where it has one, else
``estimate_tokens``). What an endpoint said is kept for the process, per endpoint, since every job's client asks
the same server. The client is shared by a thread-pool worker's threads: everything it remembers is behind a lock.

Usage::

    llm = LLMClient.from_settings(settings)
    if llm is not None:
        text = llm.complete([{"role": "user", "content": "Say hi"}], timeout_s=10)
        reply = llm.reply([{"role": "user", "content": "Name a colour"}], max_tokens=16,
                          json_schema={"type": "object", "properties": {"colour": {"type": "string"}}})
        reply.text, reply.finish_reason          # '{"colour": "blue"}', "stop" ("length" when cut short)
        data = llm.complete_json([{"role": "user", "content": "Reply with {\\"ok\\": true}"}], timeout_s=10)
        for piece in llm.stream([{"role": "user", "content": "Say hi"}], timeout_s=10):
            print(piece, end="")
        llm.context_tokens(), llm.count_tokens("How many tokens is this?")   # 2048, 7
"""

from __future__ import annotations

import json
import logging
import math
import random
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx

from agentsearch.pipeline.platform.llm_endpoints import ENDPOINT_FACTS_TTL_S, UNREACHABLE_TTL_S, endpoint_facts
from agentsearch.pipeline.platform.llm_retries import is_transient, retry_after_s
from agentsearch.pipeline.platform.llm_spans import LLMCall, llm_span
from agentsearch.pipeline.platform.settings import Settings

# openai is imported by the functions that call or read it, with the first client: 18 MiB a process that asks no
# LLM (the default: no AGENTSEARCH_OPENAI_BASE_URL) never holds.

log = logging.getLogger(__name__)

_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.MULTILINE)
# A 400 about the output format: the endpoint does not know response_format (or this schema), not a bad prompt.
_REFUSED_FORMAT = re.compile(r"response_format|json_schema|json schema|grammar", re.IGNORECASE)
DEFAULT_CONTEXT_TOKENS = 4096
PROBE_TIMEOUT_S = 2.0


class LLMError(RuntimeError):
    """An LLM call that gave no usable reply. ``transient`` tells whether a retry could have helped;
    ``budget_spent`` that the call's ``timeout_s`` ran out (a reply not come, or cut, in time; no time left to
    retry): a longer budget might have had the reply."""

    def __init__(self, message: str, *, status: int | None = None, transient: bool = False, attempts: int = 0,
                 budget_spent: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.transient = transient
        self.attempts = attempts
        self.budget_spent = budget_spent


@dataclass(frozen=True)
class LLMReply:
    """One assistant reply: its text, how it ended (``"stop"``, ``"length"`` when cut at ``max_tokens``) and the
    tokens the endpoint counted (``None`` when it did not say)."""

    text: str
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None

    @property
    def truncated(self) -> bool:
        return self.finish_reason == "length"


def estimate_tokens(text: str) -> int:
    """Tokens of ``text`` without a tokenizer, on the high side: ASCII bytes / 2.5, rounded up, plus two thirds of
    a token for each digit and ASCII punctuation mark, plus one token for each byte of a non-ASCII character.

    Subword tokenizers give English prose 3.5 to 5 bytes a token, but cut numbers and JSON punctuation into short
    pieces, and a script the vocabulary barely knows down to bytes (an English-trained model spends two tokens on a
    Chinese character): a byte is the most any byte-level tokenizer spends. Measured against SmolLM2's tokenizer it
    never fell below the real count (English, German, Spanish, French, Russian, Chinese, Japanese, figures, JSON,
    code), and over-counts English prose by about half: over-counting costs some context, under-counting the
    request (the server refuses a prompt past its context).
    """
    if not text:
        return 0
    ascii_bytes = pieces = 0
    for char in text:
        if char < "\x80":
            ascii_bytes += 1
            pieces += char.isdigit() or not (char.isalpha() or char.isspace())
    return math.ceil(ascii_bytes / 2.5) + pieces * 2 // 3 + len(text.encode("utf-8")) - ascii_bytes


_PROBE = httpx.Client(timeout=PROBE_TIMEOUT_S)  # pooled and thread-safe: probes are small and frequent


class LLMClient:
    def __init__(self, base_url: str, model: str, api_key: str | None = None, max_retries: int = 2,
                 backoff_s: float = 0.5, max_backoff_s: float = 8.0, *, structured_output: bool = True,
                 context_tokens: int | None = None, default_context_tokens: int = DEFAULT_CONTEXT_TOKENS) -> None:
        if context_tokens is not None and context_tokens < 1:
            raise ValueError("context_tokens must be positive")
        if default_context_tokens < 1:
            raise ValueError("default_context_tokens must be positive")
        self.model = model
        self.base_url = base_url
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.default_context_tokens = default_context_tokens
        self._configured_context = context_tokens
        self._endpoint = endpoint_facts(base_url, model)
        # Off by configuration, or by an earlier refusal of this endpoint (remembered for the process).
        self.structured_output = structured_output and self._endpoint.structured_output
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        import openai

        # Retries are ours (bounded by the call's budget), not the openai client's.
        self._client = openai.OpenAI(base_url=base_url, api_key=api_key or "not-needed", max_retries=0)

    @classmethod
    def from_settings(cls, settings: Settings) -> LLMClient | None:
        if not (settings.openai_base_url and settings.openai_model):
            return None
        return cls(settings.openai_base_url, settings.openai_model, settings.openai_api_key,
                   structured_output=settings.llm_structured_output, context_tokens=settings.llm_context_tokens,
                   default_context_tokens=settings.llm_default_context_tokens)

    def __repr__(self) -> str:
        return f"LLMClient({self.base_url!r}, model={self.model!r})"

    @property
    def root_url(self) -> str:
        """The server's root: the base URL without its ``/v1`` (llama.cpp's and vLLM's own routes live there)."""
        return re.sub(r"/v1/?$", "", self.base_url.rstrip("/"))

    # --- chat ---------------------------------------------------------------------------------------------------

    def _request(self, messages: list[dict[str, str]], temperature: float, max_tokens: int | None,
                 json_schema: dict | None, remaining: float, stream: bool = False) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": temperature,
                                  "timeout": max(0.05, remaining)}
        if stream:
            kwargs["stream"] = True
        if max_tokens is not None:
            kwargs["max_tokens"] = max_tokens
        if json_schema is not None and self.structured_output:
            name = re.sub(r"[^A-Za-z0-9_-]", "_", str(json_schema.get("title") or "reply"))[:64]
            kwargs["response_format"] = {"type": "json_schema", "json_schema": {"name": name, "schema": json_schema}}
        return kwargs

    def _refused_format(self, exc: Exception, kwargs: dict[str, Any]) -> bool:
        """True (and remembered) when ``exc`` is the endpoint refusing the ``response_format`` just sent."""
        import openai

        if "response_format" not in kwargs or not isinstance(exc, openai.BadRequestError):
            return False
        if not _REFUSED_FORMAT.search(str(exc)):
            return False
        log.warning("LLM endpoint %s refused response_format (%s); asking without it from now on", self.base_url,
                    str(exc)[:200])
        self.structured_output = False
        self._endpoint.structured_output = False
        return True

    def reply(self, messages: list[dict[str, str]], timeout_s: float = 20.0, temperature: float = 0.0,
              max_tokens: int | None = None, json_schema: dict | None = None) -> LLMReply:
        """The assistant's reply with how it ended. Raises ``LLMError`` within ``timeout_s`` (plus a few ms) when
        there is none. ``json_schema`` constrains the reply where the endpoint can (see the module's docstring).
        Traced as one GenAI span, retries included (``agentsearch.pipeline.platform.llm_spans``)."""
        with llm_span(self.base_url, self.model, messages, temperature=temperature, max_tokens=max_tokens,
                      json_output=json_schema is not None) as call:
            reply = self._reply(call, messages, timeout_s, temperature, max_tokens, json_schema)
            call.replied(reply.text, reply.finish_reason, reply.prompt_tokens, reply.completion_tokens)
            return reply

    def _reply(self, call: LLMCall, messages: list[dict[str, str]], timeout_s: float, temperature: float,
               max_tokens: int | None, json_schema: dict | None) -> LLMReply:
        import openai

        deadline = time.monotonic() + timeout_s
        attempt = 0
        while True:
            attempt += 1
            call.attempt()
            kwargs = self._request(messages, temperature, max_tokens, json_schema, deadline - time.monotonic())
            try:
                reply = self._client.chat.completions.create(**kwargs)
            except openai.OpenAIError as exc:
                if self._refused_format(exc, kwargs):
                    attempt -= 1  # the same request in a form the endpoint takes: not a retry
                    continue
                transient, status = is_transient(exc)
                what = f"LLM call failed (attempt {attempt}): {type(exc).__name__}: {exc}"
                # Each request's own timeout is what is left of the budget: its timing out is the budget's end.
                timed_out = isinstance(exc, openai.APITimeoutError)
                if timed_out:
                    what = f"LLM call timed out after {timeout_s:g} s budget (attempt {attempt})"
                if not transient or attempt > self.max_retries:
                    raise LLMError(what, status=status, transient=transient, attempts=attempt,
                                   budget_spent=timed_out) from exc
                self._wait_to_retry(exc, what, attempt, deadline, timeout_s, status)
                continue
            if not reply.choices or reply.choices[0].message.content is None:
                raise LLMError("LLM reply had no content", attempts=attempt)
            usage = getattr(reply, "usage", None)
            return LLMReply(text=reply.choices[0].message.content, finish_reason=reply.choices[0].finish_reason,
                            prompt_tokens=getattr(usage, "prompt_tokens", None),
                            completion_tokens=getattr(usage, "completion_tokens", None))

    def complete(self, messages: list[dict[str, str]], timeout_s: float = 20.0, temperature: float = 0.0,
                 max_tokens: int | None = None, json_schema: dict | None = None) -> str:
        """The assistant's reply text (``reply(...).text``: a caller that must know whether it was cut short asks
        ``reply``). Raises ``LLMError`` within ``timeout_s`` (plus a few ms) when there is none."""
        return self.reply(messages, timeout_s=timeout_s, temperature=temperature, max_tokens=max_tokens,
                          json_schema=json_schema).text

    def stream(self, messages: list[dict[str, str]], timeout_s: float = 20.0, temperature: float = 0.0,
               max_tokens: int | None = None, json_schema: dict | None = None) -> Iterator[str]:
        """The reply's text in pieces as the endpoint sends them (``stream=True``), under the same budget as
        ``complete``: transient errors are retried until the first piece arrives, never after (the caller has
        already shown the text). Raises ``LLMError`` when the budget runs out, the stream breaks or holds no text.
        """
        with llm_span(self.base_url, self.model, messages, temperature=temperature, max_tokens=max_tokens,
                      json_output=json_schema is not None) as call:
            pieces: list[str] = []  # the whole completion, kept only when the span records it
            for piece in self._stream(call, messages, timeout_s, temperature, max_tokens, json_schema):
                if call.capture:
                    pieces.append(piece)
                yield piece
            call.replied("".join(pieces), call.finish_reason, call.input_tokens, call.output_tokens)

    def _stream(self, call: LLMCall, messages: list[dict[str, str]], timeout_s: float, temperature: float,
                max_tokens: int | None, json_schema: dict | None) -> Iterator[str]:
        import openai

        deadline = time.monotonic() + timeout_s
        attempt = 0
        while True:
            attempt += 1
            call.attempt()
            kwargs = self._request(messages, temperature, max_tokens, json_schema, deadline - time.monotonic(),
                                   stream=True)
            started = False
            try:
                chunks = self._client.chat.completions.create(**kwargs)
                with chunks:
                    for chunk in chunks:
                        call.chunk(chunk)
                        piece = chunk.choices[0].delta.content if chunk.choices else None
                        if piece:
                            started = True
                            yield piece
                        if time.monotonic() > deadline:
                            raise LLMError(f"LLM stream ran past its {timeout_s:g} s budget", transient=True,
                                           attempts=attempt, budget_spent=True)
                if not started:
                    raise LLMError("LLM reply had no content", attempts=attempt)
                return
            except (openai.OpenAIError, httpx.HTTPError) as exc:
                if not started and self._refused_format(exc, kwargs):
                    attempt -= 1
                    continue
                # A stream broken while it is read surfaces as the transport's own error, not the client's.
                transient, status = is_transient(exc) if isinstance(exc, openai.OpenAIError) else (True, None)
                what = f"LLM stream failed (attempt {attempt}): {type(exc).__name__}: {exc}"
                timed_out = isinstance(exc, (openai.APITimeoutError, httpx.TimeoutException))
                if timed_out:
                    what = f"LLM stream timed out after {timeout_s:g} s budget (attempt {attempt})"
                if started or not transient or attempt > self.max_retries:
                    raise LLMError(what, status=status, transient=transient, attempts=attempt,
                                   budget_spent=timed_out) from exc
                self._wait_to_retry(exc, what, attempt, deadline, timeout_s, status)

    def _wait_to_retry(self, exc: Exception, what: str, attempt: int, deadline: float, timeout_s: float,
                       status: int | None) -> None:
        """Sleep before the next attempt (the server's Retry-After, else jittered exponential backoff), or raise
        ``LLMError`` when that sleep would not leave the budget any time for it."""
        delay = retry_after_s(exc)
        if delay is None:
            # Jitter spreads the retries of many workers apart; it guards nothing, so random's generator is enough.
            jitter = 1 - 0.25 * random.random()  # noqa: S311
            delay = min(self.max_backoff_s, self.backoff_s * 2 ** (attempt - 1)) * jitter
        if time.monotonic() + delay >= deadline:
            raise LLMError(f"{what}; no time left in the {timeout_s:g} s budget to retry", status=status,
                           transient=True, attempts=attempt, budget_spent=True) from exc
        time.sleep(delay)

    def complete_json(self, messages: list[dict[str, str]], timeout_s: float = 20.0, **kwargs: Any) -> Any:
        """A completion parsed as JSON (``reply_json``); ``json_schema=`` asks the endpoint for that shape."""
        return reply_json(self.reply(messages, timeout_s=timeout_s, **kwargs))

    # --- what the endpoint knows about its model -------------------------------------------------------------

    def context_tokens(self) -> int | None:
        """The tokens one request may hold (prompt and reply): ``AGENTSEARCH_LLM_CONTEXT_TOKENS`` when set, else
        what the endpoint says (llama.cpp ``GET /props``: the context of one slot; vLLM ``GET /v1/models``:
        ``max_model_len``), asked once and kept; ``None`` when neither says."""
        if self._configured_context is not None:
            return self._configured_context
        facts = self._endpoint
        with facts.lock:
            if time.monotonic() < facts.context_until:
                return facts.context
            context, reached = self._ask_context()
            facts.context = context
            facts.context_until = time.monotonic() + (ENDPOINT_FACTS_TTL_S if reached else UNREACHABLE_TTL_S)
            return context

    def _ask_context(self) -> tuple[int | None, bool]:
        """(context tokens or None, whether the endpoint answered at all)."""
        reached = False
        try:
            response = _PROBE.get(f"{self.root_url}/props", headers=self._headers)
            reached = True
            if response.status_code == 200:
                n_ctx = (response.json().get("default_generation_settings") or {}).get("n_ctx")
                if isinstance(n_ctx, int) and n_ctx > 0:
                    return n_ctx, True
            response = _PROBE.get(f"{self.base_url.rstrip('/')}/models", headers=self._headers)
            if response.status_code == 200:
                for entry in response.json().get("data") or []:
                    size = entry.get("max_model_len") if isinstance(entry, dict) else None
                    if entry.get("id") == self.model and isinstance(size, int) and size > 0:
                        return size, True
        except (httpx.HTTPError, ValueError, AttributeError) as exc:
            log.info("LLM endpoint %s did not say its context size: %s", self.base_url, exc)
        return None, reached

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` by the model's own tokenizer where the endpoint offers one (llama.cpp and vLLM
        ``POST /tokenize``), else ``estimate_tokens`` (on the high side). An endpoint without the route is asked
        once."""
        if not text:
            return 0
        facts = self._endpoint
        if facts.tokenizes is False or time.monotonic() < facts.tokenize_after:
            return estimate_tokens(text)
        try:
            response = _PROBE.post(f"{self.root_url}/tokenize", headers=self._headers,
                                   json={"content": text, "prompt": text, "model": self.model})
        except httpx.HTTPError:
            # Unreachable now: estimated, and not asked again for a while (a prompt's texts would each wait).
            facts.tokenize_after = time.monotonic() + UNREACHABLE_TTL_S
            return estimate_tokens(text)
        tokens = None
        if response.status_code == 200:
            try:
                tokens = response.json().get("tokens")  # llama.cpp: "content" counted; vLLM: "prompt"
            except (ValueError, AttributeError):
                tokens = None
        if not isinstance(tokens, list):
            if response.status_code < 500:
                with facts.lock:
                    facts.tokenizes = False
            return estimate_tokens(text)
        if facts.tokenizes is None:
            with facts.lock:
                facts.tokenizes = True
        return len(tokens)


def reply_json(reply: LLMReply) -> Any:
    """The JSON value of a reply (``parse_json_reply``); a reply cut at ``max_tokens`` whose JSON did not end
    raises ``LLMError`` saying so."""
    try:
        return parse_json_reply(reply.text)
    except LLMError as exc:
        if reply.truncated:
            raise LLMError(f"LLM reply cut at max_tokens before its JSON ended: {reply.text[:200]!r}") from exc
        raise


def parse_json_reply(text: str) -> Any:
    """The JSON value in a reply: the whole text, else the longest JSON object or array inside it (prose or a
    code fence around it tolerated). Raises ``LLMError`` when there is none."""
    cleaned = _FENCE.sub("", text.strip())
    try:
        return json.loads(cleaned)
    except json.JSONDecodeError:
        pass
    decoder = json.JSONDecoder()
    best: tuple[int, Any] | None = None
    position, tries = 0, 0
    while tries < 200:
        starts = [i for i in (cleaned.find("{", position), cleaned.find("[", position)) if i >= 0]
        if not starts:
            break
        start = min(starts)
        tries += 1
        try:
            value, end = decoder.raw_decode(cleaned, start)
        except json.JSONDecodeError:
            position = start + 1
            continue
        if best is None or end - start > best[0]:
            best = (end - start, value)
        position = end  # a value inside this one is never longer than it
    if best is None:
        raise LLMError(f"LLM reply is not JSON: {text[:200]!r}")
    return best[1]
