"""What one API key may do: its scopes, the collections it sees, and when it expires.

A key without limits (every column NULL, as every key issued before limits existed) does all its user may. A
limited key carries any of three: ``scopes`` (``search``: submit searches and read their jobs; ``read``: read
collections, documents, jobs and configs; ``write``: change them), ``collections`` (the only ones it sees; the
others answer 404 as another user's do), and ``expires_at`` (after it, 401 as for a revoked key). Which scope each
route needs is declared in ``agentsearch.api.route_rules``.

Usage::

    limits = KeyLimits.of(scopes=["search", "read"], collections=[collection_id], expires_in=parse_duration("30d"))
    limits.unlimited                          # False: this key may not manage keys
    limits.sees(collection_id)                # True
    limits.expired(utcnow())                  # False for 30 days
    limits.sees_job(job)                      # every collection the job searched is one of the key's
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, get_args

from agentsearch.pipeline.platform.tables.jobs import JobRow

Scope = Literal["search", "read", "write"]
SCOPES: tuple[Scope, ...] = get_args(Scope)
# Long enough for any integration's key; past it a datetime overflows before anyone would want it.
MAX_EXPIRY = timedelta(days=3650)
DURATION = re.compile(r"^\s*(\d+)\s*([smhdw])\s*$")
UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


class KeyLimitError(ValueError):
    """A limit that cannot be given to a key, with a message naming what is wrong."""


def parse_duration(text: str) -> timedelta:
    """``30d``, ``12h``, ``90m``, ``2w``, ``3600s``: a positive span of at most ``MAX_EXPIRY``."""
    match = DURATION.match(text)
    if match is None:
        raise KeyLimitError(f"invalid duration {text!r}: a positive whole number and a unit, s, m, h, d or w "
                            "(for example 30d or 12h)")
    span = timedelta(seconds=int(match[1]) * UNIT_SECONDS[match[2]])
    if span <= timedelta(0):
        raise KeyLimitError(f"invalid duration {text!r}: it must be longer than nothing")
    if span > MAX_EXPIRY:
        raise KeyLimitError(f"invalid duration {text!r}: at most {MAX_EXPIRY.days} days")
    return span


def checked_scopes(scopes: Iterable[str]) -> frozenset[Scope]:
    """The scopes named, each one known; an empty list is refused (a key that may do nothing is no key)."""
    given = [s.strip() for s in scopes]
    unknown = [s for s in given if s not in SCOPES]
    if unknown:
        raise KeyLimitError(f"unknown scope {unknown[0]!r}; known: {', '.join(SCOPES)}")
    if not given:
        raise KeyLimitError(f"name at least one scope of {', '.join(SCOPES)}, or none at all for every scope")
    return frozenset(given)  # type: ignore[arg-type]


def uuid_or_none(value: object) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(value))
    except ValueError:
        return None


def searched_collections(job: JobRow) -> frozenset[uuid.UUID] | None:
    """Every collection the job searched (its own, ``also_search``, its profiles'), or None when the row does not
    say (a profile set's run without its first state)."""
    asked = job.request or {}
    if "profile_set_id" in asked and not job.initial_state:
        return None
    named: list[object] = [job.collection_id, *(asked.get("also_search") or [])]
    for profile in asked.get("profiles") or []:
        named.extend(profile.get("collections") or [] if isinstance(profile, dict) else [])
    # A profile set's run names its collections in its first state alone.
    named.extend(((job.initial_state or {}).get("collections") or {}).keys())
    ids = [uuid_or_none(c) for c in named]
    return None if None in ids else frozenset(i for i in ids if i is not None)


def _aware(moment: datetime | None) -> datetime | None:
    # SQLite hands timestamps back without their zone; they were written in UTC.
    return moment.replace(tzinfo=UTC) if moment is not None and moment.tzinfo is None else moment


@dataclass(frozen=True)
class KeyLimits:
    scopes: frozenset[Scope] | None = None
    collections: frozenset[uuid.UUID] | None = None
    expires_at: datetime | None = None

    @classmethod
    def of(cls, scopes: Iterable[str] | None = None, collections: Iterable[uuid.UUID | str] | None = None,
           expires_in: timedelta | None = None, now: datetime | None = None) -> KeyLimits:
        """Limits as a request or a command names them (the collections' ownership is the caller's to check)."""
        if expires_in is not None and expires_in <= timedelta(0):
            raise KeyLimitError("the expiry must be in the future")
        return cls(
            scopes=checked_scopes(scopes) if scopes is not None else None,
            collections=frozenset(uuid.UUID(str(c)) for c in collections) if collections is not None else None,
            expires_at=(now or datetime.now(UTC)) + expires_in if expires_in is not None else None,
        )

    @classmethod
    def from_row(cls, scopes: list[str] | None, collections: list[str] | None,
                 expires_at: datetime | None) -> KeyLimits:
        return cls(
            scopes=frozenset(s for s in scopes if s in SCOPES) if scopes is not None else None,
            collections=frozenset(uuid.UUID(c) for c in collections) if collections is not None else None,
            expires_at=_aware(expires_at),
        )

    def columns(self) -> dict[str, Any]:
        """The ``api_keys`` columns holding these limits (lists sorted, so a key's row reads the same each time)."""
        return {
            "scopes": sorted(self.scopes) if self.scopes is not None else None,
            "collections": sorted(str(c) for c in self.collections) if self.collections is not None else None,
            "expires_at": self.expires_at,
        }

    @property
    def unlimited(self) -> bool:
        """No limit of any kind: only such a key manages keys, so a limited key never makes a broader one (nor one
        that outlives it)."""
        return self.scopes is None and self.collections is None and self.expires_at is None

    def allows(self, scope: Scope) -> bool:
        return self.scopes is None or scope in self.scopes

    def sees(self, collection_id: uuid.UUID | str) -> bool:
        return self.collections is None or uuid.UUID(str(collection_id)) in self.collections

    def sees_job(self, job: JobRow) -> bool:
        """Whether the key sees the job: every collection it searched is one of the key's."""
        if self.collections is None:
            return True
        searched = searched_collections(job)
        return searched is not None and searched <= self.collections

    def expired(self, now: datetime) -> bool:
        return self.expires_at is not None and self.expires_at <= now

    def shown(self) -> dict[str, Any]:
        """As the API shows them (``GET /v1/me``, ``GET /v1/keys``): null is no limit."""
        columns = self.columns()
        return {"scopes": columns["scopes"], "collections": columns["collections"], "expires_at": self.expires_at}
