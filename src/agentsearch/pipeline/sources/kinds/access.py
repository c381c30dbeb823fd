"""Who may read a SaaS tool's item, from the permissions the tool itself reports, mapped to the collection's document
groups by the admin (``{"space:HR": "hr", "group:confluence-hr": "hr", "#payroll": ["hr", "finance"]}``).

A tool tells who may read an item as *principals* (a space, a channel, a user, a group, a domain), in sets that must
all be met: a Confluence page needs its space, and each read restriction on it or on a page above it; a private Slack
channel needs a member. Each set gives the groups its mapped principals name (their union). The item's groups are
what every set allows (their intersection):

- the item's *place* (its space, public channel, workspace) restricts it only when mapped; unmapped, it is found by
  every member of the collection, unless ``groups_required``;
- a *restriction* (a page's read restriction, a private channel's members, a file's sharing) that no mapping names
  is not indexed (fail closed): the tool says someone is kept out, and nothing says who may read it here;
- sets whose groups have none in common leave no group: not indexed either.

An item whose permissions could not be read at all is not indexed, with the reason (``Access.unreadable``).

Usage::

    mapping = PrincipalMapping({"space:HR": "hr", "group:hr-team": "hr"})
    mapping.groups_of(Access(place={"space:HR"}, restrictions=[{"group:hr-team", "user:5b10"}]))   # ["hr"]
    mapping.groups_of(Access(place={"space:ENG"}))                                               # None: every member
    mapping.groups_of(Access(place={"space:ENG"}, restrictions=[{"user:5b10"}]))                 # raises Unmapped
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from pydantic import Field

from agentsearch.pipeline.platform.egress import EgressGuard, EgressRefused
from agentsearch.pipeline.security.document_access import MAX_DOCUMENT_GROUPS
from agentsearch.pipeline.sources.kinds.base import Context, Item, ListingFailed, SourceConfig
from agentsearch.pipeline.sources.kinds.permissions import GroupsField, RequiredField, Unmapped


class SaasConfig(SourceConfig):
    """What every SaaS kind's config has: the admin's mapping of the tool's principals to document groups."""

    groups: GroupsField = Field(default_factory=dict)
    groups_required: RequiredField = False


@dataclass
class Access:
    """An item's permissions as its tool reports them: ``place`` (principals naming where it sits), the
    ``restrictions`` (each a set of principals, any of which may read), or why they could not be read."""

    place: set[str] = field(default_factory=set)
    restrictions: list[set[str]] = field(default_factory=list)
    unreadable: str | None = None


@dataclass
class Changes:
    """A change feed's pages folded: each item changed (its latest state) and each one gone, a later change of the
    same item overriding an earlier one."""

    changed: dict[str, dict[str, Any]] = field(default_factory=dict)
    gone: set[str] = field(default_factory=set)

    def note(self, key: str, entry: dict[str, Any] | None) -> None:
        """``entry``: the item's new state, or None when it was removed."""
        if entry is None:
            self.gone.add(key)
            self.changed.pop(key, None)
        else:
            self.gone.discard(key)
            self.changed[key] = entry


@dataclass(frozen=True)
class PrincipalMapping:
    groups: dict[str, str | list[str]]
    required: bool = False

    @classmethod
    def of(cls, config: SaasConfig) -> PrincipalMapping:
        return cls(config.groups, config.groups_required)

    def _mapped(self, principals: Iterable[str]) -> set[str]:
        named: set[str] = set()
        for principal in principals:
            value = self.groups.get(principal)
            if value is not None:
                named.update([value] if isinstance(value, str) else value)
        return named

    def groups_of(self, access: Access, name: str = "") -> list[str] | None:
        """The sorted groups of the item (None: every member); ``Unmapped`` when it may not be indexed."""
        label = f"{name}: " if name else ""
        if access.unreadable is not None:
            raise Unmapped(f"{label}its permissions could not be read ({access.unreadable}): not indexed")
        allowed: set[str] | None = None
        place = self._mapped(access.place)
        if place:
            allowed = place
        elif self.required:
            raise Unmapped(f"{label}no group mapping holds {_names(access.place)}, and the source requires one "
                           "(groups_required)")
        for restriction in access.restrictions:
            mapped = self._mapped(restriction)
            if not mapped:
                raise Unmapped(f"{label}restricted in the source to {_names(restriction)}, which no group mapping "
                               "names: not indexed")
            allowed = mapped if allowed is None else allowed & mapped
        if allowed is not None and not allowed:
            raise Unmapped(f"{label}its restrictions' groups have none in common: not indexed")
        return None if allowed is None else sorted(allowed)[:MAX_DOCUMENT_GROUPS]


def unread(mapping: PrincipalMapping, access: Access, label: str, key: str, version: str, url: str, ctx: Context,
           memo: dict[str, Any] | None = None) -> tuple[Item | None, list[str] | None]:
    """The item when its content is not to be read (not indexed: withheld; its version the last run's: unchanged,
    with its groups), else None; and its groups."""
    try:
        groups = mapping.groups_of(access, label)
    except Unmapped as exc:
        return Item(key, version, url=url, error=str(exc), withhold=True), None
    previous = ctx.previous.get(key)
    if previous is not None and previous.get("version") == version:
        return Item(key, version, url=url, groups=groups, memo=memo or {}), groups
    return None, groups


def kept(key: str, state: dict[str, Any], mapping: PrincipalMapping, label: str) -> Item:
    """An item a change feed does not name: unchanged, its groups from the principals kept in its memo (``place``,
    ``principals``), so that a changed mapping reaches it without the feed."""
    memo = state.get("memo", {})
    access = Access(place=set(memo.get("place", [])), restrictions=[set(memo.get("principals", []))])
    try:
        groups = mapping.groups_of(access, f"{label} {memo.get('name', key)}")
    except Unmapped as exc:
        return Item(key, state.get("version", ""), url=state.get("url", ""), error=str(exc), withhold=True)
    return Item(key, state.get("version", ""), url=state.get("url", ""), groups=groups, memo=memo)


def _names(principals: Iterable[str]) -> str:
    listed = sorted(principals)
    return ", ".join(listed[:5]) + (f" and {len(listed) - 5} more" if len(listed) > 5 else "") if listed else "it"


def guard_host(url: str, ctx: Context) -> None:
    """The egress guard's word on the service's host, before a client library connects to it (the libraries make
    their own connections, as boto3 and Git do)."""
    parts = urlsplit(url)
    try:
        EgressGuard(ctx.fetcher.policy).addresses(parts.hostname or "",
                                                  parts.port or (443 if parts.scheme == "https" else 80))
    except (EgressRefused, OSError) as exc:
        raise ListingFailed(str(exc)) from exc
