"""API-key authentication: every route but the probes and ``/metrics`` takes the caller from its key.

A key comes as ``Authorization: Bearer <key>`` or ``X-API-Key: <key>``; a request carrying two different keys (in
both headers, or one header twice) is refused rather than served as either user. Routes take the caller's user id as
a parameter and filter every row by it, so another user's id answers 404 exactly like a missing one. A key may be
limited (``agentsearch.pipeline.security.key_limits``): what each route needs of it is checked here, for every route at
once (``agentsearch.api.scopes``); an expired key is refused like a revoked one, saying it expired.

Usage (in a route)::

    @router.get("/v1/things/{thing_id}")
    def read_thing(thing_id: uuid.UUID, user_id: CurrentUser, request: Request): ...

    key_limits(request).collections      # in a listing: the only collections the key sees (None: all the user's)
"""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from agentsearch.api.scopes import authorize
from agentsearch.api.services import services_of
from agentsearch.api.session_auth import SESSION_STATE, session_grant, session_still_valid, session_user
from agentsearch.pipeline.platform.db import utcnow
from agentsearch.pipeline.security.key_limits import KeyLimits
from agentsearch.pipeline.security.users import KeyGrant, UserStore

# Where the request's key (its prefix, label and limits) rides along to the route (``key_grant``).
KEY_GRANT_STATE = "key_grant"

bearer = HTTPBearer(auto_error=False, description="An API key from `agentsearch users create NAME`.")
api_key_header = APIKeyHeader(name="X-API-Key", auto_error=False, description="The same key, in a header of its own.")


def _unauthorized(detail: str) -> HTTPException:
    return HTTPException(status_code=401, detail=detail, headers={"WWW-Authenticate": "Bearer"})


def _keys_sent(request: Request) -> set[str]:
    """Every key the request carries: each ``X-API-Key`` header and each ``Authorization: Bearer`` header. The
    security schemes above read only the first header of each name, so a second one would otherwise go unseen,
    and which of two keys counted would depend on which header a proxy put first."""
    keys = {value.strip() for value in request.headers.getlist("x-api-key") if value.strip()}
    for value in request.headers.getlist("authorization"):
        scheme, _, credentials = value.strip().partition(" ")
        if scheme.lower() == "bearer" and credentials.strip():
            keys.add(credentials.strip())
    return keys


def current_user(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    header_key: Annotated[str | None, Depends(api_key_header)],
) -> uuid.UUID:
    key = credentials.credentials if credentials is not None else header_key
    if len(_keys_sent(request)) > 1:
        raise _unauthorized("two different API keys were sent (in Authorization and X-API-Key, or in one of them "
                            "twice); send one")
    if not key:
        # The console signed in through single sign-on sends its session cookie instead
        # (src/agentsearch/api/session_auth.py).
        if (session_user_id := session_user(request)) is not None:
            setattr(request.state, KEY_GRANT_STATE, session_grant(session_user_id))
            return session_user_id
        raise _unauthorized("an API key is required: send 'Authorization: Bearer <key>' or 'X-API-Key: <key>'")
    # Looked up on every request (one indexed read of the key's digest), never remembered in the process: a key
    # an operator revokes stops working at once in every API process.
    grant = UserStore(services_of(request).db).grant(key)
    if grant is None:
        raise _unauthorized("unknown or revoked API key")
    if grant.limits.expired(utcnow()):
        raise _unauthorized(f"this API key expired at {grant.limits.expires_at:%Y-%m-%d %H:%M:%S} UTC; "
                            "use another key or ask for a new one")
    # Kept for a route that outlasts its request's check (an event stream), to ask again while it runs.
    request.state.api_key = key
    setattr(request.state, KEY_GRANT_STATE, grant)
    authorize(request, grant)
    return grant.user_id


def key_grant(request: Request) -> KeyGrant | None:
    """The key the request was authenticated with: its prefix, label and limits."""
    return getattr(request.state, KEY_GRANT_STATE, None)


def key_limits(request: Request) -> KeyLimits:
    """The limits of the key the request was authenticated with (none: every scope and collection)."""
    grant = key_grant(request)
    return grant.limits if grant is not None else KeyLimits()


def still_valid(request: Request, user_id: uuid.UUID) -> bool:
    """Whether the key the request was authenticated with still belongs to ``user_id`` (not revoked, not expired
    since): one indexed read, as the check on the way in."""
    key = getattr(request.state, "api_key", None)
    if key is None and getattr(request.state, SESSION_STATE, None):
        return session_still_valid(request, user_id)
    if not key:
        return False
    return UserStore(services_of(request).db).authenticate(key) == user_id


CurrentUser = Annotated[uuid.UUID, Depends(current_user)]
