"""One HTTP attempt of a delivery, through the egress guard, as every call made on a user's behalf.

The connection is checked when it is made, after DNS (``agentsearch.pipeline.security.transports.guarded_client``): a
URL whose name now resolves to an internal address is refused although it passed when it was registered. Redirects are
not followed: a receiver answers the POST itself, and a 3xx counts as a failed attempt like any status outside 2xx
(a redirect is also how a public URL would point a delivery inward). Only the status is read, never the body: a
receiver's answer means nothing here beyond success or failure.

``timeout_s`` bounds the whole attempt, from the connection to the status line and headers, not each read
(``agentsearch.pipeline.webhooks.deadline``): a receiver that trickles its answer a byte at a time is cut off at the
deadline like one that never answers, so one attempt never holds a worker, or its delivery's lease, longer than that.

Usage::

    sender = WebhookSender(settings.egress_policy(), timeout_s=10)
    result = sender.send(url, secret, "msg_2b7...", body)
    result.ok, result.status_code, result.error, result.duration_ms, result.outcome
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import httpx

from agentsearch.pipeline.platform.db import utcnow
from agentsearch.pipeline.platform.egress import EgressPolicy, Resolver
from agentsearch.pipeline.security.transports import egress_refusal, guarded_client
from agentsearch.pipeline.webhooks.deadline import DeadlineBackend
from agentsearch.pipeline.webhooks.signer import signed_headers

USER_AGENT = "agentsearch-webhooks/1"


@dataclass(frozen=True)
class SendResult:
    """What one attempt came to. ``outcome``: delivered, http_error, timeout, refused (egress), network_error, or
    error (the attempt could not be made at all: ``agentsearch.pipeline.webhooks.courier`` records whatever the send
    raised)."""

    outcome: str
    duration_ms: float
    status_code: int | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.outcome == "delivered"


class WebhookSender:
    def __init__(self, policy: EgressPolicy | None = None, timeout_s: float = 10.0,
                 resolver: Resolver | None = None) -> None:
        self.policy, self.timeout_s, self.resolver = policy, timeout_s, resolver

    def send(self, url: str, secret: str, message_id: str, body: str) -> SendResult:
        """POST ``body`` to ``url``, signed now; never raises for what the network or the receiver did."""
        headers = {**signed_headers(secret, message_id, body, utcnow()), "content-type": "application/json",
                   "user-agent": USER_AGENT}
        started = time.perf_counter()
        deadline = DeadlineBackend(time.monotonic() + self.timeout_s)

        def took() -> float:
            return round((time.perf_counter() - started) * 1000, 3)

        try:
            with (
                guarded_client(self.policy, self.resolver, network_backend=deadline, timeout=self.timeout_s,
                               follow_redirects=False) as client,
                client.stream("POST", url, content=body.encode("utf-8"), headers=headers) as response,
            ):
                code = response.status_code
        except httpx.TimeoutException as exc:
            return SendResult("timeout", took(), error=f"no answer within {self.timeout_s:g} s ({type(exc).__name__})")
        except httpx.HTTPError as exc:
            refused = egress_refusal(exc)
            if refused is not None:
                return SendResult("refused", took(), error=str(refused))
            return SendResult("network_error", took(), error=f"{type(exc).__name__}: {exc}"[:1000])
        if 200 <= code < 300:
            return SendResult("delivered", took(), status_code=code)
        return SendResult("http_error", took(), status_code=code, error=f"the receiver answered HTTP {code}")
