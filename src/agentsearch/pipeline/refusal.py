"""Why the service will not take a request, said so a client can act on it; the API turns it into its HTTP error.

A refusal is either a request with fields at fault (status 422, ``errors`` in FastAPI's own shape: ``loc``, ``msg``,
``type``, so a client sees one format whether pydantic or the pipeline refused), or a whole-request refusal with a
status and a ``detail`` (404 for what the caller may not see, 409 for a conflict). ``src/agentsearch/pipeline/`` knows
no HTTP framework, only these numbers.

Usage::

    raise invalid(("body", "query"), "query must not be empty")
    raise invalid_fields(("body", "search"), validation_error)      # one entry per pydantic error, prefixed
    raise missing("collection", collection_id)                      # 404 "collection ... not found"
    raise Refusal(409, "a job with this Idempotency-Key is being created")
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError


class Refusal(Exception):
    def __init__(self, status: int, detail: str, errors: list[dict[str, Any]] | None = None) -> None:
        super().__init__(detail)
        self.status, self.detail, self.errors = status, detail, errors


def invalid(loc: Sequence[str | int], msg: str, kind: str = "value_error") -> Refusal:
    return Refusal(422, msg, [{"loc": tuple(loc), "msg": msg, "type": kind}])


def invalid_fields(prefix: Sequence[str | int], exc: ValidationError) -> Refusal:
    errors = [{"loc": (*prefix, *e["loc"]), "msg": e["msg"], "type": e["type"]} for e in exc.errors()]
    return Refusal(422, str(exc), errors)


def missing(what: str, ident: object) -> Refusal:
    # The words of a thing that does not exist, also for one that exists but is someone else's.
    return Refusal(404, f"{what} {ident} not found")
