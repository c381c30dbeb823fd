"""The answer's part of a job's server-sent events: ``answer.delta`` as the text is written, then ``answer``.

The events route asks the job's owner first; this reads the job's answer stream
(``agentsearch.pipeline.job.answer_stream``) from its first entry, so a client that connects late gets the text written
so far, then the rest:

- ``answer.delta`` ``{"seq", "text"}``: the next piece; the pieces since the last ``answer.reset`` joined are the
  text so far;
- ``answer.quick`` ``{"seq", "text"}``: the offline answer, sent whole as soon as the search ends when an LLM
  writes the answer; shown until the deltas and ``answer`` replace it (it is no delta: the deltas still join to the
  answer);
- ``answer.reset`` ``{"seq", "reason"}``: the text so far is void (the LLM failed part-way; the offline answer
  follows);
- ``answer`` ``{"seq", "text", "method", "fallback_reason", "source"}``: the validated answer, equal to the
  deltas since the last reset joined. ``source`` is ``stream``, or ``stored`` when the stream is gone (a job
  answered from the whole-job cache, one older than the stream's expiry, a Redis outage): the answer is then
  read from the job's row and given as one delta and ``answer``.

Usage (inside the route's event generator)::

    answer = AnswerEvents(AnswerStreamReader(connect_async_redis(url), job_id))
    async for event in answer.wait(0.2):      # deltas as they come, for up to 0.2 s
        yield event
    async for event in answer.close(status, lambda: stored_answer()):   # once the job has ended
        yield event
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import redis

from agentsearch.pipeline.job.answer_stream import AnswerStreamReader, StreamEntry

log = logging.getLogger("agentsearch.api")


def sse(event: str, data: dict) -> str:
    return f"event: {event}\ndata: {json.dumps(data, default=str)}\n\n"


class AnswerEvents:
    def __init__(self, reader: AnswerStreamReader) -> None:
        self.reader = reader
        self.finished = False  # the ``answer`` event was sent
        self.available = True  # the stream could be read
        self.text = ""  # the deltas since the last reset
        self.seq = 0

    def _event(self, entry: StreamEntry) -> str:
        self.seq = entry.seq + 1
        if entry.kind == "delta":
            self.text += entry.text
            return sse("answer.delta", {"seq": entry.seq, "text": entry.text})
        if entry.kind == "quick":
            return sse("answer.quick", {"seq": entry.seq, "text": entry.text})
        if entry.kind == "reset":
            self.text = ""
            return sse("answer.reset", {"seq": entry.seq, "reason": entry.data.get("reason")})
        self.finished = True
        return sse("answer", {"seq": entry.seq, "text": entry.text, "method": entry.data.get("method"),
                              "fallback_reason": entry.data.get("fallback_reason"), "source": "stream"})

    async def _read(self, block_s: float | None) -> list[str]:
        try:
            entries = await self.reader.read(block_s=block_s)
        except (redis.RedisError, OSError) as exc:
            # Only the preview is lost: the answer is read from the job's row when it ends.
            self.available = False
            log.warning("answer stream of %s unreadable: %s", self.reader.key, exc)
            return []
        return [self._event(entry) for entry in entries]

    async def wait(self, window_s: float) -> AsyncIterator[str]:
        """The answer's events that arrive within ``window_s`` (a sleep once the answer is complete)."""
        until = time.monotonic() + window_s
        while not self.finished and self.available:
            left = until - time.monotonic()
            if left <= 0.001:
                return
            for event in await self._read(left):
                yield event
        left = until - time.monotonic()
        if left > 0:
            await asyncio.sleep(left)

    async def close(self, status: str, stored: Callable[[], Awaitable[Any]]) -> AsyncIterator[str]:
        """What is left once the job has ended: the stream's rest, or the stored answer of a succeeded job."""
        if not self.finished and self.available:
            for event in await self._read(None):
                yield event
        if self.finished or status != "succeeded":
            return
        answer = await stored()
        if not isinstance(answer, dict) or not isinstance(answer.get("text"), str):
            return
        text = answer["text"]
        if self.text and not text.startswith(self.text):
            yield sse("answer.reset", {"seq": self.seq, "reason": "the stream ended before its answer"})
            self.seq, self.text = self.seq + 1, ""
        if rest := text[len(self.text):]:
            yield sse("answer.delta", {"seq": self.seq, "text": rest})
            self.seq += 1
        yield sse("answer", {"seq": self.seq, "text": text, "method": answer.get("method"),
                             "fallback_reason": answer.get("fallback_reason"), "source": "stored"})
        self.finished = True

    async def aclose(self) -> None:
        try:
            await self.reader.aclose()
        except Exception:  # noqa: BLE001 - closing a broken connection says nothing new
            pass
