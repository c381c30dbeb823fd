"""Request errors in FastAPI's own 422 shape, so a client sees one format whether pydantic or a route refused."""

from __future__ import annotations

from collections.abc import Sequence

from fastapi import HTTPException
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from pipeline.refusal import Refusal


def unprocessable(loc: Sequence[str | int], msg: str, kind: str = "value_error") -> RequestValidationError:
    return RequestValidationError([{"loc": tuple(loc), "msg": msg, "type": kind}])


def from_validation_error(prefix: Sequence[str | int], exc: ValidationError) -> RequestValidationError:
    return RequestValidationError(
        [{"loc": (*prefix, *e["loc"]), "msg": e["msg"], "type": e["type"]} for e in exc.errors()]
    )


def not_found(what: str, ident: object) -> HTTPException:
    return HTTPException(status_code=404, detail=f"{what} {ident} not found")


def http_error(refusal: Refusal) -> RequestValidationError | HTTPException:
    """The HTTP error of a pipeline refusal: FastAPI's 422 with the fields at fault, or the status with its words."""
    if refusal.errors is not None:
        return RequestValidationError(refusal.errors)
    return HTTPException(status_code=refusal.status, detail=refusal.detail)
