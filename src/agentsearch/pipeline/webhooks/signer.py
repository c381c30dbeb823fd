"""The headers that let a receiver check a delivery came from this service and was not changed on the way.

Standard Webhooks: ``webhook-signature`` is ``v1,<base64 HMAC-SHA256>`` over ``"{webhook-id}.{webhook-timestamp}.
{body}"``, keyed by the secret's decoded bytes; the timestamp is whole seconds since the epoch. The signing itself
is the ``standardwebhooks`` package's, the same code a receiver verifies with.

Usage::

    headers = signed_headers(secret, "msg_2b7...", body, utcnow())
    verify(secret, body, headers)      # the payload; WebhookVerificationError when the signature does not match
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from standardwebhooks import Webhook, WebhookVerificationError

__all__ = ["WebhookVerificationError", "signed_headers", "verify"]


def signed_headers(secret: str, message_id: str, body: str, at: datetime) -> dict[str, str]:
    """``webhook-id``, ``webhook-timestamp`` and ``webhook-signature`` for sending ``body`` at ``at``."""
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(math.floor(at.timestamp())),
        "webhook-signature": Webhook(secret).sign(message_id, at, body),
    }


def verify(secret: str, body: str | bytes, headers: dict[str, str]) -> Any:
    """What a receiver does: the parsed body when the signature matches and the timestamp is within 5 minutes."""
    return Webhook(secret).verify(body, headers)
