"""The answer as it is written: a delta channel from the answer step to whoever reads the job's events.

A job's answer is written to a Redis Stream of its own (``agentsearch:answer:<job id>``), one entry per piece:

- ``delta``: ``{"seq": n, "text": piece}``, in order, ``seq`` counting from 0;
- ``quick``: the offline answer, written whole before an LLM's first sentence (``{"seq": n, "text": ...}``): the
  first words a reader sees while a slow model writes; not a delta, so the deltas still join to the answer;
- ``reset``: the text written so far is void (the LLM failed part-way and the offline answer follows);
- ``answer``: the end marker, with the validated answer (citations checked on the whole text) and its method;
  the deltas since the last reset, joined, are its text (``finish`` sends what differs).

A reader starts from id ``0``, so one that connects late gets everything written so far first, then the rest as it
comes (``XREAD BLOCK``). The stream is bounded (``MAX_ENTRIES``, trimmed exactly: the oldest go first) and expires
``TTL_S`` after its last write. Without ``AGENTSEARCH_REDIS_URL`` the in-process Redis of
``agentsearch.pipeline.platform.kv`` carries it, which is enough when the worker threads and the API share the process
(embedded mode).

Tiny pieces are batched (``DeltaBatcher``): a delta is sent once it holds ``min_chars`` characters or its first piece
is ``max_wait_s`` old when the next one arrives, and at the end; a single large piece is sent whole. The offline
(extractive) answer is therefore one delta.

Usage::

    channel = AnswerChannel(connect_redis(settings.redis_url), job_id)
    channel.start()                     # a step that runs again starts from nothing
    channel.quick("Paris is the capital of France [2].")   # the offline answer, while the LLM writes
    channel.write("Paris is ")          # batched
    channel.write("the capital [1].")
    channel.finish("Paris is the capital [1].", method="llm")

    reader = AnswerStreamReader(connect_async_redis(settings.redis_url), job_id)
    entries = await reader.read(block_s=0.2)   # replayed from the start, then live; [] when nothing came
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, cast

import redis
from redis.typing import EncodableT, FieldT

log = logging.getLogger("agentsearch.answer_stream")
STREAM_PREFIX = "agentsearch:answer:"
# A few hundred deltas make an answer; the bound only stops a runaway reply from growing Redis without end.
MAX_ENTRIES = 5000
# Long enough for a client that reconnects after the job ended; the job's row keeps the answer for good. The worker
# passes AGENTSEARCH_RETENTION_ANSWER_STREAMS_S, whose default this is.
TTL_S = 3600
# The batching rule (see the module docstring): about one delta per few tokens at a model's usual pace.
MIN_DELTA_CHARS = 24
MAX_DELTA_WAIT_S = 0.05

EntryKind = Literal["quick", "delta", "reset", "answer"]


def stream_key(job_id: str) -> str:
    return f"{STREAM_PREFIX}{job_id}"


@dataclass(frozen=True)
class StreamEntry:
    """One entry of a job's answer stream, as a reader gets it. ``id`` is the Redis entry id (resume after it)."""

    id: str
    kind: EntryKind
    seq: int
    text: str
    data: dict[str, Any]


class DeltaBatcher:
    """Joins tiny pieces into deltas: flushes at ``min_chars`` or when the buffer's first piece is ``max_wait_s``
    old as the next arrives. ``clock`` is injectable for tests."""

    def __init__(self, send: Callable[[str], None], min_chars: int = MIN_DELTA_CHARS,
                 max_wait_s: float = MAX_DELTA_WAIT_S, clock: Callable[[], float] = time.monotonic) -> None:
        if min_chars < 1 or max_wait_s < 0:
            raise ValueError("min_chars must be >= 1 and max_wait_s >= 0")
        self._send = send
        self.min_chars = min_chars
        self.max_wait_s = max_wait_s
        self._clock = clock
        self._buffer: list[str] = []
        self._size = 0
        self._since = 0.0

    def add(self, piece: str) -> None:
        if not piece:
            return
        if not self._buffer:
            self._since = self._clock()
        self._buffer.append(piece)
        self._size += len(piece)
        if self._size >= self.min_chars or self._clock() - self._since >= self.max_wait_s:
            self.flush()

    def flush(self) -> None:
        if self._buffer:
            text = "".join(self._buffer)
            self._buffer, self._size = [], 0
            self._send(text)

    def drop(self) -> None:
        self._buffer, self._size = [], 0


