"""The console's sessions: a user signed in through single sign-on, held server-side in the database.

A session is a random token (256 bits) in an ``HttpOnly`` cookie; only its SHA-256 digest is stored, as for API
keys, so a copy of the table opens no session. It is read on every request (one indexed read, like a key), so
signing out ends it at once in every API process, and it ends by itself at ``expires_at``. Its CSRF token is derived
from the session token (an HMAC), so it is bound to the session and needs no column: a page of another origin can
make the browser send the cookie, never read the token.

Usage::

    sessions = SessionStore(db)
    token = sessions.open(user_id, ttl_s=28800)      # the cookie's value, shown once
    sessions.user_of(token)                         # -> the user id, or None (unknown, ended or expired)
    sessions.csrf_token(token)                      # what a state-changing request must carry in X-CSRF-Token
    sessions.end(token)                             # sign-out: the cookie opens nothing any more
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import uuid
from datetime import timedelta

from sqlalchemy import delete, select

from agentsearch.pipeline.platform.db import Database, changed_rows, utcnow
from agentsearch.pipeline.platform.tables.users import ConsoleSessionRow
from agentsearch.pipeline.security.users import digest


def csrf_matches(token: str, sent: str | None) -> bool:
    """Whether ``sent`` (the ``X-CSRF-Token`` header) is the session's CSRF token, compared in constant time."""
    if not sent:
        return False
    return hmac.compare_digest(SessionStore.csrf_token(token), sent)


class SessionStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def open(self, user_id: uuid.UUID, ttl_s: float) -> str:
        token = secrets.token_urlsafe(32)
        now = utcnow()
        with self.db.session() as s:
            # Sessions past their end are dropped as new ones open: the table holds only live ones and a few.
            s.execute(delete(ConsoleSessionRow).where(ConsoleSessionRow.expires_at < now))
            s.add(ConsoleSessionRow(digest=digest(token), user_id=user_id, created_at=now,
                                 expires_at=now + timedelta(seconds=ttl_s)))
        return token

    def user_of(self, token: str) -> uuid.UUID | None:
        with self.db.session() as s:
            return s.scalar(select(ConsoleSessionRow.user_id).where(ConsoleSessionRow.digest == digest(token),
                                                                 ConsoleSessionRow.expires_at > utcnow()))

    def end(self, token: str) -> bool:
        with self.db.session() as s:
            return bool(changed_rows(s, delete(ConsoleSessionRow).where(ConsoleSessionRow.digest == digest(token))))

    @staticmethod
    def csrf_token(token: str) -> str:
        return hmac.new(token.encode(), b"agentsearch csrf", hashlib.sha256).hexdigest()
