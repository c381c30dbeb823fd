"""The LLM provider: one OpenAI-compatible chat client for every LLM variant (agents and answers).

Configured by ``AGENTSEARCH_OPENAI_BASE_URL`` / ``_API_KEY`` / ``_MODEL``; when unset, ``LLMClient.from_settings``
returns ``None`` and callers use their offline path.

``timeout_s`` is the budget of the whole call, retries included: a caller with a deadline passes a budget below
it and gets an answer or an ``LLMError`` in time. Transient errors (connection errors, 408, 409, 429 and 5xx) are
retried up to ``max_retries`` times with exponential backoff and jitter (a server's ``Retry-After`` is honoured
when it fits the budget); anything else (400, 401, 404, a reply without content) fails at once. The ``openai``
client's own retries are off, so the budget is really the bound.

Usage::

    llm = LLMClient.from_settings(settings)
    if llm is not None:
        text = llm.complete([{"role": "user", "content": "Say hi"}], timeout_s=10)
        data = llm.complete_json([{"role": "user", "content": "Reply with {\\"ok\\": true}"}], timeout_s=10)
        for piece in llm.stream([{"role": "user", "content": "Say hi"}], timeout_s=10):
            print(piece, end="")
"""

from __future__ import annotations

import json
import random
import re
import time
from collections.abc import Iterator
from typing import Any

import httpx
import openai

from pipeline.platform.settings import Settings

_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.MULTILINE)
TRANSIENT_STATUS = frozenset({408, 409, 429})


class LLMError(RuntimeError):
    """An LLM call that gave no usable reply. ``transient`` tells whether a retry could have helped."""

    def __init__(self, message: str, *, status: int | None = None, transient: bool = False, attempts: int = 0) -> None:
        super().__init__(message)
        self.status = status
        self.transient = transient
        self.attempts = attempts


def _is_transient(exc: openai.OpenAIError) -> tuple[bool, int | None]:
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        return status in TRANSIENT_STATUS or status >= 500, status
    if isinstance(exc, openai.APIConnectionError):  # APITimeoutError included
        return True, None
    return False, None


def _retry_after_s(exc: Exception) -> float | None:
    response = getattr(exc, "response", None)
    if response is None:
        return None
    for header, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        raw = response.headers.get(header)
        if raw:
            try:
                return max(0.0, float(raw) / divisor)
            except ValueError:
                continue
    return None