class AnswerChannel:
    """The writing end, used by the answer step (synchronous Redis client)."""

    def __init__(self, client: redis.Redis, job_id: str, max_entries: int = MAX_ENTRIES, ttl_s: int = TTL_S,
                 min_chars: int = MIN_DELTA_CHARS, max_wait_s: float = MAX_DELTA_WAIT_S) -> None:
        self.client = client
        self.key = stream_key(job_id)
        self.max_entries = max_entries
        self.ttl_s = ttl_s
        self.seq = 0
        self.written = ""  # the text of the deltas since the last reset
        self.deltas_sent = 0
        self.broken = False
        self._fresh = False
        self._batcher = DeltaBatcher(self._send_delta, min_chars=min_chars, max_wait_s=max_wait_s)

    def _add(self, fields: dict[str, str]) -> None:
        if self.broken:
            return
        # One round trip: what an earlier run wrote dropped (the first time), the entry, the bound and the expiry.
        pipe = self.client.pipeline(transaction=False)
        if self._fresh:
            pipe.delete(self.key)
        # redis-py types the fields as a dict of its own key and value unions; a dict of str is one.
        pipe.xadd(self.key, cast(dict[FieldT, EncodableT], fields), maxlen=self.max_entries, approximate=False)
        pipe.expire(self.key, self.ttl_s)
        try:
            pipe.execute()
            self._fresh = False
        except redis.RedisError as exc:
            # The stream is a preview: without Redis the job still ends with its answer, and the events route
            # gives it from the job's row. The rest of this run writes nothing rather than half a stream.
            self.broken = True
            log.warning("answer stream %s not written: %s", self.key, exc)

    def _send_delta(self, text: str) -> None:
        self._add({"kind": "delta", "seq": str(self.seq), "text": text})
        self.seq += 1
        self.written += text
        self.deltas_sent += 1

    def start(self) -> None:
        """Forget what an earlier run of the step wrote: a reader then sees only this run's answer. Done with the
        first entry's write, which saves the answer step a round trip."""
        self._fresh = True
        self.seq, self.written = 0, ""
        self._batcher.drop()

    def write(self, piece: str) -> None:
        self._batcher.add(piece)

    def quick(self, text: str) -> None:
        """The quick answer (the offline one), sent at once: shown until the deltas and the answer replace it."""
        if text:
            self._add({"kind": "quick", "seq": str(self.seq), "text": text})
            self.seq += 1

    def reset(self, reason: str) -> None:
        """The text written so far is void; what follows replaces it."""
        self._batcher.drop()
        if self.written:
            self._add({"kind": "reset", "seq": str(self.seq), "text": "", "reason": reason[:500]})
            self.seq += 1
            self.written = ""

    def finish(self, text: str, method: str, fallback_reason: str | None = None) -> None:
        """The end marker, with the validated answer. The batcher's rest is sent first, and whatever the answer
        differs by (citations dropped on the whole text, spaces stripped): a reader can count on the deltas since
        the last reset, joined, being the answer's text."""
        self._batcher.flush()
        if text != self.written:
            if not text.startswith(self.written):
                self.reset("the answer was corrected once complete")
            if rest := text[len(self.written):]:
                self._send_delta(rest)
        fields = {"kind": "answer", "seq": str(self.seq), "text": text, "method": method}
        if fallback_reason:
            fields["fallback_reason"] = fallback_reason[:500]
        self._add(fields)
        self.seq += 1


def _decode(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def parse_entry(entry_id: Any, fields: dict) -> StreamEntry:
    data = {_decode(k): _decode(v) for k, v in fields.items()}
    return StreamEntry(id=_decode(entry_id), kind=data.pop("kind"), seq=int(data.pop("seq")),  # type: ignore[arg-type]
                       text=data.pop("text", ""), data=data)


class AnswerStreamReader:
    """The reading end (an asyncio Redis client): replays from the first entry, then waits for new ones."""

    def __init__(self, client: Any, job_id: str) -> None:
        self.client = client
        self.key = stream_key(job_id)
        self.last_id = "0"

    async def read(self, block_s: float | None = None, count: int = 500) -> list[StreamEntry]:
        """The entries after the last one read; waits up to ``block_s`` for one when there are none yet."""
        block = None if block_s is None else max(1, int(block_s * 1000))
        reply = await self.client.xread({self.key: self.last_id}, count=count, block=block)
        entries = [parse_entry(entry_id, fields) for _, items in (reply or []) for entry_id, fields in items]
        if entries:
            self.last_id = entries[-1].id
        return entries

    async def aclose(self) -> None:
        await self.client.aclose()
