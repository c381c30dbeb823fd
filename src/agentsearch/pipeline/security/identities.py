"""Users who sign in at an OpenID provider: found by the provider's issuer and subject, made on first sign-in.

The subject (``sub``) is the provider's stable id of a person; a name or an e-mail address may change or be given
to someone else, so it is never what a sign-in is matched by. The user's name comes from a claim
(``preferred_username``, else ``email``, else the subject) made to fit agentsearch's user names, with a suffix when
another user holds it already. The groups the provider's groups claim lists are stored with each sign-in, for
mapping to team groups of the same name (``agentsearch.pipeline.security.document_access``).

Usage::

    identities = IdentityStore(db)
    user_id = identities.sign_in(issuer, claims, groups_claim="groups")   # the user, made on first sign-in
    identities.groups_of(user_id)                                         # ["staff", ...] from the last sign-in
"""

from __future__ import annotations

import re
import secrets
import uuid
from collections.abc import Mapping
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from agentsearch.pipeline.platform.db import Database, utcnow
from agentsearch.pipeline.platform.tables.users import UserIdentityRow, UserRow
from agentsearch.pipeline.security.users import USER_NAME

NAME_CLAIMS = ("preferred_username", "email", "sub")
_NOT_IN_NAMES = re.compile(r"[^A-Za-z0-9._@-]+")


def user_name(claims: Mapping[str, Any]) -> str:
    """A user name made of the first name claim present, fitted to ``USER_NAME``."""
    for claim in NAME_CLAIMS:
        name = _NOT_IN_NAMES.sub("-", str(claims.get(claim) or "")).strip("-._@")[:90]
        if name and USER_NAME.match(name):
            return name
    return "sso-user"


def groups_in(claims: Mapping[str, Any], claim: str | None) -> list[str] | None:
    """The groups the claim lists (a list of strings, or one string), None when the claim is not configured."""
    if not claim:
        return None
    value = claims.get(claim)
    values = [value] if isinstance(value, str) else value if isinstance(value, list) else []
    return sorted({str(group) for group in values if isinstance(group, str | int)})


class IdentityStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def sign_in(self, issuer: str, claims: Mapping[str, Any], groups_claim: str | None = None) -> uuid.UUID:
        """The user this identity signs in as, made (with its name) on the identity's first sign-in."""
        subject, groups, now = str(claims["sub"]), groups_in(claims, groups_claim), utcnow()
        with self.db.session() as s:
            row = s.get(UserIdentityRow, (issuer, subject))
            if row is not None:
                row.groups, row.signed_in_at = groups, now
                return row.user_id
        base = user_name(claims)
        for attempt in range(5):
            # A name another user holds gets a short random suffix; two first sign-ins of one identity at once
            # meet on the identity's primary key, and the second finds the first's user.
            name = base if attempt == 0 else f"{base[:90]}-{secrets.token_hex(3)}"
            try:
                with self.db.session() as s:
                    user_id = uuid.uuid4()
                    s.add(UserRow(id=user_id, name=name))
                    s.flush()
                    s.add(UserIdentityRow(issuer=issuer, subject=subject, user_id=user_id, groups=groups,
                                       created_at=now, signed_in_at=now))
                return user_id
            except IntegrityError:
                with self.db.session() as s:
                    row = s.get(UserIdentityRow, (issuer, subject))
                    if row is not None:
                        return row.user_id
        raise RuntimeError(f"no free user name for {base!r}")

    def groups_of(self, user_id: uuid.UUID) -> list[str]:
        with self.db.session() as s:
            rows = s.scalars(select(UserIdentityRow.groups).where(UserIdentityRow.user_id == user_id)).all()
        return sorted({group for groups in rows for group in groups or []})
