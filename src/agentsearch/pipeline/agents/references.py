"""What an agent config may name beyond its own settings: a registered tool, or a collection of the config's owner.

An agent class declares the config fields that name such resources in ``references``. The same declaration is
checked twice: when the config is saved (``POST /v1/agent-configs`` answers 422 naming the field) and when the
agent runs (``resolve_references(agent, ctx.tools)``: the tool may have been removed, the collection deleted, or a
row written by other means), where a missing one is the agent's ``error`` before it starts anything.

A collection that exists but belongs to someone else gets exactly the words of one that does not exist, so a
refusal does not tell a user that another user's id is real.

The fields a user must never set (a command to start, its environment, a raw URL) are declared with
``operator_only(...)``: present in a config, they are refused with the field's own name in the error.

Usage::

    class McpTool(ResponseAgent):
        references = {"context_forge_tool_id": ToolReference("mcp")}

        class Config(AgentConfig):
            context_forge_tool_id: str
            command: OperatorOnly = None
            _refuse = operator_only("command", tool_field="context_forge_tool_id")

    resources = UserResources(db, user_id)                       # what the API checks a saved config against
    resolve_references(McpTool({"context_forge_tool_id": "make_outline"}), resources)
    # -> {"context_forge_tool_id": RegisteredTool(...)}, or UnresolvedReference("context_forge_tool_id", "no mcp ...")
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Annotated, Any, Protocol

from pydantic import Field, field_validator
from pydantic.json_schema import SkipJsonSchema

from agentsearch.pipeline.platform.db import Database
from agentsearch.pipeline.platform.tables.collections import CollectionRow
from agentsearch.pipeline.security.access import Access
from agentsearch.pipeline.security.registered_tools import RegisteredTool, ToolStore

HOW_TO_REGISTER = "operators register tools (`agentsearch tools add`)"


@dataclass(frozen=True)
class ToolReference:
    """The field names a registered tool of this kind (``mcp``, ``http``)."""

    kind: str

    def describe(self) -> str:
        return f"registered tool ({self.kind})"


@dataclass(frozen=True)
class CollectionReference:
    """The field names a collection, which must belong to the config's owner."""

    def describe(self) -> str:
        return "collection of the config's owner"


Reference = ToolReference | CollectionReference


class MissingResource(LookupError):
    """A named resource that is not there for this user (removed, never registered, someone else's)."""


class UnresolvedReference(LookupError):
    """A config field whose resource is missing: ``field`` and a message for the config's owner."""

    def __init__(self, field: str, message: str) -> None:
        self.field, self.message = field, message
        super().__init__(f"{field}: {message}")


class Resources(Protocol):
    """What resolves references: ``UserResources`` (the API), ``agentsearch.pipeline.agents.toolbox.AgentTools`` bound
    to a user."""

    def registered_tool(self, kind: str, name: str) -> RegisteredTool: ...

    def owned_collection(self, collection_id: str) -> Any: ...


def tool_missing(kind: str, name: str) -> MissingResource:
    return MissingResource(f"no {kind} tool named {name!r} is registered; {HOW_TO_REGISTER}")


def collection_missing(collection_id: object) -> MissingResource:
    # The words of the API's 404 for a collection (agentsearch.api.errors.not_found), whether it is absent or not the
    # user's.
    return MissingResource(f"collection {collection_id} not found")


def resolve_references(agent: Any, resources: Resources | None) -> dict[str, Any]:
    """Each referencing field set in a built agent's config -> what it names; ``UnresolvedReference`` if not there."""
    return resolve_config_references(type(agent), agent.config, resources)


def resolve_config_references(cls: type, config: Any, resources: Resources | None) -> dict[str, Any]:
    """``resolve_references`` for an agent class and a validated config (one being saved)."""
    resolved: dict[str, Any] = {}
    for field, reference in getattr(cls, "references", {}).items():
        value = getattr(config, field, None)
        if value is None:
            continue
        if isinstance(reference, ToolReference):
            arguments: tuple[Any, ...] = (reference.kind, value)
            finder = getattr(resources, "registered_tool", None)
        else:
            finder, arguments = getattr(resources, "owned_collection", None), (value,)
        if finder is None:
            raise UnresolvedReference(field, f"cannot check the {reference.describe()} it names without the toolbox")
        try:
            resolved[field] = finder(*arguments)
        except MissingResource as exc:
            raise UnresolvedReference(field, str(exc)) from None
    return resolved


class UserResources:
    """Registered tools, and one user's collections, from the database."""

    def __init__(self, db: Database, user_id: uuid.UUID | str | None) -> None:
        self.db = db
        self.user_id = uuid.UUID(str(user_id)) if user_id is not None else None

    def registered_tool(self, kind: str, name: str) -> RegisteredTool:
        tool = ToolStore(self.db).get(kind, name)
        if tool is None:
            raise tool_missing(kind, name)
        return tool

    def owned_collection(self, collection_id: str) -> CollectionRow:
        try:
            key = uuid.UUID(str(collection_id))
        except ValueError:
            raise collection_missing(collection_id) from None
        with self.db.session() as s:
            row = s.get(CollectionRow, key)
            # The user's own, or a team's it is in (any role reads): read again when the agent runs, as the job's
            # user, so a member removed from the team reads it no more.
            if row is None or self.user_id is None or Access(s, self.user_id).held(row) is None:
                raise collection_missing(collection_id)
            s.expunge(row)
            return row


# --- fields only an operator sets ---------------------------------------------------------------------------------

# A field a config may not carry: hidden from the schema, never dumped, refused by ``operator_only`` when present.
OperatorOnly = Annotated[SkipJsonSchema[Any], Field(exclude=True)]


def operator_only(*fields: str, tool_field: str):
    """A validator refusing ``fields`` whenever a config sets them (to anything, null included), naming the field."""

    def refuse(cls, value: Any, info) -> Any:
        raise ValueError(f"{info.field_name} cannot be set in an agent config: {HOW_TO_REGISTER} and a config "
                         f"names one in {tool_field}")

    return field_validator(*fields, mode="before")(refuse)
