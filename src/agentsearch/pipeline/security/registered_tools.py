"""Registered tools: the MCP servers and HTTP endpoints an operator lets agent configs name.

What a worker starts or calls on a user's behalf is decided here, by an operator (``agentsearch tools add``), and
never by the user API: a user's agent config names a registered tool (``mcp``: ``context_forge_tool_id``;
``external_enricher``: ``endpoint``) and sets only its arguments. Kinds:

- ``mcp`` over stdio: ``command`` (argv), ``env`` (the server's environment: the MCP SDK adds only PATH, HOME,
  LOGNAME, SHELL, TERM and USER, never the worker's own variables or credentials), ``cwd`` (absolute);
- ``mcp`` over streamable HTTP: ``url`` and ``headers``;
- ``http``: an endpoint's ``url`` template for the external enricher (``{document_id}``, ``{query}``,
  ``{metadata.<key>}`` placeholders, fixed scheme and host) and its ``headers``.

``server_tool`` is the tool's name on an MCP server when it differs from the registered name. ``allow_internal``
lets calls reach the tool's own host although it is loopback or private (``agentsearch.pipeline.platform.egress``);
stdio tools connect nowhere and take no such flag. Registered tools are shared by every user: they hold operator
secrets (headers, env), which listings show by name only.

Usage::

    store = ToolStore(db)
    store.add(RegisteredTool(name="make_outline", kind="mcp", command=["python", "-m", "my_tools.server"],
                             env={"TOOLS_TOKEN": "..."}, cwd="/srv/tools"))
    store.add(RegisteredTool(name="crm", kind="http", url="https://crm.example/api/companies/{metadata.company_id}",
                             headers={"Authorization": "Bearer ..."}))
    store.get("mcp", "make_outline")           # RegisteredTool, or None
    store.add(rotated_crm, replace=True)       # new secrets under the same name, in one transaction
    store.remove("crm")                        # True when it was there
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import PurePosixPath
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError

from agentsearch.pipeline.platform.db import Database, changed_rows
from agentsearch.pipeline.platform.egress import EgressPolicy
from agentsearch.pipeline.platform.tables.agents import RegisteredToolRow
from agentsearch.pipeline.security.audit import Actor, record

KINDS = ("mcp", "http")
TOOL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
PLACEHOLDER = re.compile(r"\{([^{}]*)\}")


class ToolError(ValueError):
    """A request about registered tools that cannot be done, with a message for the operator."""


def check_url_template(template: str) -> str:
    """An enricher URL template as registered: absolute http(s), fixed host, known placeholders; else ValueError."""
    parts = urlsplit(template)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError("the URL must be an absolute http(s) URL")
    if "{" in parts.netloc or "}" in parts.netloc:
        raise ValueError("placeholders are not allowed in the URL's host")
    for name in PLACEHOLDER.findall(template):
        if name not in ("document_id", "query") and not (name.startswith("metadata.") and len(name) > 9):
            raise ValueError(f"unknown placeholder {{{name}}}: use {{document_id}}, {{query}} or {{metadata.<key>}}")
    return template


class RegisteredTool(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(..., description="What agent configs name; letters, digits, . _ -")
    kind: Literal["mcp", "http"]
    command: list[str] | None = Field(None, description="mcp over stdio: the server's argv.")
    env: dict[str, str] = Field(default_factory=dict, description="mcp over stdio: the server's environment.")
    cwd: str | None = Field(None, description="mcp over stdio: the server's working directory (absolute).")
    url: str | None = Field(None, description="mcp: streamable HTTP endpoint; http: the URL template.")
    headers: dict[str, str] = Field(default_factory=dict, description="HTTP headers sent with every call.")
    server_tool: str | None = Field(None, description="mcp: the tool's name on the server (default: name).")
    allow_internal: bool = Field(False, description="The tool's host may be loopback or private.")
    description: str = ""

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not TOOL_NAME.match(value):
            raise ValueError(f"invalid tool name {value!r}: 1-100 letters, digits and . _ -, starting with a letter "
                             "or digit")
        return value

    @field_validator("command")
    @classmethod
    def _argv(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and (not value or not all(part for part in value)):
            raise ValueError("command must be a non-empty argv without empty parts")
        return value

    @field_validator("env")
    @classmethod
    def _env(cls, value: dict[str, str]) -> dict[str, str]:
        for key in value:
            if not ENV_NAME.match(key):
                raise ValueError(f"invalid environment variable name {key!r}")
        return value

    @field_validator("cwd")
    @classmethod
    def _cwd(cls, value: str | None) -> str | None:
        if value is not None and not PurePosixPath(value).is_absolute():
            raise ValueError("cwd must be an absolute path: a worker's own directory is not the operator's choice")
        return value

    @model_validator(mode="after")
    def _kind_fields(self) -> RegisteredTool:
        if self.kind == "mcp":
            if (self.command is None) == (self.url is None):
                raise ValueError("an mcp tool has exactly one of a command (stdio) or a url (streamable HTTP)")
            if self.url is not None:
                if urlsplit(self.url).scheme not in ("http", "https") or not urlsplit(self.url).hostname:
                    raise ValueError("the url of an mcp tool must be an absolute http(s) URL")
                if self.env or self.cwd:
                    raise ValueError("env and cwd are for a stdio server (command), not one reached by url")
            elif self.headers or self.allow_internal:
                raise ValueError("headers and allow_internal are for a server reached by url, not a stdio command")
        else:
            if self.url is None:
                raise ValueError("an http tool needs its url template")
            check_url_template(self.url)
            if self.command is not None or self.env or self.cwd or self.server_tool:
                raise ValueError("command, env, cwd and server_tool are for mcp tools")
        return self

    @property
    def transport(self) -> str:
        """``stdio`` (a command), ``http`` (a url)."""
        return "stdio" if self.command is not None else "http"

    @property
    def remote_name(self) -> str:
        """The name the MCP server knows the tool by."""
        return self.server_tool or self.name

    @property
    def host(self) -> str | None:
        return urlsplit(self.url).hostname if self.url else None

    def egress_policy(self, base: EgressPolicy) -> EgressPolicy:
        """The egress policy for calls to this tool: the operator's, plus its own host with ``allow_internal``."""
        return base.allowing_host(self.host) if self.allow_internal and self.host else base

    def listing(self) -> dict[str, Any]:
        """What ``agentsearch tools list`` shows: everything but the values of env and headers (secrets)."""
        shown = self.model_dump(mode="json", exclude_none=True)
        shown["env"] = sorted(self.env)
        shown["headers"] = sorted(self.headers)
        return shown


