"""A source's credentials: write-only, encrypted at rest with the operator's Fernet key, rotated without reading the
source again.

A kind's config model marks its credentials as ``SecretStr`` fields (``password``, ``secret_key``, ``token``). They
are kept apart from the config as one Fernet token of their JSON, shown as ``"set"`` and never returned. The key is
``AGENTSEARCH_SOURCES_KEY``; ``AGENTSEARCH_SOURCES_PREVIOUS_KEYS`` are keys still read (MultiFernet), until
``rotate`` encrypted every source's credentials with the current key.

Usage::

    box = CredentialBox.of(settings)              # None without a key
    token = box.seal({"password": "s3cret"})      # stored in sources.credentials after the names: "password|<token>"
    box.open(token)                               # {"password": "s3cret"}
    rotate(db, box)                               # every source's token encrypted again with the current key
"""

from __future__ import annotations

import json
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from sqlalchemy import select

from agentsearch.pipeline.platform.db import Database
from agentsearch.pipeline.platform.settings import Settings
from agentsearch.pipeline.platform.tables.sources import SourceRow
from agentsearch.pipeline.refusal import Refusal

NO_KEY = ("the operator has set no AGENTSEARCH_SOURCES_KEY: a source with credentials cannot be kept "
          "(a Fernet key, see docs/sources.md)")


class CredentialBox:
    """Encrypts with the first key, decrypts with any of them."""

    def __init__(self, keys: list[str]) -> None:
        try:
            self.fernet = MultiFernet([Fernet(k.encode()) for k in keys])
        except (ValueError, TypeError) as exc:
            raise ValueError(f"a sources key is not a Fernet key (32 url-safe base64 bytes): {exc}") from None

    @classmethod
    def of(cls, settings: Settings) -> CredentialBox | None:
        if settings.sources_key is None:
            return None
        keys = [settings.sources_key, *settings.sources_previous_keys]
        return cls([k.get_secret_value() for k in keys])

    def seal(self, secrets: dict[str, Any]) -> str:
        return self.fernet.encrypt(json.dumps(secrets).encode()).decode()

    def open(self, token: str) -> dict[str, Any]:
        try:
            return json.loads(self.fernet.decrypt(token.encode()))
        except InvalidToken:
            raise ValueError("the source's credentials were encrypted with a key no longer configured") from None

    def rotated(self, token: str) -> str:
        return self.fernet.rotate(token.encode()).decode()


def box_or_refuse(settings: Settings) -> CredentialBox:
    box = CredentialBox.of(settings)
    if box is None:
        raise Refusal(409, NO_KEY)
    return box


def rotate(db: Database, box: CredentialBox) -> int:
    """Every source's credentials encrypted again with the current key (each row locked while it changes): how many."""
    done = 0
    with db.session() as s:
        for row in s.scalars(select(SourceRow).where(SourceRow.credentials.is_not(None)).with_for_update()):
            names, _, token = (row.credentials or "").partition("|")
            row.credentials = f"{names}|{box.rotated(token)}"
            done += 1
    return done
