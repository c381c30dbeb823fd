"""API-key authentication: every route but the probes and ``/metrics`` takes the caller from its key.

A key comes as ``Authorization: Bearer <key>`` or ``X-API-Key: <key>``. Routes take the caller's user id as a
parameter and filter every row by it, so another user's id answers 404 exactly like a missing one.

Usage (in a route)::

    @router.get("/v1/things/{thing_id}")
    def read_thing(thing_id: uuid.UUID, user_id: CurrentUser, request: Request): ...
"""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from pipeline.security.users import UserStore

bearer = HTTPBearer(auto_error=False, description="An API key from `agentsearch users create NAME`.")
api_key_header = APIKeyHeader(name="X-API-Key", auto_error=False, description="The same key, in a header of its own.")


def _unauthorized(detail: str) -> HTTPException:
    return HTTPException(status_code=401, detail=detail, headers={"WWW-Authenticate": "Bearer"})


def current_user(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    header_key: Annotated[str | None, Depends(api_key_header)],
) -> uuid.UUID:
    key = credentials.credentials if credentials is not None else header_key
    if credentials is not None and header_key and header_key != credentials.credentials:
        raise _unauthorized("two different API keys were sent (Authorization and X-API-Key); send one")
    if not key:
        raise _unauthorized("an API key is required: send 'Authorization: Bearer <key>' or 'X-API-Key: <key>'")
    # Looked up on every request (one indexed read of the key's digest), never remembered in the process: a key
    # an operator revokes stops working at once in every API process.
    user_id = UserStore(request.app.state.services.db).authenticate(key)
    if user_id is None:
        raise _unauthorized("unknown or revoked API key")
    return user_id


CurrentUser = Annotated[uuid.UUID, Depends(current_user)]
