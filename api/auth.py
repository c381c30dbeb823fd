"""API-key authentication: every route but the probes and ``/metrics`` takes the caller from its key.

A key comes as ``Authorization: Bearer <key>`` or ``X-API-Key: <key>``. Routes take the caller's user id as a
parameter and filter every row by it, so another user's id answers 404 exactly like a missing one.

Usage (in a route)::

    @router.get("/v1/things/{thing_id}")
    def read_thing(thing_id: uuid.UUID, user_id: CurrentUser, request: Request): ...
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from pipeline.users import UserStore, digest

# Remembering a verified key briefly keeps a database round trip off every request (the whole-job cache answers
# in a few milliseconds); the price is that a revoked key keeps working for at most this long in each API process.
VERIFIED_TTL_S = 10.0

bearer = HTTPBearer(auto_error=False, description="An API key from `agentsearch users create NAME`.")
api_key_header = APIKeyHeader(name="X-API-Key", auto_error=False, description="The same key, in a header of its own.")


class _VerifiedKeys:
    def __init__(self, ttl_s: float) -> None:
        self.ttl_s = ttl_s
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[uuid.UUID, float]] = {}

    def get(self, key_digest: str) -> uuid.UUID | None:
        with self._lock:
            entry = self._entries.get(key_digest)
            if entry is None or entry[1] < time.monotonic():
                self._entries.pop(key_digest, None)
                return None
            return entry[0]

    def put(self, key_digest: str, user_id: uuid.UUID) -> None:
        with self._lock:
            if len(self._entries) > 10_000:
                self._entries.clear()
            self._entries[key_digest] = (user_id, time.monotonic() + self.ttl_s)


_verified = _VerifiedKeys(VERIFIED_TTL_S)


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
    key_digest = digest(key)
    user_id = _verified.get(key_digest)
    if user_id is None:
        user_id = UserStore(request.app.state.services.db).authenticate(key)
        if user_id is None:
            raise _unauthorized("unknown or revoked API key")
        _verified.put(key_digest, user_id)
    return user_id


CurrentUser = Annotated[uuid.UUID, Depends(current_user)]
