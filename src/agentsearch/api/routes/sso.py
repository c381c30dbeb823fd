"""Single sign-on routes: the console's sign-in at the operator's OpenID provider, and its sign-out.

``GET /v1/auth/config`` tells the console whether to offer it; ``GET /v1/auth/login`` sends the browser to the
provider; ``GET /v1/auth/callback`` is where the provider sends it back: the code is exchanged and the ID token
checked (``agentsearch.api.sso``), the user found or made by issuer and subject
(``agentsearch.pipeline.security.identities``), a session opened in the database
(``agentsearch.pipeline.security.sessions``) and its cookie set, then the browser goes to the console. ``POST
/v1/auth/logout`` ends the session server-side. None of them takes a key.

Usage::

    GET /v1/auth/config       -> {"sso": true, "login_url": "/v1/auth/login"}
    GET /v1/auth/login        -> 303 to the provider (state, nonce, code_challenge S256)
    GET /v1/auth/callback?code=...&state=...   -> 303 to / with the session cookie
    POST /v1/auth/logout  (X-CSRF-Token)       -> 204, the session ended
"""

from __future__ import annotations

import hmac
import logging
import uuid
from dataclasses import replace

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import RedirectResponse, Response
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from agentsearch.api.audit import actor_of
from agentsearch.api.services import AppServices
from agentsearch.api.session_auth import (
    CSRF_HEADER,
    clear_session_cookie,
    secure_cookies,
    session_token,
    set_session_cookie,
)
from agentsearch.api.sso import LOGIN_TTL_S, OidcClient, PendingLogin, PendingLogins, SignInError
from agentsearch.pipeline.platform.settings import Settings
from agentsearch.pipeline.security.audit import record
from agentsearch.pipeline.security.identities import IdentityStore, groups_in
from agentsearch.pipeline.security.sessions import SessionStore, csrf_matches
from agentsearch.pipeline.services import Services

router = APIRouter(tags=["single sign-on"])
log = logging.getLogger("agentsearch.sso")

LOGIN_COOKIE = "agentsearch_login"
CALLBACK_PATH = "/v1/auth/callback"


class SsoConfigOut(BaseModel):
    sso: bool
    login_url: str | None


def _enabled(settings: Settings) -> bool:
    return bool(settings.oidc_issuer and settings.oidc_client_id)


def _client(settings: Settings) -> OidcClient:
    if not _enabled(settings):
        raise HTTPException(status_code=404, detail="single sign-on is not configured on this server")
    return OidcClient(settings)


def _redirect_uri(request: Request, settings: Settings) -> str:
    return settings.oidc_redirect_url or str(request.url_for("sso_callback"))


def _next_path(value: str | None) -> str:
    # Only a path of this server: an address elsewhere would make the sign-in an open redirect.
    return value if value and value.startswith("/") and not value.startswith(("//", "/\\")) else "/"


@router.get("/v1/auth/config", response_model=SsoConfigOut)
def sso_config(services: AppServices) -> SsoConfigOut:
    """Whether the console offers single sign-on, and where it starts."""
    enabled = _enabled(services.settings)
    return SsoConfigOut(sso=enabled, login_url="/v1/auth/login" if enabled else None)


@router.get("/v1/auth/login", status_code=303)
async def sso_login(request: Request, services: AppServices,
                    next: str | None = None) -> Response:  # noqa: A002 - the query's name
    """To the provider's sign-in, with a new state, nonce and PKCE code challenge."""
    client = _client(services.settings)
    login = PendingLogin.new(_redirect_uri(request, services.settings), _next_path(next))
    try:
        url = await run_in_threadpool(client.authorization_url, login)
    except SignInError as exc:
        raise HTTPException(status_code=exc.status, detail=exc.detail) from None
    PendingLogins(services.settings).put(login)
    response = RedirectResponse(url, status_code=303)
    # The state, bound to this browser: a callback carrying another browser's state signs nobody in here.
    response.set_cookie(LOGIN_COOKIE, login.state, max_age=LOGIN_TTL_S, path=CALLBACK_PATH, httponly=True,
                        secure=secure_cookies(request), samesite="lax")
    return response


def _refused(status: int, detail: str) -> HTTPException:
    log.info("single sign-on refused: %s", detail)
    return HTTPException(status_code=status, detail=detail)


@router.get(CALLBACK_PATH, name="sso_callback")
async def sso_callback(request: Request, services: AppServices, code: str | None = None, state: str | None = None,
                       error: str | None = None) -> Response:
    """The provider's answer: the session opened and its cookie set, or 400 / 401 saying why not."""
    settings = services.settings
    client = _client(settings)
    if error:
        raise _refused(401, f"the identity provider did not sign you in: {error[:100]}")
    if not code or not state:
        raise _refused(400, "the callback needs the provider's code and state; start the sign-in again")
    started = request.cookies.get(LOGIN_COOKIE)
    if not started or not hmac.compare_digest(started.encode(), state.encode()):
        raise _refused(400, "the sign-in's state does not match the one this browser started with; "
                            "start the sign-in again")
    login = PendingLogins(settings).take(state)
    if login is None:
        raise _refused(400, "this sign-in's state is unknown, used or expired; start the sign-in again")
    try:
        claims = await run_in_threadpool(client.sign_in, code, login)
    except SignInError as exc:
        raise _refused(exc.status, exc.detail) from None
    user_id = await run_in_threadpool(IdentityStore(services.db).sign_in, client.issuer, claims,
                                      settings.oidc_groups_claim)
    token = await run_in_threadpool(SessionStore(services.db).open, user_id, settings.session_ttl_s)
    await run_in_threadpool(_audit_sign_in, request, services, user_id, client.issuer, claims)
    response = RedirectResponse(login.next, status_code=303)
    set_session_cookie(response, request, token)
    response.delete_cookie(LOGIN_COOKIE, path=CALLBACK_PATH, httponly=True, secure=secure_cookies(request),
                           samesite="lax")
    return response


def _audit_sign_in(request: Request, services: Services, user_id: uuid.UUID, issuer: str, claims: dict) -> None:
    """The sign-in in the trail: who (the user the provider's subject is), from where, with which groups (they
    count as team groups of the same name from now on)."""
    settings = services.settings
    actor = replace(actor_of(request), user_id=user_id, key_prefix="session")
    with services.db.session() as s:
        record(s, actor, "session.sign_in", target=("user", user_id),
               details={"issuer": issuer, "groups": groups_in(claims, settings.oidc_groups_claim)})


@router.post("/v1/auth/logout", status_code=204)
def sso_logout(request: Request, services: AppServices) -> Response:
    """The session ended server-side (its cookie opens nothing any more, wherever a copy of it is) and the cookie
    cleared. A live session's sign-out needs its CSRF token, as every change made by cookie."""
    token = session_token(request)
    sessions = SessionStore(services.db)
    if token is not None and sessions.user_of(token) is not None:
        if not csrf_matches(token, request.headers.get(CSRF_HEADER)):
            raise HTTPException(status_code=403, detail=f"signing out needs the {CSRF_HEADER} header of GET /v1/me")
        sessions.end(token)
    response = Response(status_code=204)
    clear_session_cookie(response, request)
    return response
