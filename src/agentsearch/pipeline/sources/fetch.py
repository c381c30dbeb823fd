"""Every HTTP read of a source: through the egress guard, held to a size, a time and a number of redirects.

The client connects only to addresses the guard passed (``agentsearch.pipeline.security.transports``), so a source
pointed at an internal address, or a redirect to one, is refused as a webhook's or a tool's call is. A body is read
as a stream and cut at ``max_bytes`` (never held whole past it), and a response that trickles is cut at ``timeout_s``
from its first byte asked for, not per read. Redirects are followed here, each hop checked again, a loop named.

Usage::

    with Fetcher(settings.egress_policy(), max_bytes=20_000_000, timeout_s=20) as fetcher:
        page = fetcher.get("https://example.org/docs/", etag='"abc"')   # Fetched(status=304) when unchanged
        page.data, page.url, page.etag, page.last_modified
        fetcher.get("http://127.0.0.1/")             # FetchFailed: egress refused: 127.0.0.1 is a loopback address
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

import httpx

from agentsearch.pipeline.platform.egress import EgressPolicy
from agentsearch.pipeline.security.transports import egress_refusal, guarded_client

USER_AGENT = "agentsearch-sources/1"
REDIRECTS = (301, 302, 303, 307, 308)


class FetchFailed(Exception):
    """A read that did not give its content: the reason, and the HTTP status when the server answered."""

    def __init__(self, reason: str, status: int | None = None) -> None:
        super().__init__(reason)
        self.status = status


@dataclass(frozen=True)
class Fetched:
    url: str  # after redirects
    status: int  # 200, or 304 when unchanged since the version given
    data: bytes
    content_type: str
    etag: str | None
    last_modified: str | None


class Fetcher:
    """A guarded client with the limits of one source's run; ``auth``: (username, password) for HTTP basic auth."""

    def __init__(self, policy: EgressPolicy, max_bytes: int, timeout_s: float, max_redirects: int = 5,
                 auth: tuple[str, str] | None = None) -> None:
        self.policy, self.max_bytes, self.timeout_s, self.max_redirects = policy, max_bytes, timeout_s, max_redirects
        self.client = guarded_client(policy, timeout=timeout_s, follow_redirects=False, auth=auth,
                                     headers={"User-Agent": USER_AGENT})
        self.requests = 0
        self._location = ""

    def __enter__(self) -> Fetcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.client.close()

    def get(self, url: str, etag: str | None = None, last_modified: str | None = None) -> Fetched:
        headers = {}
        if etag:
            headers["If-None-Match"] = etag
        if last_modified:
            headers["If-Modified-Since"] = last_modified
        return self.send("GET", url, headers)

    def send(self, method: str, url: str, headers: dict[str, str], content: bytes | None = None) -> Fetched:
        """Any request (``PROPFIND`` with its body), held to the same limits and redirects as ``get``."""
        seen = [url]
        while True:
            fetched = self._once(url, headers, method, content)
            if fetched is not None:
                return fetched
            location = self._location
            if location in seen:
                raise FetchFailed(f"redirect loop: {location} again after {len(seen) - 1} redirect(s)")
            if len(seen) > self.max_redirects:
                raise FetchFailed(f"more than {self.max_redirects} redirects from {seen[0]}")
            seen.append(location)
            if _origin(location) != _origin(url):
                # A credential given for one server is not sent to another a redirect names (as browsers do).
                headers = {k: v for k, v in headers.items() if k.lower() != "authorization"}
            url = location

    def _once(self, url: str, headers: dict[str, str], method: str = "GET", content: bytes | None = None
              ) -> Fetched | None:
        """The response, or None after a redirect (its target in ``_location``)."""
        if not url.startswith(("http://", "https://")):
            raise FetchFailed(f"{url}: only http:// and https:// URLs are read")
        started = time.monotonic()
        self.requests += 1
        try:
            with self.client.stream(method, url, headers=headers, content=content) as response:
                if response.status_code == 304:
                    return Fetched(url, 304, b"", "", headers.get("If-None-Match"),
                                   headers.get("If-Modified-Since"))
                if response.status_code in REDIRECTS and "location" in response.headers:
                    self._location = urljoin(url, response.headers["location"])
                    return None
                if response.status_code >= 400:
                    raise FetchFailed(f"{url}: HTTP {response.status_code} {response.reason_phrase}".rstrip(),
                                      response.status_code)
                declared = int(response.headers.get("content-length") or 0)
                if declared > self.max_bytes:
                    raise FetchFailed(f"{url}: {declared} bytes, over the limit of {self.max_bytes}")
                data = bytearray()
                for chunk in response.iter_bytes():
                    data.extend(chunk)
                    if len(data) > self.max_bytes:
                        raise FetchFailed(f"{url}: over the limit of {self.max_bytes} bytes")
                    if time.monotonic() - started > self.timeout_s:
                        raise FetchFailed(f"{url}: not read within {self.timeout_s:g} s")
                return Fetched(url, response.status_code, bytes(data), response.headers.get("content-type", ""),
                               response.headers.get("etag"), response.headers.get("last-modified"))
        except httpx.HTTPError as exc:
            refused = egress_refusal(exc)
            raise FetchFailed(str(refused) if refused is not None else f"{url}: {type(exc).__name__}: {exc}") from exc


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    return parts.scheme, parts.hostname or "", parts.port