def _from_row(row: RegisteredToolRow) -> RegisteredTool:
    return RegisteredTool.model_validate({**row.spec, "name": row.name, "kind": row.kind,
                                          "allow_internal": row.allow_internal, "description": row.description})


class ToolStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def add(self, tool: RegisteredTool, replace: bool = False) -> bool:
        """Register a tool; True when it replaced one of that name (``replace``, in one transaction: to rotate a
        secret without a moment where configs naming it fail). ``ToolError`` when the name is taken otherwise."""
        spec = tool.model_dump(mode="json", exclude={"name", "kind", "allow_internal", "description"},
                               exclude_none=True)
        try:
            with self.db.session() as s:
                replaced = bool(replace and changed_rows(
                    s, delete(RegisteredToolRow).where(RegisteredToolRow.name == tool.name)))
                s.add(RegisteredToolRow(name=tool.name, kind=tool.kind, spec=spec, allow_internal=tool.allow_internal,
                                        description=tool.description))
                s.flush()
                # Registered by an operator only (the command line): its name and kind, never a secret.
                record(s, Actor(None), "tool.add", target=("tool", tool.name),
                       details={"kind": tool.kind, "replaced": replaced})
        except IntegrityError:
            raise ToolError(f"a tool named {tool.name!r} is already registered; give --replace to replace it") from None
        return replaced

    def get(self, kind: str, name: str) -> RegisteredTool | None:
        with self.db.session() as s:
            row = s.scalar(select(RegisteredToolRow).where(RegisteredToolRow.name == name,
                                                           RegisteredToolRow.kind == kind))
            return _from_row(row) if row is not None else None

    def list(self) -> list[tuple[RegisteredTool, datetime]]:
        with self.db.session() as s:
            rows = s.scalars(select(RegisteredToolRow).order_by(RegisteredToolRow.name)).all()
            return [(_from_row(r), r.created_at) for r in rows]

    def remove(self, name: str) -> bool:
        with self.db.session() as s:
            removed = bool(changed_rows(s, delete(RegisteredToolRow).where(RegisteredToolRow.name == name)))
            if removed:
                record(s, Actor(None), "tool.remove", target=("tool", name))
            return removed
