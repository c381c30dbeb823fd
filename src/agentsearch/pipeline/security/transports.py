"""HTTP clients that apply the egress guard when they connect, not before.

Each client has its own network backend (httpcore's seam for opening sockets): asked to connect to ``host:port``,
it resolves the host, checks every address with ``EgressGuard`` and connects to a checked address, so what is
checked is what is connected to. Every new connection is checked (a redirect, a second request to a name that
now resolves elsewhere). TLS still verifies the certificate against the host name, which httpcore passes to the
TLS layer apart from the address. Proxies from the environment are not used: a proxy would be the address
checked, not the host behind it.

- ``guarded_client``: a sync ``httpx.Client`` (the external enricher);
- ``guarded_async_client``: an ``httpx2.AsyncClient``, the client the ``mcp`` SDK's transports take
  (``streamable_http_client(url, http_client=...)``).

A refused connection raises the client's ``ConnectError`` whose message starts with "egress refused" and whose
cause is the ``EgressRefused``; ``egress_refusal(exc)`` finds it, in exception groups too.

Usage::

    with guarded_client(EgressPolicy(), timeout=3.0, headers={"X-Api-Key": "..."}) as client:
        client.get("https://api.example.org/companies/42")      # checked at connect
        client.get("http://169.254.169.254/latest/meta-data/")  # httpx.ConnectError: egress refused: ...

    async with guarded_async_client(policy) as http:
        async with streamable_http_client("https://tools.example.org/mcp", http_client=http) as streams: ...
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import anyio
import httpcore
import httpcore2
import httpx
import httpx2

from agentsearch.pipeline.platform.egress import EgressGuard, EgressPolicy, EgressRefused, Resolver


class _SyncRefused(EgressRefused, httpcore.ConnectError):
    """Raised inside httpcore, so httpx reports it as its own ConnectError (cause: this)."""


class _AsyncRefused(EgressRefused, httpcore2.ConnectError):
    pass


class GuardedBackend(httpcore.NetworkBackend):
    """httpcore's sync socket backend, behind the guard."""

    def __init__(self, guard: EgressGuard, inner: httpcore.NetworkBackend | None = None) -> None:
        self.guard = guard
        self.inner = inner or httpcore.SyncBackend()

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        try:
            addresses = self.guard.addresses(host, port)
        except EgressRefused as exc:
            raise _SyncRefused(exc.host, exc.address, exc.reason, exc.literal) from exc.__cause__
        except (OSError, UnicodeError, ValueError) as exc:  # the name does not resolve
            raise httpcore.ConnectError(str(exc)) from exc
        failure: Exception | None = None
        for address in addresses:
            try:
                return self.inner.connect_tcp(address, port, timeout=timeout, local_address=local_address,
                                              socket_options=socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        assert failure is not None
        raise failure

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        raise _SyncRefused(path, None, "unix sockets are never connected to on a user's behalf")

    def sleep(self, seconds: float) -> None:
        self.inner.sleep(seconds)


class GuardedAsyncBackend(httpcore2.AsyncNetworkBackend):
    """httpcore2's async socket backend (anyio), behind the guard; resolving runs in a worker thread."""

    def __init__(self, guard: EgressGuard, inner: httpcore2.AsyncNetworkBackend | None = None) -> None:
        self.guard = guard
        self.inner = inner or httpcore2.AnyIOBackend()

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                          local_address: str | None = None,
                          socket_options: Iterable[Any] | None = None) -> httpcore2.AsyncNetworkStream:
        try:
            addresses = await anyio.to_thread.run_sync(self.guard.addresses, host, port)
        except EgressRefused as exc:
            raise _AsyncRefused(exc.host, exc.address, exc.reason, exc.literal) from exc.__cause__
        except (OSError, UnicodeError, ValueError) as exc:  # the name does not resolve
            raise httpcore2.ConnectError(str(exc)) from exc
        failure: Exception | None = None
        for address in addresses:
            try:
                return await self.inner.connect_tcp(address, port, timeout=timeout, local_address=local_address,
                                                    socket_options=socket_options)
            except (httpcore2.ConnectError, httpcore2.ConnectTimeout) as exc:
                failure = exc
        assert failure is not None
        raise failure

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Iterable[Any] | None = None) -> httpcore2.AsyncNetworkStream:
        raise _AsyncRefused(path, None, "unix sockets are never connected to on a user's behalf")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


class _GuardedTransport(httpx.HTTPTransport):
    def __init__(self, guard: EgressGuard, inner: httpcore.NetworkBackend | None = None) -> None:
        super().__init__(trust_env=False)
        # httpx builds its connection pool without a backend argument; the same pool, with the guarded backend.
        # (httpx 0.28 keeps it as ``_pool``; handle_request maps httpcore's errors to httpx's around it.)
        self._pool = httpcore.ConnectionPool(ssl_context=httpx.create_ssl_context(trust_env=False),
                                             network_backend=GuardedBackend(guard, inner))


class _GuardedAsyncTransport(httpx2.AsyncHTTPTransport):
    def __init__(self, guard: EgressGuard) -> None:
        super().__init__(trust_env=False)
        self._pool = httpcore2.AsyncConnectionPool(ssl_context=httpx2.create_ssl_context(trust_env=False),
                                                   network_backend=GuardedAsyncBackend(guard))


def guarded_client(policy: EgressPolicy | None = None, resolver: Resolver | None = None,
                   network_backend: httpcore.NetworkBackend | None = None, **client_options: Any) -> httpx.Client:
    """An ``httpx.Client`` (``client_options``: timeout, headers, follow_redirects, ...) behind the guard;
    ``network_backend``: what the guard connects through once an address passed (httpcore's sockets by default)."""
    transport = _GuardedTransport(EgressGuard(policy, resolver), network_backend)
    return httpx.Client(transport=transport, trust_env=False, **client_options)


def guarded_async_client(policy: EgressPolicy | None = None, resolver: Resolver | None = None,
                         **client_options: Any) -> httpx2.AsyncClient:
    """An ``httpx2.AsyncClient`` behind the guard; defaults to the MCP transports' timeouts."""
    client_options.setdefault("timeout", httpx2.Timeout(30.0, read=300.0))
    transport = _GuardedAsyncTransport(EgressGuard(policy, resolver))
    return httpx2.AsyncClient(transport=transport, trust_env=False, **client_options)


def egress_refusal(exc: BaseException | None) -> EgressRefused | None:
    """The ``EgressRefused`` behind an HTTP client's error (its cause chain, exception groups), or None."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        current = todo.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, EgressRefused):
            return current
        if isinstance(current, BaseExceptionGroup):
            todo.extend(current.exceptions)
        todo.extend([current.__cause__, current.__context__])
    return None
