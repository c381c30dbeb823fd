"""The console's session cookie as a caller's credential, beside API keys (``agentsearch.api.auth.current_user``).

A request without a key but with the session cookie acts as the session's user with a key of no limits, except
that it may not manage API keys: a key outlives the session, so a stolen cookie must not become one (403). A
request that may change something (any method but GET, HEAD and OPTIONS) by cookie must carry the session's CSRF
token in ``X-CSRF-Token`` (403 without it): the browser sends the cookie with a form another site posts, but only a
page of this origin can read the token (from ``GET /v1/me``). A request with a key is never asked for it.

Usage::

    user_id = session_user(request)      # in current_user when no key came: the user, or None (no cookie)
    set_session_cookie(response, request, token)
"""

from __future__ import annotations

import uuid

from fastapi import HTTPException, Request, Response

from agentsearch.api.scopes import need_of, template
from agentsearch.api.services import services_of
from agentsearch.pipeline.security.key_limits import KeyLimits
from agentsearch.pipeline.security.sessions import SessionStore, csrf_matches
from agentsearch.pipeline.security.users import KeyGrant

CSRF_HEADER = "X-CSRF-Token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# Where the session token rides along to /v1/me (its CSRF token) and to a stream that asks again while it runs.
SESSION_STATE = "session_token"
SESSION_LABEL = "console session (single sign-on)"


def session_token(request: Request) -> str | None:
    return request.cookies.get(services_of(request).settings.session_cookie_name) or None


def secure_cookies(request: Request) -> bool:
    """Secure as configured, else when the request came over https (uvicorn reads a trusted proxy's
    X-Forwarded-Proto into the scheme)."""
    configured = services_of(request).settings.session_cookie_secure
    return configured if configured is not None else request.url.scheme == "https"


def set_session_cookie(response: Response, request: Request, token: str) -> None:
    settings = services_of(request).settings
    response.set_cookie(settings.session_cookie_name, token, max_age=settings.session_ttl_s, path="/",
                        httponly=True, secure=secure_cookies(request), samesite=settings.session_cookie_samesite)


def clear_session_cookie(response: Response, request: Request) -> None:
    settings = services_of(request).settings
    response.delete_cookie(settings.session_cookie_name, path="/", httponly=True, secure=secure_cookies(request),
                           samesite=settings.session_cookie_samesite)


def session_user(request: Request) -> uuid.UUID | None:
    """The session cookie's user with the checks above; None when the request carries no session cookie; 401 for
    a session that ended or expired."""
    token = session_token(request)
    if token is None:
        return None
    user_id = SessionStore(services_of(request).db).user_of(token)
    if user_id is None:
        raise HTTPException(status_code=401, detail="the console session ended or expired; sign in again")
    route = request.scope.get("route")
    need = need_of(request.method, template(getattr(route, "path", request.url.path)))
    if need is not None and need.unlimited_key:
        raise HTTPException(status_code=403, detail="managing API keys needs an API key without limits, not a "
                                                    "console session")
    if request.method.upper() not in SAFE_METHODS and not csrf_matches(token, request.headers.get(CSRF_HEADER)):
        raise HTTPException(status_code=403, detail=f"a change made with the console's session needs the "
                                                    f"{CSRF_HEADER} header of GET /v1/me")
    setattr(request.state, SESSION_STATE, token)
    return user_id


def session_grant(user_id: uuid.UUID) -> KeyGrant:
    """What a session may do, as a key: everything its user may (no limits), key management apart."""
    return KeyGrant(user_id, prefix="", label=SESSION_LABEL, limits=KeyLimits())


def csrf_token(request: Request) -> str | None:
    """The CSRF token of the request's session; None for a request made with a key."""
    token = getattr(request.state, SESSION_STATE, None)
    return SessionStore.csrf_token(token) if token else None


def session_still_valid(request: Request, user_id: uuid.UUID) -> bool:
    token: str | None = getattr(request.state, SESSION_STATE, None)
    if not token:
        return False
    return SessionStore(services_of(request).db).user_of(token) == user_id
