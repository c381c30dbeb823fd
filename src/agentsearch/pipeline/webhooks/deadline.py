"""A wall-clock deadline for a whole HTTP request: connect, TLS, sending the body and reading the answer.

httpx's timeouts are per operation: a read times out only when no byte comes for that long, so a receiver that sends
its status line and then one header byte every few seconds keeps a request open for as long as it likes. This
network backend (httpcore's seam for sockets, under the egress guard's) gives every blocking socket operation
only the time left until the deadline: each connect, the TLS handshake (Python bounds the whole handshake by the
timeout it is given), each write, and each read. Once the deadline has passed the next operation fails at once
with httpcore's own timeout error, which httpx reports as its ``TimeoutException``.

Why here and not a watchdog thread that closes the connection at the deadline: closing a socket from another
thread does not wake a thread blocked reading it on Linux (only ``shutdown`` does), the close races the request's
own, and the request then ends with whatever error the broken socket gives rather than a timeout. Bounding each
operation needs no thread, and the request ends by itself, with a timeout, at the deadline.

Not bounded: name resolution (``getaddrinfo`` cannot be interrupted); it runs before the first connect and its
time counts against the deadline, so a slow lookup leaves the connection less time, or none.

Usage::

    backend = DeadlineBackend(time.monotonic() + 10)
    with guarded_client(policy, network_backend=backend, timeout=10) as client:
        client.post(url, content=body)        # httpx.TimeoutException 10 s after the deadline was set, at most
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Iterable
from typing import Any

import httpcore

# Sent in pieces this large, each with the time then left: one send of a large buffer could block past the deadline.
WRITE_CHUNK = 16 * 1024


class DeadlineBackend(httpcore.NetworkBackend):
    """httpcore's sync sockets, every operation bounded by ``deadline`` (a ``time.monotonic()`` value)."""

    def __init__(self, deadline: float, inner: httpcore.NetworkBackend | None = None) -> None:
        self.deadline = deadline
        self.inner = inner or httpcore.SyncBackend()

    def left(self, timeout: float | None, error: type[Exception]) -> float:
        """The time an operation may take: what is left until the deadline, less when ``timeout`` is shorter."""
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise error("the request's deadline has passed")
        return remaining if timeout is None else min(timeout, remaining)

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        stream = self.inner.connect_tcp(host, port, timeout=self.left(timeout, httpcore.ConnectTimeout),
                                        local_address=local_address, socket_options=socket_options)
        return DeadlineStream(stream, self)

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        stream = self.inner.connect_unix_socket(path, timeout=self.left(timeout, httpcore.ConnectTimeout),
                                                socket_options=socket_options)
        return DeadlineStream(stream, self)

    def sleep(self, seconds: float) -> None:
        self.inner.sleep(seconds)


class DeadlineStream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream, backend: DeadlineBackend) -> None:
        self.inner, self.backend = inner, backend

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self.inner.read(max_bytes, timeout=self.backend.left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        for start in range(0, len(buffer), WRITE_CHUNK):
            self.inner.write(buffer[start:start + WRITE_CHUNK],
                             timeout=self.backend.left(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self.inner.close()

    def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        stream = self.inner.start_tls(ssl_context, server_hostname=server_hostname,
                                      timeout=self.backend.left(timeout, httpcore.ConnectTimeout))
        return DeadlineStream(stream, self.backend)

    def get_extra_info(self, info: str) -> Any:
        return self.inner.get_extra_info(info)
