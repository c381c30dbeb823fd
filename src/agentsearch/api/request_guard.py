"""Every JSON body passes one gate before a route sees it, and every validation error leaves without the input.

The gate (``GuardedRoute``) refuses values the service cannot keep (``agentsearch.pipeline.security.storable``: NUL
characters, lone surrogates, NaN and infinities, arrays and objects nested deeper than ``MAX_DEPTH``) with a 422 naming
each field, for every route at once: a per-route check would be forgotten on the next route. Depth is refused here,
before pydantic, a filter's compiler or the worker's JSON sees the body: each of them recurses per level, and a body
nested a few thousand deep made them fail with a RecursionError, a 500. The error handler answers in FastAPI's 422 shape
but drops the ``input`` each error carries by default: echoing a request back made a 150 MB body come back in the
answer, and a lone surrogate in the echo was itself what failed to encode.

Usage::

    router = APIRouter(route_class=GuardedRoute)
    app.add_exception_handler(RequestValidationError, validation_error)
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute

from agentsearch.pipeline.security.storable import NotStorable, loads_checked

# Enough to say what is wrong with a request; a body with thousands of errors is not listed to the end.
MAX_ERRORS = 50


def _is_json(request: Request) -> bool:
    content_type = request.headers.get("content-type", "")
    return content_type.split(";")[0].strip().lower().endswith(("/json", "+json"))


class GuardedRoute(APIRoute):
    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def guarded(request: Request) -> Response:
            if request.method in ("POST", "PUT", "PATCH") and _is_json(request):
                body = await request.body()
                if body:
                    try:
                        # Parsed once here; FastAPI then reads the same object from the request.
                        request._json = loads_checked(body, ("body",))
                    except NotStorable as exc:
                        raise RequestValidationError(
                            [{"loc": path, "msg": message, "type": "value_error"} for path, message in exc.problems]
                        ) from None
                    except (json.JSONDecodeError, UnicodeDecodeError):
                        pass  # FastAPI's own parse reports where the JSON is broken
            return await handler(request)

        return guarded


def _printable(value: Any) -> Any:
    # A message may quote a value; whatever it quotes must encode.
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode("utf-8")
    return value


async def validation_error(_request: Request, exc: RequestValidationError) -> JSONResponse:
    errors = [
        {"loc": [_printable(part) for part in error.get("loc", ())], "msg": _printable(error.get("msg", "")),
         "type": error.get("type", "value_error")}
        for error in exc.errors()[:MAX_ERRORS]
    ]
    return JSONResponse({"detail": errors}, status_code=422)
