"""Who may read a source's item, from where it sits in the source: an admin's mapping of folders, paths or prefixes
to the collection's document groups.

A source's config may carry ``groups`` (``{"INBOX/HR": "hr", "Finance": ["finance", "board"]}``): an item under a
mapped place (an IMAP folder and its subfolders, a WebDAV path, an S3 key prefix) is restricted to those groups;
the longest mapped place that holds it wins. With ``groups_required``, an item under no mapped place cannot be
given groups, and is not indexed (fail closed): the run counts it failed with the reason. Without it, such an item
is found by every member of the collection, as an upload without groups is.

Usage::

    mapping = GroupMapping(groups={"INBOX/HR": "hr"}, required=True)
    mapping.groups_of("INBOX/HR/2026")       # ["hr"]
    mapping.groups_of("INBOX")               # raises Unmapped: no mapping holds it, and one is required
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from pydantic import Field

from agentsearch.pipeline.security.document_access import MAX_DOCUMENT_GROUPS, GroupName

MAX_MAPPINGS = 200
GroupsField = Annotated[
    dict[Annotated[str, Field(min_length=1, max_length=1000)], GroupName | list[GroupName]],
    Field(max_length=MAX_MAPPINGS, description="A place in the source (a folder, a path, a key prefix) -> the "
                                               "document group (or groups) its items are restricted to.")]
RequiredField = Annotated[bool, Field(description="An item under no mapped place is not indexed (fail closed).")]


class Unmapped(Exception):
    """The item's place is under no mapping, and the source requires one."""


@dataclass(frozen=True)
class GroupMapping:
    groups: dict[str, str | list[str]]
    required: bool = False
    separator: str = "/"

    def groups_of(self, place: str) -> list[str] | None:
        """The sorted groups of the item at ``place`` (None: unrestricted); ``Unmapped`` when none holds it and one
        is required."""
        best = self.place_of(place)
        if best is None:
            if self.required:
                raise Unmapped(f"{place}: no group mapping holds it, and the source requires one (groups_required)")
            return None
        named = self.groups[best]
        return sorted(set([named] if isinstance(named, str) else named))[:MAX_DOCUMENT_GROUPS]

    def place_of(self, place: str) -> str | None:
        """The longest mapped place holding ``place`` (a key of ``groups``), or None."""
        best = None
        for prefix in self.groups:
            if self._holds(prefix, place) and (best is None or len(prefix) > len(best)):
                best = prefix
        return best

    def _holds(self, prefix: str, place: str) -> bool:
        stem = prefix.strip(self.separator)
        place = place.strip(self.separator)
        # A place holds itself and what is below it, whole names only: "HR" holds "HR/2026", not "HRM".
        return stem == "" or place == stem or place.startswith(stem + self.separator)
