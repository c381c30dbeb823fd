"""A local OpenAI-compatible chat-completions server for tests: a real HTTP server in a thread.

It speaks ``POST /v1/chat/completions`` (and ``GET /v1/models``), records every request, and answers from a queue
of scripted replies, so a test can check both what the project sends and how it handles what comes back.

A scripted reply is one of:

- a ``str``: the assistant message content of a normal ``200`` reply;
- ``FakeLLM.error(status, message="...", headers=None)`` (or just an ``int`` status): an HTTP error reply with an
  OpenAI-style error body (``429`` and ``5xx`` are what clients treat as transient);
- ``FakeLLM.delay(seconds, reply)``: wait, then give ``reply`` (for client timeouts; the wait ends early when the
  server stops, so a test never hangs on it);
- a callable ``f(body: dict) -> reply``: computed from the request body (e.g. echo the prompt).

When the queue is empty the server answers with ``default`` (any of the above; a ``str`` by default ``None``, which
means an HTTP 500 saying that nothing was scripted, so a test that under-scripts fails loudly).

Usage::

    with FakeLLM() as llm:
        llm.script('{"answer": "Paris [1]", "steps": []}', FakeLLM.error(500), "plain text")
        client = LLMClient(llm.base_url, model="fake-model")
        ...
        llm.requests[0]["messages"]      # the request bodies, in order
        llm.headers[0]["authorization"]  # and their headers (lower-cased names)
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Union


@dataclass(frozen=True)
class ErrorReply:
    status: int
    message: str = "scripted error"
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class DelayedReply:
    seconds: float
    reply: Any = ""


Reply = Union[str, int, ErrorReply, DelayedReply, Callable[[dict], Any]]


class FakeLLM:
    def __init__(self, model: str = "fake-model", default: Reply | None = None, host: str = "127.0.0.1") -> None:
        self.model = model
        self.default = default
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

    def script(self, *replies: Reply) -> "FakeLLM":
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

    def start(self) -> "FakeLLM":
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

    def __enter__(self) -> "FakeLLM":
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

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                if self.path.rstrip("/") == "/v1/models":
                    self._send(200, {"object": "list", "data": [{"id": fake.model, "object": "model"}]})
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

            def do_POST(self) -> None:  # noqa: N802
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
                    if callable(reply) and not isinstance(reply, (str, int, ErrorReply, DelayedReply)):
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
                else:
                    self._send(200, fake._completion(str(reply), body))

            def _error(self, error: ErrorReply) -> None:
                kind = "rate_limit_error" if error.status == 429 else (
                    "server_error" if error.status >= 500 else "invalid_request_error")
                self._send(error.status, {"error": {"message": error.message, "type": kind, "code": None}},
                           error.headers)

        return Handler
