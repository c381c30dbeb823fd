"""Response: call a tool on an MCP server (the ``mcp`` Python SDK) with arguments mapped from the job, and store
what it returns as the job's artifact.

The server is an operator's: ``context_forge_tool_id`` names a tool registered with ``agentsearch tools add``
(a stdio command with its environment and working directory, or a streamable HTTP endpoint with its headers), and
the config sets only the arguments. A config carrying ``command``, ``env``, ``cwd``, ``server_url`` or
``headers`` is refused when it is saved (422 naming the field); so is one naming a tool nobody registered. The
name is looked up again when the agent runs: a tool removed since is this agent's ``error``, and nothing starts.

The config::

    {"type": "mcp", "context_forge_tool_id": "make_presentation",
     "argument_mapping": {"title": "query", "max_slides": "config.max_slides", "language": "metadata.language"},
     "settings": {"max_slides": 8}, "call_timeout_s": 45}

registered by an operator as, e.g.::

    agentsearch tools add make_presentation --kind mcp --command "python -m my_tools.server" --env TOOLS_TOKEN=...
    agentsearch tools add make_presentation --kind mcp --url https://tools.example.org/mcp \\
        --header "Authorization: Bearer ..."

``argument_mapping`` maps each tool argument to a pipeline field: ``query``, ``original_query``, ``answer``,
``documents`` (``[{id, title, text, score}]``), ``sources`` (``[{document_id, title, score}]``), ``cot_steps``,
``collection_id``, ``user_id``, ``metadata`` or ``metadata.<key>[.<key>...]`` (a missing key leaves the argument
out, so the tool's default applies), and ``config.<key>`` (a value from ``settings``; checked when the config is
saved).

A stdio server gets the environment the operator registered over the MCP SDK's small safe set (PATH, HOME,
LOGNAME, SHELL, TERM, USER), never the worker's own variables and credentials, and runs in the registered working
directory. An HTTP server is reached through the egress guard (``agentsearch.pipeline.security``): a loopback, private,
link-local or metadata address is refused at connect time unless the operator allowed it (``--allow-internal``
for the tool's host, ``AGENTSEARCH_EGRESS_ALLOW``).

Why a response agent: the tools this is for (slides titled by the query, ``max_slides`` from settings) *make
something from the answer*; at the response stage every pipeline field (answer, sources, documents,
reasoning) can be mapped, and the tool's result becomes a downloadable artifact of the job like the built-in
generators'. What the artifact holds, by the result's content: an embedded binary resource, image or audio
(the first one) is stored as those bytes with its MIME type (a tool that renders a PPTX returns one); else
structured content is stored as JSON (``application/json``); else the text parts (``text/plain``). The artifact's
metadata names the tool, the registered tool, the arguments sent and the text of the result. A tool error
(``is_error``) or a server that cannot be reached is this agent's ``error``; the job goes on. (To steer the search
itself with an LLM call, ``llm_prompt`` is the pre-search agent.)

The SDK is async; the call runs in ``asyncio.run`` inside the agent's own thread (the runner gives every agent one),
bounded by ``call_timeout_s``.

Usage::

    # ctx.tools: the job's toolbox (agentsearch.pipeline.agents.toolbox.AgentTools), which finds registered tools
    agent = McpTool({"context_forge_tool_id": "make_outline",
                     "argument_mapping": {"title": "query", "max_slides": "config.max_slides"},
                     "settings": {"max_slides": 5}})
    artifact = agent.run(ResponseAgentInput(answer="...", sources=[], query="Q4 results"), ctx)
    artifact.content_type, json.loads(artifact.data)
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import tempfile
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from agentsearch.pipeline.agents.base import AgentArtifact, AgentConfig, AgentContext, ResponseAgent, ResponseAgentInput
from agentsearch.pipeline.agents.references import OperatorOnly, ToolReference, operator_only, resolve_references
from agentsearch.pipeline.platform.egress import EgressPolicy
from agentsearch.pipeline.security.registered_tools import RegisteredTool

FIELDS = ("query", "original_query", "answer", "documents", "sources", "cot_steps", "collection_id", "user_id",
          "metadata")
_MISSING = object()
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")
EXTENSIONS = {
    "application/json": "json", "text/plain": "txt", "text/markdown": "md", "text/html": "html", "text/csv": "csv",
    "application/pdf": "pdf", "image/png": "png", "image/jpeg": "jpg", "image/svg+xml": "svg", "audio/mpeg": "mp3",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": "pptx",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
}


class McpToolError(RuntimeError):
    pass


class McpTool(ResponseAgent):
    agent_id = "mcp"
    version = "2"  # 2: the server is a registered tool, no longer set in the config
    description = (
        "Calls a tool on an operator-registered MCP server (streamable HTTP or stdio) with arguments mapped from the "
        "job (query, answer, documents, metadata.<key>, config.<key>); the tool's result is stored as an artifact."
    )
    default_timeout_s = 60.0
    references: ClassVar[dict[str, Any]] = {"context_forge_tool_id": ToolReference("mcp")}

    class Config(AgentConfig):
        type: Literal["mcp"] = "mcp"
        context_forge_tool_id: str = Field(
            ..., min_length=1, max_length=100,
            description="The registered tool to call (`agentsearch tools add`, kind mcp).")
        argument_mapping: dict[str, str] = Field(default_factory=dict, description="tool argument -> pipeline field.")
        settings: dict[str, Any] = Field(default_factory=dict, description="Values for config.<key> mappings.")
        call_timeout_s: float = Field(45.0, gt=0, le=600, description="Budget of connect + call.")
        filename: str | None = Field(None, max_length=200, description="Artifact file name (default from the tool).")
        # Where the server is and how it starts are the operator's (the registered tool), never a config's.
        command: OperatorOnly = None
        env: OperatorOnly = None
        cwd: OperatorOnly = None
        server_url: OperatorOnly = None
        headers: OperatorOnly = None
        _operator_only = operator_only("command", "env", "cwd", "server_url", "headers",
                                       tool_field="context_forge_tool_id")

        @model_validator(mode="after")
        def _known_fields(self) -> McpTool.Config:
            for argument, path in self.argument_mapping.items():
                root, _, rest = path.partition(".")
                if root == "config":
                    if not rest or rest.split(".")[0] not in self.settings:
                        raise ValueError(f"argument_mapping[{argument!r}] = {path!r}: no {rest!r} in settings")
                elif root not in FIELDS or (rest and root != "metadata"):
                    raise ValueError(
                        f"argument_mapping[{argument!r}] = {path!r}: not a pipeline field; use one of "
                        f"{', '.join(FIELDS)}, metadata.<key> or config.<key>"
                    )
            return self

    config: Config

    # -- arguments --------------------------------------------------------------------------------------------
    def arguments(self, inp: ResponseAgentInput) -> dict[str, Any]:
        fields: dict[str, Any] = {
            "query": inp.query,
            "original_query": inp.metadata.get("original_query") or inp.query,
            "answer": inp.answer,
            "documents": [{"id": d.id, "title": d.title, "text": d.text, "score": d.score} for d in inp.documents],
            "sources": [s.model_dump(mode="json") for s in inp.sources],
            "cot_steps": [c.model_dump(mode="json") for c in inp.cot_steps or []],
            "collection_id": inp.collection_id,
            "user_id": inp.user_id,
            "metadata": inp.metadata,
        }
        arguments: dict[str, Any] = {}
        for argument, path in self.config.argument_mapping.items():
            root, _, rest = path.partition(".")
            value = _dig(self.config.settings, rest) if root == "config" else (
                _dig(inp.metadata, rest) if root == "metadata" and rest else fields[root])
            if value is not _MISSING and value is not None:
                arguments[argument] = value
        return arguments

    # -- the call ---------------------------------------------------------------------------------------------
    def run(self, inp: ResponseAgentInput, ctx: AgentContext) -> AgentArtifact:
        # Looked up now, not when the config was saved: a tool removed since must not run (nothing is started).
        registered: RegisteredTool = resolve_references(self, ctx.tools)["context_forge_tool_id"]
        policy = registered.egress_policy(getattr(ctx.tools, "egress_policy", None) or EgressPolicy())
        arguments = self.arguments(inp)
        tool = registered.remote_name
        where = _server_name(registered)
        with tempfile.TemporaryFile("w+") as errlog:
            try:
                result = asyncio.run(asyncio.wait_for(self._call(registered, policy, arguments, errlog),
                                                      self.config.call_timeout_s))
            except TimeoutError:
                raise McpToolError(f"MCP tool {tool!r} at {where} gave no result within "
                                   f"{self.config.call_timeout_s:g} s") from None
            except McpToolError:
                raise
            except BaseException as exc:  # SDK and transport errors, often in exception groups
                if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                    raise
                errlog.seek(0)
                tail = errlog.read()[-500:].strip()
                raise McpToolError(f"MCP call {tool!r} at {where} failed: {_describe(exc)}"
                                   + (f"; server stderr: {tail}" if tail else "")) from exc
        return self._artifact(registered, arguments, result)

    async def _call(self, registered: RegisteredTool, policy: EgressPolicy, arguments: dict[str, Any],
                    errlog) -> Any:
        from mcp import Client

        tool = registered.remote_name
        if registered.transport == "http":
            from mcp.client.streamable_http import streamable_http_client

            from agentsearch.pipeline.security.transports import guarded_async_client

            assert registered.url is not None  # an HTTP tool is registered with its URL
            http = guarded_async_client(policy, headers=registered.headers or None)
            transport = streamable_http_client(registered.url, http_client=http)
        else:
            from mcp.client.stdio import StdioServerParameters, stdio_client

            command = registered.command or []
            # env is merged over the SDK's get_default_environment() (PATH, HOME, ...), not over os.environ.
            params = StdioServerParameters(command=command[0], args=command[1:], env=dict(registered.env),
                                           cwd=registered.cwd)
            transport = stdio_client(params, errlog=errlog)
            http = None
        try:
            async with Client(transport, read_timeout_seconds=self.config.call_timeout_s, cache=None) as client:
                result = await client.call_tool(tool, arguments)
        finally:
            if http is not None:
                await http.aclose()
        if result.is_error:
            raise McpToolError(f"MCP tool {tool!r} reported an error: {_texts(result.content)[:500] or '(no text)'}")
        return result

    # -- the artifact -----------------------------------------------------------------------------------------
    def _artifact(self, registered: RegisteredTool, arguments: dict[str, Any], result: Any) -> AgentArtifact:
        tool = registered.remote_name
        text = _texts(result.content)
        structured = result.structured_content
        base = _SAFE_NAME.sub("-", self.config.filename or f"mcp-{tool}").strip("-") or "mcp-result"
        # The registered name, not the command line or URL: those are the operator's and may carry secrets.
        metadata: dict[str, Any] = {"tool": tool, "registered_tool": registered.name,
                                    "transport": registered.transport, "arguments": _brief(arguments),
                                    "text": text[:4000]}
        binary = _first_binary(result.content)
        if binary is not None:
            data, mime, name = binary
            filename = self.config.filename or _SAFE_NAME.sub("-", name or "") or f"{base}.{_ext(mime)}"
            return AgentArtifact(agent_id=self.agent_id, type=_ext(mime), data=data, filename=filename,
                                 content_type=mime, metadata=metadata)
        if structured is None and text:
            # A tool that returns a dict without declaring structured output sends it as JSON text.
            try:
                parsed = json.loads(text)
                structured = parsed if isinstance(parsed, (dict, list)) else None
            except json.JSONDecodeError:
                structured = None
        if structured is not None:
            metadata["structured"] = True
            data = json.dumps(structured, ensure_ascii=False, indent=2, default=str).encode()
            filename = self.config.filename or f"{base}.json"
            return AgentArtifact(agent_id=self.agent_id, type="json", data=data, filename=filename,
                                 content_type="application/json", metadata=metadata)
        filename = self.config.filename or f"{base}.txt"
        return AgentArtifact(agent_id=self.agent_id, type="txt", data=text.encode(), filename=filename,
                             content_type="text/plain; charset=utf-8", metadata=metadata)


def _server_name(registered: RegisteredTool) -> str:
    """How errors name the server: the registered tool and its transport (not its command line or URL)."""
    return f"registered tool {registered.name!r} ({registered.transport})"


def _dig(value: Any, path: str) -> Any:
    for key in path.split(".") if path else []:
        if isinstance(value, dict) and key in value:
            value = value[key]
        else:
            return _MISSING
    return value


def _texts(content: list[Any]) -> str:
    parts = []
    for block in content or []:
        if getattr(block, "type", None) == "text":
            parts.append(block.text)
        elif getattr(block, "type", None) == "resource" and hasattr(block.resource, "text"):
            parts.append(block.resource.text)
    return "\n".join(parts)


def _first_binary(content: list[Any]) -> tuple[bytes, str, str | None] | None:
    for block in content or []:
        kind = getattr(block, "type", None)
        if kind in ("image", "audio"):
            return base64.b64decode(block.data), block.mime_type, None
        if kind == "resource" and hasattr(block.resource, "blob"):
            resource = block.resource
            name = str(resource.uri).rstrip("/").rsplit("/", 1)[-1] or None
            return base64.b64decode(resource.blob), resource.mime_type or "application/octet-stream", name
    return None


def _ext(mime: str) -> str:
    return EXTENSIONS.get(mime.split(";")[0].strip(), "bin")


def _brief(arguments: dict[str, Any]) -> dict[str, Any]:
    """The arguments as recorded in the artifact's metadata: long values cut short."""
    out = {}
    for key, value in arguments.items():
        dumped = json.dumps(value, ensure_ascii=False, default=str)
        out[key] = value if len(dumped) <= 500 else dumped[:500] + "…"
    return out


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(e) for e in exc.exceptions)
    return f"{type(exc).__name__}: {exc}"
