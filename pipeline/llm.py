"""The LLM provider: one OpenAI-compatible chat client for every LLM variant (agents and answers).

Configured by ``AGENTSEARCH_OPENAI_BASE_URL`` / ``_API_KEY`` / ``_MODEL``; when unset, ``LLMClient.from_settings``
returns ``None`` and callers use their offline path. The client's own timeout stays below the caller's deadline,
and transient errors (connection, timeout, 429, 5xx) are retried with exponential backoff by the ``openai`` client.

Usage::

    llm = LLMClient.from_settings(settings)
    if llm is not None:
        text = llm.complete([{"role": "user", "content": "Say hi"}], timeout_s=10)
        data = llm.complete_json([{"role": "user", "content": "Reply with {\\"ok\\": true}"}], timeout_s=10)
"""

from __future__ import annotations

import json
import re
from typing import Any

import openai

from pipeline.settings import Settings

_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.MULTILINE)


class LLMError(RuntimeError):
    pass


class LLMClient:
    def __init__(self, base_url: str, model: str, api_key: str | None = None, max_retries: int = 2) -> None:
        self.model = model
        self._client = openai.OpenAI(base_url=base_url, api_key=api_key or "not-needed", max_retries=max_retries)

    @classmethod
    def from_settings(cls, settings: Settings) -> "LLMClient | None":
        if not (settings.openai_base_url and settings.openai_model):
            return None
        return cls(settings.openai_base_url, settings.openai_model, settings.openai_api_key)

    def complete(self, messages: list[dict[str, str]], timeout_s: float = 20.0, temperature: float = 0.0,
                 max_tokens: int | None = None) -> str:
        try:
            reply = self._client.chat.completions.create(
                model=self.model,
                messages=messages,
                temperature=temperature,
                max_tokens=max_tokens,
                timeout=timeout_s,
            )
        except openai.OpenAIError as exc:
            raise LLMError(f"LLM call failed: {type(exc).__name__}: {exc}") from exc
        if not reply.choices or reply.choices[0].message.content is None:
            raise LLMError("LLM reply had no content")
        return reply.choices[0].message.content

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
