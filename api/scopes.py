"""What each route needs of the key that calls it: one table for the whole API, checked with the key itself.

``api.auth.current_user`` calls ``authorize`` for every request it authenticates, so no route that takes a caller
escapes the table, and a route missing from it is refused (fail closed); ``tests/unit/api/test_key_scopes.py`` walks the
app's routes and fails for any route without an entry. A key short of the scope a route needs gets **403** naming
it; a collection or job outside the key's collections gets **404**, in the words a missing one gets. Listings are
filtered by the routes (``api.auth.key_limits``, ``KeyLimits.sees_job``).

Scopes: ``search`` submits searches and reads their jobs (status, results, events, artifacts, cancel) and sees the
collections it may search; ``read`` reads collections, documents, jobs and the user's configs; ``write`` changes
them. What reaches every collection of the user (agent configs, which may name any collection; webhooks, which hear
of every job; conversations and profile sets, whose turns and runs span collections; a new collection) is refused
to a key limited to collections. Key management needs a key without any limit, so a limited key cannot make a
broader one.

Usage::

    authorize(request, grant)                     # in current_user: 403 / 404, or nothing
    ROUTE_NEEDS[("POST", "/v1/search")]           # Need(scopes={"search"}, ...)
    limits.sees_job(job)                          # a listing's filter
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fastapi import HTTPException, Request

from api.errors import not_found
from api.services import services_of
from pipeline.job.store import JobStore
from pipeline.security.key_limits import KeyLimits, Scope, uuid_or_none
from pipeline.security.users import KeyGrant


@dataclass(frozen=True)
class Need:
    scopes: frozenset[Scope] = frozenset()  # any one of them suffices; empty: any valid key
    every_collection: bool = False  # reaches every collection of the user: refused to a key limited to some
    unlimited_key: bool = False  # key management: only a key without limits
    public: bool = False  # no key at all (probes, metrics, the console's static files)


def _need(*scopes: Scope, every_collection: bool = False) -> Need:
    return Need(frozenset(scopes), every_collection=every_collection)


PUBLIC = Need(public=True)
ANY_KEY = Need()
KEYS = Need(unlimited_key=True)
SEARCH = _need("search")
SEES = _need("search", "read")  # a collection's view and jobs: what a search key needs to search and read back
READ = _need("read")
WRITE = _need("write")
USER_READ = _need("read", every_collection=True)
USER_WRITE = _need("write", every_collection=True)

COLLECTION = "/v1/collections/{collection_id}"
JOB = "/v1/jobs/{job_id}"
WEBHOOK = "/v1/webhooks/{webhook_id}"
PROFILE_SET = "/v1/profile-sets/{set_id}"
TEAM = "/v1/teams/{team_id}"
ROUTE_NEEDS: dict[tuple[str, str], Need] = {
    ("GET", "/healthz"): PUBLIC,
    ("GET", "/readyz"): PUBLIC,
    ("GET", "/metrics"): PUBLIC,
    ("GET", "/"): PUBLIC,
    ("GET", "/console/{name}"): PUBLIC,
    # The tools call the routes below with the same key, each checked there.
    ("*", "/mcp"): ANY_KEY,
    ("GET", "/v1/me"): ANY_KEY,
    # Single sign-on: how a console session begins and ends (api/routes/sso.py); a session acts as a key of its
    # user without limits, but for key management (api/session_auth.py).
    ("GET", "/v1/auth/config"): PUBLIC,
    ("GET", "/v1/auth/login"): PUBLIC,
    ("GET", "/v1/auth/callback"): PUBLIC,
    ("POST", "/v1/auth/logout"): PUBLIC,
    ("POST", "/v1/keys"): KEYS,
    ("GET", "/v1/keys"): KEYS,
    ("DELETE", "/v1/keys/{prefix}"): KEYS,
    ("POST", "/v1/collections"): USER_WRITE,
    ("GET", "/v1/collections"): SEES,
    ("GET", COLLECTION): SEES,
    ("PATCH", COLLECTION): WRITE,
    ("POST", f"{COLLECTION}/documents"): WRITE,
    ("GET", f"{COLLECTION}/documents"): READ,
    ("GET", f"{COLLECTION}/documents/{{document_id}}"): READ,
    ("DELETE", f"{COLLECTION}/documents/{{document_id}}"): WRITE,
    ("POST", f"{COLLECTION}/files"): WRITE,
    ("GET", f"{COLLECTION}/agents"): READ,
    # The configs linked may name any collection of the user: wiring them is a change to every collection.
    ("PUT", f"{COLLECTION}/agents"): USER_WRITE,
    ("GET", "/v1/agents"): READ,
    ("POST", "/v1/agent-configs"): USER_WRITE,
    ("GET", "/v1/agent-configs"): USER_READ,
    ("GET", "/v1/agent-configs/{config_id}"): USER_READ,
    ("POST", "/v1/search"): SEARCH,
    ("GET", "/v1/jobs"): SEES,
    ("GET", JOB): SEES,
    ("DELETE", JOB): _need("search", "write"),
    ("GET", f"{JOB}/events"): SEES,
    ("GET", f"{JOB}/artifacts/{{filename}}"): SEES,
    ("POST", "/v1/conversations"): _need("search", "write", every_collection=True),
    ("GET", "/v1/conversations"): _need("search", "read", every_collection=True),
    ("GET", "/v1/conversations/{conversation_id}"): _need("search", "read", every_collection=True),
    ("DELETE", "/v1/conversations/{conversation_id}"): _need("search", "write", every_collection=True),
    ("POST", "/v1/profile-sets"): USER_WRITE,
    ("GET", "/v1/profile-sets"): USER_READ,
    ("GET", PROFILE_SET): USER_READ,
    ("DELETE", PROFILE_SET): USER_WRITE,
    ("POST", f"{PROFILE_SET}/runs"): _need("search", every_collection=True),
    ("GET", f"{PROFILE_SET}/runs"): USER_READ,
    ("POST", "/v1/webhooks"): USER_WRITE,
    ("GET", "/v1/webhooks"): USER_READ,
    ("GET", WEBHOOK): USER_READ,
    ("PATCH", WEBHOOK): USER_WRITE,
    ("POST", f"{WEBHOOK}/rotate-secret"): USER_WRITE,
    ("DELETE", WEBHOOK): USER_WRITE,
    ("GET", f"{WEBHOOK}/deliveries"): USER_READ,
    ("POST", f"{WEBHOOK}/deliveries/{{delivery_id}}/retry"): USER_WRITE,
    # A team is who reaches its collections: managing it is a change to every collection of the team.
    ("POST", "/v1/teams"): USER_WRITE,
    ("GET", "/v1/teams"): USER_READ,
    ("GET", TEAM): USER_READ,
    ("PUT", f"{TEAM}/members/{{member}}"): USER_WRITE,
    ("DELETE", f"{TEAM}/members/{{member}}"): USER_WRITE,
    ("GET", f"{TEAM}/groups"): USER_READ,
    ("PUT", f"{TEAM}/groups/{{group}}/members/{{member}}"): USER_WRITE,
    ("DELETE", f"{TEAM}/groups/{{group}}/members/{{member}}"): USER_WRITE,
    ("GET", f"{TEAM}/audit"): USER_READ,
}
# Routes FastAPI adds itself: the API's description, readable without a key.
FRAMEWORK_PATHS = frozenset({"/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"})
CONVERTER = re.compile(r"\{(\w+):\w+\}")


def template(path: str) -> str:
    """A route's path as the table and the OpenAPI document write it (``{document_id:path}`` -> ``{document_id}``)."""
    return CONVERTER.sub(r"{\1}", path)


