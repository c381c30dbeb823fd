"""A local OpenAI-compatible chat-completions server for tests: a real HTTP server in a thread.

It speaks ``POST /v1/chat/completions`` (and ``GET /v1/models``), records every request, and answers from a queue
of scripted replies, so a test can check both what the project sends and how it handles what comes back.

A scripted reply is one of:

- a ``str``: the assistant message content of a normal ``200`` reply;
- ``FakeLLM.error(status, message="...", headers=None)`` (or just an ``int`` status): an HTTP error reply with an
  OpenAI-style error body (``429`` and ``5xx`` are what clients treat as transient);
- ``FakeLLM.delay(seconds, reply)``: wait, then give ``reply`` (for client timeouts; the wait ends early when the
  server stops, so a test never hangs on it);
- a callable ``f(body: dict) -> reply``: computed from the request body (e.g. echo the prompt);
- ``FakeLLM.streamed(pieces, interval_s=0.02, break_after=None)``: the content in these pieces.
- ``FakeLLM.translation({query: {language: text}})``: the reply to a translation prompt, looked up in the table.
- ``FakeLLM.entailment(judge)``: the reply to a citation check (``agentsearch.pipeline.job.answer.entailment``):
  ``judge(claim, source_text)`` gives ``(status, quote)`` for each (claim, cited source) pair the request lists.

A request with ``"stream": true`` is answered in the OpenAI ``chat.completions`` chunk format
(``data: {"choices": [{"delta": {"content": ...}}]}`` per piece, then ``data: [DONE]``): a ``str`` reply is sent
word by word ``stream_interval_s`` apart, a streamed reply piece by piece (``break_after=n`` drops the connection
after ``n`` pieces, a stream broken half-way). Without ``"stream"`` a streamed reply is sent whole.

When the queue is empty the server answers with ``default`` (any of the above; a ``str`` by default ``None``, which
means an HTTP 500 saying that nothing was scripted, so a test that under-scripts fails loudly).

Usage::

    with FakeLLM() as llm:
        llm.script('{"answer": "Paris [1]", "steps": []}', FakeLLM.error(500), "plain text")
        client = LLMClient(llm.base_url, model="fake-model")
        ...
        llm.requests[0]["messages"]      # the request bodies, in order
        llm.headers[0]["authorization"]  # and their headers (lower-cased names)

    with FakeLLM(stream_interval_s=0.02) as llm:   # streams replies word by word, 20 ms apart
        llm.script(FakeLLM.streamed(["Par", "is [1]"], interval_s=0.05))
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class ErrorReply:
    status: int
    message: str = "scripted error"
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class DelayedReply:
    seconds: float
    reply: Any = ""


@dataclass(frozen=True)
class StreamedReply:
    pieces: tuple[str, ...]
    interval_s: float = 0.02
    break_after: int | None = None


Reply = str | int | ErrorReply | DelayedReply | StreamedReply | Callable[[dict], Any]


class FakeLLM:
    def __init__(self, model: str = "fake-model", default: Reply | None = None, host: str = "127.0.0.1",
                 stream_interval_s: float = 0.0) -> None:
        self.model = model
        self.default = default
        self.stream_interval_s = stream_interval_s
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.paths: list[str] = []
        self._queue: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server = ThreadingHTTPServer((host, 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    # -- scripting ----------------------------------------------------------------------------------------
    @staticmethod
    def error(status: int, message: str = "scripted error", headers: dict[str, str] | None = None) -> ErrorReply:
        return ErrorReply(status, message, dict(headers or {}))

    @staticmethod
    def delay(seconds: float, reply: Reply = "") -> DelayedReply:
        return DelayedReply(seconds, reply)

    @staticmethod
    def streamed(pieces: list[str] | str, interval_s: float = 0.02, break_after: int | None = None) -> StreamedReply:
        if isinstance(pieces, str):
            pieces = word_pieces(pieces)
        return StreamedReply(tuple(pieces), interval_s, break_after)

    @staticmethod
    def entailment(judge: Callable[[str, str], tuple[str, str]]) -> Callable[[dict], str]:
        def reply(body: dict) -> str:
            user = body["messages"][-1]["content"]
            sources = dict(re.findall(r"^\[(\d+)\]\n(.*)$", user, re.MULTILINE))
            verdicts = []
            for number, cited, claim in re.findall(r"^(\d+)\. \(cites ([^)]*)\) (.*)$", user, re.MULTILINE):
                for n in re.findall(r"\d+", cited):
                    status, quote = judge(claim, sources.get(n, ""))
                    verdicts.append({"claim": int(number), "source": int(n), "status": status, "quote": quote})
            return json.dumps({"verdicts": verdicts})

        return reply

    @staticmethod
    def translation(table: dict[str, dict[str, str]]) -> Callable[[dict], str]:
        """The reply to the translator's prompt (``agentsearch.pipeline.agents.builtin.translator``):
        ``table[query][target]`` for the target language the system prompt names ("... into German (de)"); a query or
        target not in the table comes back unchanged, as a model does with text already in the target language."""

        def reply(body: dict) -> str:
            system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
            target = re.search(r"into [^(]*\(([a-z-]+)\)", system)
            code = target.group(1) if target else ""
            translated = table.get(user, {}).get(code)
            return json.dumps({"source_language": None if translated else code, "translation": translated or user})

        return reply

    def script(self, *replies: Reply) -> FakeLLM:
        with self._lock:
            self._queue.extend(replies)
        return self

    @property
    def pending(self) -> int:
        """Scripted replies not yet consumed."""
        with self._lock:
            return len(self._queue)

    # -- lifecycle ----------------------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> FakeLLM:
        if self._thread is None:
            self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                            daemon=True, name="fake-llm")
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> FakeLLM:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- serving ------------------------------------------------------------------------------------------
    def _next_reply(self, body: dict) -> Reply | None:
        with self._lock:
            reply = self._queue.popleft() if self._queue else self.default
        return reply

    def _completion(self, content: str, body: dict) -> dict:
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model") or self.model,
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        }

    def _handler_class(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # keep test output clean
                pass

            def _send(self, status: int, payload: dict, headers: dict[str, str] | None = None) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for name, value in (headers or {}).items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test): nothing to tell it

            def do_GET(self) -> None:
                if self.path.rstrip("/") == "/v1/models":
                    self._send(200, {"object": "list", "data": [{"id": fake.model, "object": "model"}]})
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    body = {"_raw": raw.decode(errors="replace")}
                with fake._lock:
                    fake.requests.append(body)
                    fake.headers.append({k.lower(): v for k, v in self.headers.items()})
                    fake.paths.append(self.path)
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                    return
                self._reply(fake._next_reply(body), body)

            def _reply(self, reply: Reply | None, body: dict) -> None:
                while True:
                    if callable(reply) and not isinstance(reply, (str, int, ErrorReply, DelayedReply, StreamedReply)):
                        reply = reply(body)
                        continue
                    if isinstance(reply, DelayedReply):
                        if fake._stopping.wait(reply.seconds):
                            return
                        reply = reply.reply
                        continue
                    break
                if reply is None:
                    self._send(500, {"error": {"message": "FakeLLM: no scripted reply left", "type": "server_error"}})
                elif isinstance(reply, int) and not isinstance(reply, bool):
                    self._error(ErrorReply(reply))
                elif isinstance(reply, ErrorReply):
                    self._error(reply)
                elif body.get("stream"):
                    if not isinstance(reply, StreamedReply):
                        reply = StreamedReply(tuple(word_pieces(str(reply))), fake.stream_interval_s)
                    self._stream(reply, body)
                elif isinstance(reply, StreamedReply):
                    self._send(200, fake._completion("".join(reply.pieces), body))
                else:
                    self._send(200, fake._completion(str(reply), body))

            def _stream(self, reply: StreamedReply, body: dict) -> None:
                ident, model = f"chatcmpl-{uuid.uuid4().hex[:12]}", body.get("model") or fake.model

                def event(data: str) -> None:
                    # One SSE event per HTTP chunk (chunked transfer, as real servers send it): a connection
                    # dropped before the last, empty chunk is a body cut short, which the client can tell.
                    raw = f"data: {data}\n\n".encode()
                    self.wfile.write(f"{len(raw):x}\r\n".encode() + raw + b"\r\n")
                    self.wfile.flush()

                def chunk(delta: dict, finish: str | None = None) -> str:
                    return json.dumps({"id": ident, "object": "chat.completion.chunk", "created": int(time.time()),
                                       "model": model,
                                       "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

                self.close_connection = True
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    event(chunk({"role": "assistant", "content": ""}))
                    for n, piece in enumerate(reply.pieces):
                        if reply.break_after is not None and n >= reply.break_after:
                            return  # dropped half-way: no finish chunk, no [DONE], no last chunk
                        if n and reply.interval_s and fake._stopping.wait(reply.interval_s):
                            return
                        event(chunk({"content": piece}))
                    event(chunk({}, "stop"))
                    event("[DONE]")
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def _error(self, error: ErrorReply) -> None:
                kind = "rate_limit_error" if error.status == 429 else (
                    "server_error" if error.status >= 500 else "invalid_request_error")
                self._send(error.status, {"error": {"message": error.message, "type": kind, "code": None}},
                           error.headers)

        return Handler


def word_pieces(text: str) -> list[str]:
    """``text`` cut before each space: the pieces join back to it exactly, about one token each."""
    return re.findall(r"\s*\S+|\s+$", text) or [text]
