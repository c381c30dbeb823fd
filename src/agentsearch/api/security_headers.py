"""Headers every answer of the API carries, whatever route (or error handler) made it.

``X-Content-Type-Options: nosniff``: a browser takes the ``Content-Type`` an answer states and never guesses another
from its bytes. Artifacts are what makes it matter: their bytes come from agents and the tools they call, and an
artifact stored as text or JSON whose bytes look like HTML must not be run as a page of the API's origin. Set on
every answer rather than per route, so a route added later has it too; a route that sets the header itself keeps
its own.

``attachment`` is the ``Content-Disposition`` of a download: the file name quoted so that no name (quotes,
semicolons, line breaks, characters outside Latin-1) can end the header's value early or fail to encode.

Usage::

    app.add_middleware(SecurityHeaders)
    Response(data, headers={"Content-Disposition": attachment("summary.txt")})
"""

from __future__ import annotations

import re
from urllib.parse import quote

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

HEADERS = {"X-Content-Type-Options": "nosniff"}
# What a file name may hold in the plain ``filename=`` parameter; anything else is replaced there and given
# exactly in ``filename*`` (RFC 6266, RFC 8187).
_PLAIN_NAME = re.compile(r"[^A-Za-z0-9._ -]")


def attachment(filename: str) -> str:
    """``attachment; filename="..."``, with ``filename*=UTF-8''...`` when the plain form cannot hold the name."""
    plain = _PLAIN_NAME.sub("_", filename).strip() or "download"
    if plain == filename:
        return f'attachment; filename="{plain}"'
    return f"attachment; filename=\"{plain}\"; filename*=UTF-8''{quote(filename, safe='')}"


class SecurityHeaders:
    """Adds ``HEADERS`` to every HTTP answer that does not set them itself."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in HEADERS.items():
                    if name.lower() not in headers:
                        headers.append(name, value)
            await send(message)

        await self.app(scope, receive, send_with_headers)
