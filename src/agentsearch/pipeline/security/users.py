"""Users and their API keys.

A key is ``as_`` + 43 URL-safe characters (256 random bits). Only its SHA-256 digest is stored, so a key can be
shown once, when it is issued, and never again; a lost key is revoked and replaced.

Usage::

    users = UserStore(db)
    user, key = users.create("alice")          # print ``key`` for its owner, once
    users.authenticate(key)                     # -> user id, or None for an unknown, revoked or expired key
    users.grant(key)                            # -> the key's user and limits (KeyGrant), expired or not
    users.issue_key("alice", "ci", KeyLimits.of(scopes=["search"], expires_in=timedelta(days=30)))
    users.revoke(key[:11])                      # by the prefix listings show
"""

from __future__ import annotations

import hashlib
import re
import secrets
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError

from agentsearch.pipeline.platform.db import Database, changed_rows, utcnow
from agentsearch.pipeline.platform.tables.collections import CollectionRow
from agentsearch.pipeline.platform.tables.users import ApiKeyRow, UserRow
from agentsearch.pipeline.security.access import Access
from agentsearch.pipeline.security.key_limits import KeyLimits

KEY_PREFIX = "as_"
# Enough of the key to tell keys apart in a listing; far too little to guess the rest.
SHOWN_CHARS = 11
USER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,99}$")


class UserError(ValueError):
    """A request about users that cannot be done, with a message for whoever asked."""


def digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def user_id_named(db: Database, name: str, refusal: Callable[[str], Exception]) -> uuid.UUID:
    """The id of the user called ``name``; ``refusal`` is the error raised (the caller's kind) when there is none."""
    with db.session() as s:
        user_id = s.scalar(select(UserRow.id).where(UserRow.name == name))
    if user_id is None:
        raise refusal(f"no user named {name!r}")
    return user_id


def new_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


@dataclass(frozen=True)
class KeyInfo:
    prefix: str
    label: str
    created_at: datetime
    revoked_at: datetime | None
    limits: KeyLimits = KeyLimits()

    @classmethod
    def of(cls, row: ApiKeyRow) -> KeyInfo:
        return cls(row.prefix, row.label, row.created_at, row.revoked_at, _limits(row))


@dataclass(frozen=True)
class KeyGrant:
    """A live key's user and what the key may do (checked on every request: ``agentsearch.api.auth``)."""

    user_id: uuid.UUID
    prefix: str
    label: str
    limits: KeyLimits


def _limits(row: ApiKeyRow) -> KeyLimits:
    return KeyLimits.from_row(row.scopes, row.collections, row.expires_at)


def _key_row(user_id: uuid.UUID, key: str, label: str, limits: KeyLimits) -> ApiKeyRow:
    return ApiKeyRow(user_id=user_id, prefix=key[:SHOWN_CHARS], digest=digest(key), label=label, **limits.columns())


@dataclass(frozen=True)
class UserInfo:
    id: uuid.UUID
    name: str
    created_at: datetime
    keys: list[KeyInfo]


class UserStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def name_of(self, user_id: uuid.UUID) -> str | None:
        with self.db.session() as s:
            return s.scalar(select(UserRow.name).where(UserRow.id == user_id))

    def create(self, name: str, label: str = "initial") -> tuple[uuid.UUID, str]:
        """A new user and its first key. Raises ``UserError`` for a malformed or taken name."""
        if not USER_NAME.match(name):
            raise UserError(
                f"invalid user name {name!r}: 1-100 characters, letters, digits and . _ @ -, "
                "starting with a letter or digit"
            )
        user_id = uuid.uuid4()
        key = new_key()
        try:
            with self.db.session() as s:
                s.add(UserRow(id=user_id, name=name))
                s.flush()
                s.add(ApiKeyRow(user_id=user_id, prefix=key[:SHOWN_CHARS], digest=digest(key), label=label))
        except IntegrityError:
            raise UserError(f"a user named {name!r} already exists") from None
        return user_id, key

    def user_id(self, name: str) -> uuid.UUID:
        return user_id_named(self.db, name, UserError)

    def issue_key(self, name: str, label: str = "", limits: KeyLimits = KeyLimits()) -> str:
        """Another key for an existing user (to rotate: issue, switch clients over, revoke the old one)."""
        return self.issue_key_for(self.user_id(name), label, limits)

    def issue_key_for(self, user_id: uuid.UUID, label: str, limits: KeyLimits = KeyLimits()) -> str:
        key = new_key()
        with self.db.session() as s:
            s.add(_key_row(user_id, key, label, limits))
        return key

    def collections_named(self, user_id: uuid.UUID, names: list[str]) -> list[uuid.UUID]:
        """The ids of the user's collections of these names (``TEAM/NAME``: a team's it is in); ``UserError`` naming
        the first it does not have, or that several of its teams have."""
        ids = []
        with self.db.session() as s:
            for name in names:
                found = s.scalars(Access(s, user_id).named_collections(name).with_only_columns(CollectionRow.id)).all()
                if not found:
                    raise UserError(f"the user has no collection named {name!r}")
                if len(found) > 1:
                    raise UserError(f"several of the user's teams have a collection named {name!r}; name it TEAM/NAME")
                ids.append(found[0])
        return ids

    def grant(self, key: str) -> KeyGrant | None:
        """The live (not revoked) key's user and limits; None for an unknown or revoked key. An expired key is
        returned, so its refusal can say it expired."""
        if not key.startswith(KEY_PREFIX):
            return None
        with self.db.session() as s:
            row = s.scalar(select(ApiKeyRow).where(ApiKeyRow.digest == digest(key), ApiKeyRow.revoked_at.is_(None)))
            return KeyGrant(row.user_id, row.prefix, row.label, _limits(row)) if row is not None else None

    def authenticate(self, key: str) -> uuid.UUID | None:
        grant = self.grant(key)
        return grant.user_id if grant is not None and not grant.limits.expired(utcnow()) else None

    def keys_of(self, user_id: uuid.UUID) -> list[KeyInfo]:
        """The user's keys, revoked ones included, oldest first (never the keys themselves)."""
        with self.db.session() as s:
            rows = s.scalars(select(ApiKeyRow).where(ApiKeyRow.user_id == user_id)
                             .order_by(ApiKeyRow.created_at, ApiKeyRow.prefix)).all()
            return [KeyInfo.of(row) for row in rows]

    def revoke_own(self, user_id: uuid.UUID, prefix: str) -> int:
        """Revoke the user's live keys of this prefix; another user's prefix revokes nothing (0)."""
        with self.db.session() as s:
            return changed_rows(s, update(ApiKeyRow).where(ApiKeyRow.user_id == user_id, ApiKeyRow.prefix == prefix,
                                                        ApiKeyRow.revoked_at.is_(None)).values(revoked_at=utcnow()))

    def revoke(self, prefix: str) -> int:
        """Revoke every live key starting with ``prefix`` (at least the shown part); returns how many."""
        if len(prefix) < SHOWN_CHARS:
            raise UserError(f"give at least the first {SHOWN_CHARS} characters of the key, as listings show them")
        with self.db.session() as s:
            return changed_rows(
                s,
                update(ApiKeyRow)
                .where(ApiKeyRow.prefix == prefix[:SHOWN_CHARS], ApiKeyRow.revoked_at.is_(None))
                .values(revoked_at=utcnow()),
            )

    def delete_key(self, key: str) -> None:
        """Forget a key entirely (the in-process server's session key, which nobody else ever saw)."""
        with self.db.session() as s:
            row = s.scalar(select(ApiKeyRow).where(ApiKeyRow.digest == digest(key)))
            if row is not None:
                s.delete(row)

    def list(self) -> list[UserInfo]:
        with self.db.session() as s:
            users = s.scalars(select(UserRow).order_by(UserRow.created_at)).all()
            keys = s.scalars(select(ApiKeyRow).order_by(ApiKeyRow.created_at)).all()
            by_user: dict[uuid.UUID, list[KeyInfo]] = {}
            for k in keys:
                by_user.setdefault(k.user_id, []).append(KeyInfo.of(k))
            return [UserInfo(u.id, u.name, u.created_at, by_user.get(u.id, [])) for u in users]
