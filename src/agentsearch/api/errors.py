"""Request errors in FastAPI's own 422 shape, so a client sees one format whether pydantic or a route refused, and
the one handler that turns a pipeline's refusal into its HTTP answer.

Usage::

    raise unprocessable(("body", "query"), "query must not be empty")
    raise not_found("collection", collection_id)
    app.add_exception_handler(Refusal, refusal_answer)     # a route lets a Refusal go; the client gets its answer
"""

from __future__ import annotations

from collections.abc import Sequence

from fastapi import HTTPException, Request, Response
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from agentsearch.api.request_guard import validation_error
from agentsearch.pipeline.refusal import Refusal


def unprocessable(loc: Sequence[str | int], msg: str, kind: str = "value_error") -> RequestValidationError:
    return RequestValidationError([{"loc": tuple(loc), "msg": msg, "type": kind}])


def from_validation_error(prefix: Sequence[str | int], exc: ValidationError) -> RequestValidationError:
    return RequestValidationError(
        [{"loc": (*prefix, *e["loc"]), "msg": e["msg"], "type": e["type"]} for e in exc.errors()]
    )


def not_found(what: str, ident: object) -> HTTPException:
    return HTTPException(status_code=404, detail=f"{what} {ident} not found")


async def refusal_answer(request: Request, exc: Refusal) -> Response:
    """The HTTP answer of a pipeline refusal: FastAPI's 422 with the fields at fault, or the status with its words,
    as a route's own ``RequestValidationError`` or ``HTTPException`` would be answered."""
    if exc.errors is not None:
        return await validation_error(request, RequestValidationError(exc.errors))
    return await http_exception_handler(request, HTTPException(status_code=exc.status, detail=exc.detail))
