"""A webhook URL, checked when it is registered or changed: what a user may make the service post to.

Only ``http`` and ``https``, with a host, no longer than ``MAX_URL_CHARS``, with no control character (a tab, CR,
LF: ``urlsplit`` quietly drops them, so the URL looks fine here, but the HTTP client refuses it at every delivery,
and it is a header-injection shape besides), and one the HTTP client itself parses as every delivery will. The
host goes through the egress guard (``agentsearch.pipeline.platform.egress``) as a delivery's connection will: a literal
loopback, private, link-local or metadata address, or a name that resolves to one, is refused unless the operator
allowed it (``AGENTSEARCH_EGRESS_ALLOW``); so is a name that does not resolve at all. This check is for the user's
benefit (a clear 422 at once instead of a
delivery log of refusals): what protects the service is the guard again at every delivery's connect, since a name
can resolve elsewhere later.

Usage::

    checked_url("https://hooks.example.org/agentsearch", policy)    # the URL as stored
    checked_url("http://169.254.169.254/", policy)                 # raises TargetRefused("... cloud metadata ...")
    checked_url("https://hooks.example.org/a\tb", policy)          # raises TargetRefused("... control character ...")
"""

from __future__ import annotations

from urllib.parse import urlsplit

import httpx

from agentsearch.pipeline.platform.egress import EgressGuard, EgressPolicy, EgressRefused, Resolver

MAX_URL_CHARS = 2048
SCHEMES = ("http", "https")


class TargetRefused(ValueError):
    """Why a URL cannot be a webhook's; the message is meant for the user."""


def checked_url(url: str, policy: EgressPolicy | None = None, resolver: Resolver | None = None) -> str:
    url = url.strip()
    if len(url) > MAX_URL_CHARS:
        raise TargetRefused(f"url is {len(url)} characters; the limit is {MAX_URL_CHARS}")
    control = next((i for i, c in enumerate(url) if ord(c) < 0x20 or ord(c) == 0x7F), None)
    if control is not None:
        raise TargetRefused(f"url must not contain a control character (tab, CR, LF ...): {url[control]!r} at "
                            f"position {control}")
    try:
        parts = urlsplit(url)
        port = parts.port
        httpx.URL(url)
    except (ValueError, httpx.InvalidURL) as exc:
        raise TargetRefused(f"url is not a valid URL: {exc}") from None
    if parts.scheme.lower() not in SCHEMES:
        raise TargetRefused("url must start with http:// or https://")
    host = parts.hostname
    if not host:
        raise TargetRefused("url has no host")
    if parts.fragment:
        raise TargetRefused("url must not have a #fragment (it is never sent)")
    try:
        EgressGuard(policy, resolver).addresses(host, port or (443 if parts.scheme.lower() == "https" else 80))
    except EgressRefused as exc:
        raise TargetRefused(str(exc)) from None
    except (OSError, UnicodeError, ValueError) as exc:
        raise TargetRefused(f"the host {host} does not resolve: {exc}") from None
    return url
