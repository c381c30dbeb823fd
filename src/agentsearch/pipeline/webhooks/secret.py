"""Signing secrets in the Standard Webhooks form: ``whsec_`` and the base64 of 32 random bytes.

The receiver keys its HMAC with the decoded bytes, as ``standardwebhooks.Webhook`` does.

Usage::

    secret = new_secret()          # "whsec_pX1...=" shown once to the user, kept to sign every delivery
"""

from __future__ import annotations

import base64
import secrets

PREFIX = "whsec_"
SECRET_BYTES = 32


def new_secret() -> str:
    return PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode("ascii")
