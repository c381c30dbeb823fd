"""Tool argument errors that name the field and never echo the value, as the API's 422s do.

The SDK refuses ill-typed arguments with pydantic's message, which quotes each rejected value
(``[type=value_error, input_value='...', input_type=str]``) and adds a documentation link; a document's text could
come back whole into the model's context. This server middleware keeps the field and the reason of each error and
drops the rest: ``documents.0.text: Value error, text must not be blank``.

Usage::

    server.middleware.append(argument_errors)       # MCPServer.middleware: (ctx, call_next) -> result
"""

from __future__ import annotations

import re
from typing import Any

from mcp_types import CallToolResult, TextContent

# "1 validation error for searchArguments" then, per error, the field's line and an indented reason line.
_HEADER = re.compile(r"^(?P<prefix>.*?)(?P<count>\d+) validation errors? for \w+$")
_DETAILS = re.compile(r"\s*\[type=[^\]\s,]+(?:, input_value=.*)?(?:, input_type=[^\]]+)?\]$")
_LINK = "For further information visit"


def concise(text: str) -> str:
    """A pydantic validation message as ``field: reason; field: reason``, after what came before it."""
    lines = text.splitlines()
    header = _HEADER.match(lines[0]) if lines else None
    if header is None:
        return text
    errors: list[str] = []
    field: str | None = None
    for line in lines[1:]:
        if _LINK in line:
            continue
        if not line.startswith(" "):
            field = line.strip()
            continue
        reason = _DETAILS.sub("", line.strip())
        errors.append(f"{field}: {reason}" if field else reason)
        field = None
    return f"{header['prefix']}invalid arguments: " + "; ".join(errors)


async def argument_errors(ctx: Any, call_next: Any) -> Any:
    result = await call_next(ctx)
    if ctx.method != "tools/call":
        return result
    # The handler's result reaches the middleware as a model or, serialized already, as its wire dict.
    if isinstance(result, CallToolResult) and result.is_error:
        result.content = [TextContent(type="text", text=concise(c.text)) if isinstance(c, TextContent) else c
                          for c in result.content]
    elif isinstance(result, dict) and result.get("isError"):
        result["content"] = [{**c, "text": concise(c["text"])} if c.get("type") == "text" else c
                             for c in result.get("content", [])]
    return result