def need_of(method: str, path: str) -> Need | None:
    method = "GET" if method.upper() == "HEAD" else method.upper()
    path = template(path)
    return ROUTE_NEEDS.get((method, path)) or ROUTE_NEEDS.get(("*", path))


def _forbidden(detail: str) -> HTTPException:
    return HTTPException(status_code=403, detail=detail)


def _held(limits: KeyLimits) -> str:
    return ", ".join(sorted(limits.scopes)) if limits.scopes is not None else "every scope"


def authorize(request: Request, grant: KeyGrant) -> None:
    """Refuse the request when the key may not make it: 403 naming what is needed, 404 for a collection or job
    outside the key's collections. A key without limits passes without a read."""
    limits = grant.limits
    if limits.unlimited:
        return
    route = request.scope.get("route")
    method, path = request.method, template(getattr(route, "path", request.url.path))
    need = need_of(method, path)
    if need is None:
        raise _forbidden(f"no scope is declared for {method} {path}; only a key without limits may call it")
    if need.unlimited_key:
        raise _forbidden("managing API keys needs a key without limits (no scopes, collections or expiry); "
                         f"this key has scopes: {_held(limits)}")
    if need.scopes and not any(limits.allows(scope) for scope in need.scopes):
        wanted = " or ".join(f"'{scope}'" for scope in sorted(need.scopes))
        raise _forbidden(f"this API key lacks the scope {wanted} that {method} {path} needs; "
                         f"its scopes: {_held(limits)}")
    if limits.collections is None:
        return
    if need.every_collection:
        raise _forbidden(f"{method} {path} reaches every collection of the user; this API key is limited to "
                         "some collections: it needs a key without a collection limit")
    _within_collections(request, limits)


def _within_collections(request: Request, limits: KeyLimits) -> None:
    params = request.path_params
    # A malformed id is left to the route's own validation.
    if (collection_id := uuid_or_none(params.get("collection_id"))) is not None and not limits.sees(collection_id):
        raise not_found("collection", params["collection_id"])
    if (job_id := uuid_or_none(params.get("job_id"))) is not None:
        job = JobStore(services_of(request).db).get(str(job_id))
        # Another user's job is left to the route, which answers 404 in the same words.
        if job is not None and not limits.sees_job(job):
            raise not_found("job", params["job_id"])

