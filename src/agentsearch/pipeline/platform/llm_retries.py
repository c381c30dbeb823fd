"""Which failed LLM calls are worth another try, and how long the endpoint asked to wait before it.

Connection errors and timeouts, 408, 409, 429 and 5xx are transient (a llama.cpp server still loading its model
answers 503); anything else (400, 401, 404) would fail again. ``retry_after_s`` reads ``Retry-After`` (seconds) and
OpenAI's ``retry-after-ms``.

Usage::

    transient, status = is_transient(exc)      # (True, 503)
    delay = retry_after_s(exc)                 # 2.0, or None when the endpoint did not say
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import openai

TRANSIENT_STATUS = frozenset({408, 409, 429})


def is_transient(exc: openai.OpenAIError) -> tuple[bool, int | None]:
    import openai

    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        return status in TRANSIENT_STATUS or status >= 500, status
    if isinstance(exc, openai.APIConnectionError):  # APITimeoutError included
        return True, None
    return False, None


def retry_after_s(exc: Exception) -> float | None:
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
