"""What each route needs, declared once: the key's scope (``agentsearch.api.scopes``) and the caller's role
(``agentsearch.api.roles``).

One line per route of the app, keyed by its method and path as the OpenAPI document writes them. ``need`` is what the
calling key must hold, checked in ``agentsearch.api.auth.current_user`` for every request it authenticates; ``role`` is
what the caller must hold over a collection, job or team the route reaches (in its path, or a collection in its body),
read by ``Reach`` as the route finds it. A route reaching nothing of a team's has no role. The console's ``roles.js``
names the role of each action it offers as this table has it (``tests/unit/api/test_console_files.py``).

A route missing from the table is refused to a limited key, and reaches only what its caller owns (fail closed);
``tests/unit/api/test_key_scopes.py`` walks the app's routes and fails for any route without a line here, and
``tests/unit/api/test_roles.py`` for a route reaching a collection or job without a role.

Scopes: ``search`` submits searches and reads their jobs (status, results, events, artifacts, cancel) and sees the
collections it may search; ``read`` reads collections, documents, jobs and the user's configs; ``write`` changes
them. What reaches every collection of the user (agent configs, which may name any collection; webhooks, which hear
of every job; conversations and profile sets, whose turns and runs span collections; a new collection) is refused
to a key limited to collections. Key management needs a key without any limit, so a limited key cannot make a
broader one.

Roles: the owner of a personal collection holds every role; a team member holds its own
(``agentsearch.pipeline.security.roles``).

Usage::

    rule_of("POST", "/v1/collections/{collection_id}/documents")   # RouteRule(need=WRITE, role="editor")
    rule_of("HEAD", "/v1/collections").need                         # Need(scopes={"search", "read"})
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agentsearch.pipeline.security.groups import GROUP_MANAGER
from agentsearch.pipeline.security.key_limits import Scope
from agentsearch.pipeline.security.roles import Role


@dataclass(frozen=True)
class Need:
    """What the calling key must hold."""

    scopes: frozenset[Scope] = frozenset()  # any one of them suffices; empty: any valid key
    every_collection: bool = False  # reaches every collection of the user: refused to a key limited to some
    unlimited_key: bool = False  # key management: only a key without limits
    public: bool = False  # no key at all (probes, metrics, the console's static files)


@dataclass(frozen=True)
class RouteRule:
    """A route's need of the key and, when it reaches a collection, job or team, the role it needs there."""

    need: Need
    role: Role | None = None


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
SOURCES = f"{COLLECTION}/sources"
SOURCE = f"{SOURCES}/{{source_id}}"
R = RouteRule
ROUTE_RULES: dict[tuple[str, str], RouteRule] = {
    ("GET", "/healthz"): R(PUBLIC),
    ("GET", "/readyz"): R(PUBLIC),
    ("GET", "/metrics"): R(PUBLIC),
    ("GET", "/"): R(PUBLIC),
    ("GET", "/console/{name}"): R(PUBLIC),
    # The tools call the routes below with the same key, each checked there.
    ("*", "/mcp"): R(ANY_KEY),
    ("GET", "/v1/me"): R(ANY_KEY),
    # Single sign-on: how a console session begins and ends (src/agentsearch/api/routes/sso.py); a session acts as a key
    # of its user without limits, but for key management (src/agentsearch/api/session_auth.py).
    ("GET", "/v1/auth/config"): R(PUBLIC),
    ("GET", "/v1/auth/login"): R(PUBLIC),
    ("GET", "/v1/auth/callback"): R(PUBLIC),
    ("POST", "/v1/auth/logout"): R(PUBLIC),
    ("POST", "/v1/keys"): R(KEYS),
    ("GET", "/v1/keys"): R(KEYS),
    ("DELETE", "/v1/keys/{prefix}"): R(KEYS),
    # The team named in the body: adding a collection to a team is its admin's.
    ("POST", "/v1/collections"): R(USER_WRITE, "admin"),
    ("GET", "/v1/collections"): R(SEES),
    ("GET", COLLECTION): R(SEES, "viewer"),
    ("PATCH", COLLECTION): R(WRITE, "editor"),
    ("POST", f"{COLLECTION}/documents"): R(WRITE, "editor"),
    ("GET", f"{COLLECTION}/documents"): R(READ, "viewer"),
    ("GET", f"{COLLECTION}/documents/{{document_id}}"): R(READ, "viewer"),
    ("DELETE", f"{COLLECTION}/documents/{{document_id}}"): R(WRITE, "editor"),
    ("POST", f"{COLLECTION}/files"): R(WRITE, "editor"),
    # A collection's sources (src/agentsearch/api/routes/sources.py): its editors manage them and start their runs.
    ("POST", f"{SOURCES}"): R(WRITE, "editor"),
    ("GET", f"{SOURCES}"): R(READ, "viewer"),
    ("GET", SOURCE): R(READ, "viewer"),
    ("PATCH", SOURCE): R(WRITE, "editor"),
    ("DELETE", SOURCE): R(WRITE, "editor"),
    ("POST", f"{SOURCE}/runs"): R(WRITE, "editor"),
    ("GET", f"{SOURCE}/runs"): R(READ, "viewer"),
    # The kinds and their config schemas (src/agentsearch/api/routes/source_kinds.py): no collection's data.
    ("GET", "/v1/source-kinds"): R(READ),
    # Its quality (src/agentsearch/api/routes/quality.py): every member reads the set and the runs; its editors make,
    # edit and run the set and stage changes (a viewer cannot); how far a staged change may lower it is its admins'.
    ("POST", f"{COLLECTION}/eval-sets"): R(WRITE, "editor"),
    ("GET", f"{COLLECTION}/eval-sets"): R(READ, "viewer"),
    ("POST", f"{COLLECTION}/eval-sets/questions"): R(WRITE, "editor"),
    ("DELETE", f"{COLLECTION}/eval-sets/questions/{{question_id}}"): R(WRITE, "editor"),
    ("POST", f"{COLLECTION}/eval-sets/refresh"): R(WRITE, "editor"),
    ("POST", f"{COLLECTION}/eval-runs"): R(WRITE, "editor"),
    ("GET", f"{COLLECTION}/eval-runs"): R(READ, "viewer"),
    ("GET", f"{COLLECTION}/search-settings"): R(READ, "viewer"),
    ("PUT", f"{COLLECTION}/search-settings"): R(WRITE, "editor"),
    ("PUT", f"{COLLECTION}/quality-tolerance"): R(WRITE, "admin"),
    ("GET", f"{COLLECTION}/agents"): R(READ, "viewer"),
    # The configs linked may name any collection of the user: wiring them is a change to every collection.
    ("PUT", f"{COLLECTION}/agents"): R(USER_WRITE, "editor"),
    ("GET", "/v1/agents"): R(READ),
    ("POST", "/v1/agent-configs"): R(USER_WRITE),
    ("GET", "/v1/agent-configs"): R(USER_READ),
    ("GET", "/v1/agent-configs/{config_id}"): R(USER_READ),
    # The collections named in the body.
    ("POST", "/v1/search"): R(SEARCH, "viewer"),
    ("GET", "/v1/jobs"): R(SEES),
    # Another member's job; the submitter's own needs only to be seen (``Access.job``).
    ("GET", JOB): R(SEES, "viewer"),
    ("DELETE", JOB): R(_need("search", "write"), "editor"),
    ("GET", f"{JOB}/events"): R(SEES, "viewer"),
    ("GET", f"{JOB}/artifacts/{{filename}}"): R(SEES, "viewer"),
    # Whoever reads a job may rate its answer (a search key too: the MCP tool's result is rated with it).
    ("POST", f"{JOB}/feedback"): R(_need("search", "write"), "viewer"),
    # A collection's feedback by week, with its askers' questions and comments: for its admins.
    ("GET", f"{COLLECTION}/feedback"): R(READ, "admin"),
    ("POST", "/v1/conversations"): R(_need("search", "write", every_collection=True)),
    ("GET", "/v1/conversations"): R(_need("search", "read", every_collection=True)),
    ("GET", "/v1/conversations/{conversation_id}"): R(_need("search", "read", every_collection=True)),
    ("DELETE", "/v1/conversations/{conversation_id}"): R(_need("search", "write", every_collection=True)),
    ("POST", "/v1/profile-sets"): R(USER_WRITE, "viewer"),
    ("GET", "/v1/profile-sets"): R(USER_READ),
    ("GET", PROFILE_SET): R(USER_READ),
    ("DELETE", PROFILE_SET): R(USER_WRITE),
    ("POST", f"{PROFILE_SET}/runs"): R(_need("search", every_collection=True)),
    ("GET", f"{PROFILE_SET}/runs"): R(USER_READ),
    # A webhook of a collection hears of every member's jobs over it.
    ("POST", "/v1/webhooks"): R(USER_WRITE, "editor"),
    ("GET", "/v1/webhooks"): R(USER_READ),
    ("GET", WEBHOOK): R(USER_READ),
    ("PATCH", WEBHOOK): R(USER_WRITE),
    ("POST", f"{WEBHOOK}/rotate-secret"): R(USER_WRITE),
    ("DELETE", WEBHOOK): R(USER_WRITE),
    ("GET", f"{WEBHOOK}/deliveries"): R(USER_READ),
    ("POST", f"{WEBHOOK}/deliveries/{{delivery_id}}/retry"): R(USER_WRITE),
    # A team is who reaches its collections: managing it is a change to every collection of the team. Every member
    # reads the team in the path; who did what in it is for its admins.
    ("POST", "/v1/teams"): R(USER_WRITE),
    ("GET", "/v1/teams"): R(USER_READ),
    ("GET", TEAM): R(USER_READ, "viewer"),
    ("PUT", f"{TEAM}/members/{{member}}"): R(USER_WRITE),
    ("DELETE", f"{TEAM}/members/{{member}}"): R(USER_WRITE),
    # Its document groups: every member reads those it holds (an admin all, with their members); who is in one is
    # changed by ``agentsearch.pipeline.security.groups`` alone, which holds the operator's command to the same rule.
    ("GET", f"{TEAM}/groups"): R(USER_READ, "viewer"),
    ("PUT", f"{TEAM}/groups/{{group}}/members/{{member}}"): R(USER_WRITE, GROUP_MANAGER),
    ("DELETE", f"{TEAM}/groups/{{group}}/members/{{member}}"): R(USER_WRITE, GROUP_MANAGER),
    ("GET", f"{TEAM}/audit"): R(USER_READ, "admin"),
}
# Routes FastAPI adds itself: the API's description, readable without a key.
FRAMEWORK_PATHS = frozenset({"/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"})
CONVERTER = re.compile(r"\{(\w+):\w+\}")


def template(path: str) -> str:
    """A route's path as the table and the OpenAPI document write it (``{document_id:path}`` -> ``{document_id}``)."""
    return CONVERTER.sub(r"{\1}", path)


def rule_of(method: str, path: str) -> RouteRule | None:
    """The route's line (HEAD read as GET, a path converter dropped), or None for a route the table lacks."""
    method = "GET" if method.upper() == "HEAD" else method.upper()
    path = template(path)
    return ROUTE_RULES.get((method, path)) or ROUTE_RULES.get(("*", path))