class LLMClient:
    def __init__(self, base_url: str, model: str, api_key: str | None = None, max_retries: int = 2,
                 backoff_s: float = 0.5, max_backoff_s: float = 8.0) -> None:
        self.model = model
        self.base_url = base_url
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        # Retries are ours (bounded by the call's budget), not the openai client's.
        self._client = openai.OpenAI(base_url=base_url, api_key=api_key or "not-needed", max_retries=0)

    @classmethod
    def from_settings(cls, settings: Settings) -> "LLMClient | None":
        if not (settings.openai_base_url and settings.openai_model):
            return None
        return cls(settings.openai_base_url, settings.openai_model, settings.openai_api_key)

    def __repr__(self) -> str:
        return f"LLMClient({self.base_url!r}, model={self.model!r})"

    def complete(self, messages: list[dict[str, str]], timeout_s: float = 20.0, temperature: float = 0.0,
                 max_tokens: int | None = None) -> str:
        """The assistant's reply text. Raises ``LLMError`` within ``timeout_s`` (plus a few ms) when there is none."""
        deadline = time.monotonic() + timeout_s
        attempt = 0
        while True:
            attempt += 1
            remaining = deadline - time.monotonic()
            try:
                kwargs: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": temperature,
                                          "timeout": max(0.05, remaining)}
                if max_tokens is not None:
                    kwargs["max_tokens"] = max_tokens
                reply = self._client.chat.completions.create(**kwargs)
            except openai.OpenAIError as exc:
                transient, status = _is_transient(exc)
                what = f"LLM call failed (attempt {attempt}): {type(exc).__name__}: {exc}"
                if isinstance(exc, openai.APITimeoutError):
                    what = f"LLM call timed out after {timeout_s:g} s budget (attempt {attempt})"
                if not transient or attempt > self.max_retries:
                    raise LLMError(what, status=status, transient=transient, attempts=attempt) from exc
                self._wait_to_retry(exc, what, attempt, deadline, timeout_s, status)
                continue
            if not reply.choices or reply.choices[0].message.content is None:
                raise LLMError("LLM reply had no content", attempts=attempt)
            return reply.choices[0].message.content

    def stream(self, messages: list[dict[str, str]], timeout_s: float = 20.0, temperature: float = 0.0,
               max_tokens: int | None = None) -> Iterator[str]:
        """The reply's text in pieces as the endpoint sends them (``stream=True``), under the same budget as
        ``complete``: transient errors are retried until the first piece arrives, never after (the caller has
        already shown the text). Raises ``LLMError`` when the budget runs out, the stream breaks or holds no text.
        """
        deadline = time.monotonic() + timeout_s
        attempt = 0
        while True:
            attempt += 1
            remaining = deadline - time.monotonic()
            kwargs: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": temperature,
                                      "timeout": max(0.05, remaining), "stream": True}
            if max_tokens is not None:
                kwargs["max_tokens"] = max_tokens
            started = False
            try:
                chunks = self._client.chat.completions.create(**kwargs)
                with chunks:
                    for chunk in chunks:
                        piece = chunk.choices[0].delta.content if chunk.choices else None
                        if piece:
                            started = True
                            yield piece
                        if time.monotonic() > deadline:
                            raise LLMError(f"LLM stream ran past its {timeout_s:g} s budget", transient=True,
                                           attempts=attempt)
                if not started:
                    raise LLMError("LLM reply had no content", attempts=attempt)
                return
            except (openai.OpenAIError, httpx.HTTPError) as exc:
                # A stream broken while it is read surfaces as the transport's own error, not the client's.
                transient, status = _is_transient(exc) if isinstance(exc, openai.OpenAIError) else (True, None)
                what = f"LLM stream failed (attempt {attempt}): {type(exc).__name__}: {exc}"
                if isinstance(exc, (openai.APITimeoutError, httpx.TimeoutException)):
                    what = f"LLM stream timed out after {timeout_s:g} s budget (attempt {attempt})"
                if started or not transient or attempt > self.max_retries:
                    raise LLMError(what, status=status, transient=transient, attempts=attempt) from exc
                self._wait_to_retry(exc, what, attempt, deadline, timeout_s, status)

    def _wait_to_retry(self, exc: Exception, what: str, attempt: int, deadline: float, timeout_s: float,
                       status: int | None) -> None:
        """Sleep before the next attempt (the server's Retry-After, else jittered exponential backoff), or raise
        ``LLMError`` when that sleep would not leave the budget any time for it."""
        delay = _retry_after_s(exc)
        if delay is None:
            delay = min(self.max_backoff_s, self.backoff_s * 2 ** (attempt - 1)) * (1 - 0.25 * random.random())
        if time.monotonic() + delay >= deadline:
            raise LLMError(f"{what}; no time left in the {timeout_s:g} s budget to retry", status=status,
                           transient=True, attempts=attempt) from exc
        time.sleep(delay)

    def complete_json(self, messages: list[dict[str, str]], timeout_s: float = 20.0, **kwargs: Any) -> Any:
        """A completion parsed as JSON; code fences and text around the first JSON value are tolerated."""
        text = self.complete(messages, timeout_s=timeout_s, **kwargs)
        return parse_json_reply(text)


def parse_json_reply(text: str) -> Any:
    cleaned = _FENCE.sub("", text.strip())
    try:
        return json.loads(cleaned)
    except json.JSONDecodeError:
        pass
    for opener, closer in (("{", "}"), ("[", "]")):
        start, end = cleaned.find(opener), cleaned.rfind(closer)
        if 0 <= start < end:
            try:
                return json.loads(cleaned[start : end + 1])
            except json.JSONDecodeError:
                continue
    raise LLMError(f"LLM reply is not JSON: {text[:200]!r}")
