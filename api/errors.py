"""Request errors in FastAPI's own 422 shape, so a client sees one format whether pydantic or a route refused."""

from __future__ import annotations

from collections.abc import Sequence

from fastapi import HTTPException
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError


def unprocessable(loc: Sequence[str | int], msg: str, kind: str = "value_error") -> RequestValidationError:
    return RequestValidationError([{"loc": tuple(loc), "msg": msg, "type": kind}])


def from_validation_error(prefix: Sequence[str | int], exc: ValidationError) -> RequestValidationError:
    return RequestValidationError(
        [{"loc": (*prefix, *e["loc"]), "msg": e["msg"], "type": e["type"]} for e in exc.errors()]
    )


def not_found(what: str, ident: object) -> HTTPException:
    return HTTPException(status_code=404, detail=f"{what} {ident} not found")
