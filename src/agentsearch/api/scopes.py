"""A route's need of the key that calls it, checked with the key itself.

``agentsearch.api.auth.current_user`` calls ``authorize`` for every request it authenticates, so no route that takes a
caller escapes the route table (``agentsearch.api.route_rules``, which declares each route's scope and role once), and a
route missing from it is refused (fail closed). A key short of the scope a route needs gets **403** naming it; a
collection or job outside the key's collections gets **404**, in the words a missing one gets. Listings are filtered by
the routes (``agentsearch.api.auth.key_limits``, ``KeyLimits.sees_job``).

Usage::

    authorize(request, grant)                     # in current_user: 403 / 404, or nothing
    need_of("POST", "/v1/search")                 # Need(scopes={"search"}, ...)
    limits.sees_job(job)                          # a listing's filter
"""

from __future__ import annotations

from fastapi import HTTPException, Request

from agentsearch.api.errors import not_found
from agentsearch.api.route_rules import Need, rule_of, template
from agentsearch.api.services import services_of
from agentsearch.pipeline.job.job_store import JobStore
from agentsearch.pipeline.security.key_limits import KeyLimits, uuid_or_none
from agentsearch.pipeline.security.users import KeyGrant


def need_of(method: str, path: str) -> Need | None:
    rule = rule_of(method, path)
    return rule.need if rule is not None else None


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

