"""A SharePoint document library or a OneDrive, read through Microsoft Graph's REST API and its delta feed.

Graph is spoken over HTTP with the project's guarded ``httpx`` client rather than ``msgraph-sdk``: that SDK is a
29 MB wheel unpacking to 133 MB in 16,748 files, with ``azure-identity`` and five Kiota packages, for the four
requests read here (a token, ``delta``, ``permissions``, ``content``), each a plain REST call.

The app signs in with its client credentials (``POST {login_url}/{tenant_id}/oauth2/v2.0/token``). The first run
enumerates the drive (``GET /drives/{drive_id}/root/delta``, following ``@odata.nextLink`` to its
``@odata.deltaLink``); later runs read the feed from the delta link the last run kept, which names only the items
changed, shared differently (``Prefer: deltashowsharingchanges``) or deleted (the ``deleted`` facet) since. A
file's version is its ``cTag`` (which changes with its content only): a new or changed file is downloaded
(``/content``, whose redirect to the pre-authenticated download URL is followed through the egress guard); a
deleted one is gone.

Permissions (``kinds.access``): each file's permissions (``GET .../items/{id}/permissions``, inherited ones
included) are a restriction: ``user:EMAIL``, ``group:EMAIL`` (or ``group:ID``), ``sitegroup:NAME`` (a SharePoint
group, such as ``sitegroup:HR Members``), ``link:organization``, ``link:anonymous``. The principals are kept with
each item, so a changed mapping reaches every document at the next run. A file whose permissions cannot be read is
not indexed, and asked again each run. A 429 or 503 is retried after its ``Retry-After`` (at most
``MAX_RETRY_AFTER_S``).

Usage::

    SharePoint().items(SharePointConfig(tenant_id="...", client_id="...", client_secret="...", drive_id="b!...",
                                        groups={"sitegroup:HR Members": "hr"}), ctx)
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any, ClassVar
from urllib.parse import quote

import httpx
from pydantic import Field, SecretStr, field_validator

from agentsearch.pipeline.security.transports import guarded_client
from agentsearch.pipeline.sources.fetch import FetchFailed
from agentsearch.pipeline.sources.kinds.access import Access, Changes, PrincipalMapping, SaasConfig, kept, unread
from agentsearch.pipeline.sources.kinds.base import Context, Item, ListingFailed, SourceConfig, http_url
from agentsearch.pipeline.sources.kinds.files import file_content, readable

MAX_RETRY_AFTER_S = 60
PREFER = "deltashowremovedasdeleted, deltatraversepermissiongaps, deltashowsharingchanges"


class Refused(Exception):
    """Graph answered an error: its status and its own code and message."""

    def __init__(self, status: int, said: str) -> None:
        super().__init__(f"HTTP {status} {said}".strip())
        self.status = status


class SharePointConfig(SaasConfig):
    tenant_id: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9.-]+$")
    client_id: str = Field(min_length=1, max_length=100)
    client_secret: SecretStr = Field(description="The app registration's client secret (write-only).")
    drive_id: str = Field(min_length=1, max_length=300, description="The library's or OneDrive's drive id.")
    url: str = Field("https://graph.microsoft.com/v1.0", max_length=2000, description="Graph's base URL.")
    login_url: str = Field("https://login.microsoftonline.com", max_length=2000, description="The token issuer.")

    @field_validator("url", "login_url")
    @classmethod
    def _url(cls, value: str) -> str:
        return http_url(value).rstrip("/")


class SharePoint:
    name: ClassVar[str] = "sharepoint"
    config_model: ClassVar[type[SourceConfig]] = SharePointConfig
    keeps_missing: ClassVar[bool] = False

    def items(self, config: SharePointConfig, ctx: Context) -> Iterator[Item]:
        mapping = PrincipalMapping.of(config)
        with guarded_client(ctx.fetcher.policy, timeout=ctx.timeout_s, follow_redirects=False) as client:
            graph = Graph(client, config)
            try:
                graph.sign_in()
                link = ctx.cursor.get("delta_link")
                full = link is None
                try:
                    changed, gone, link = graph.delta(link)
                except Refused as exc:
                    if exc.status != 410 or link is None:
                        raise
                    # The delta link expired (410 resyncRequired): the drive is enumerated again from the start.
                    full = True
                    changed, gone, link = graph.delta(None)
                withheld = list(ctx.cursor.get("withheld", []))
                for item_id in withheld:  # asked again each run: their permissions may be readable now
                    if item_id not in changed and item_id not in gone:
                        found = graph.item(item_id)
                        if found is not None:
                            changed[item_id] = found
            except (Refused, httpx.HTTPError) as exc:
                raise ListingFailed(f"microsoft graph: {_said(exc)}") from exc
            for key, state in ctx.previous.items():
                # After a whole enumeration (no delta link kept, or one expired) what it did not name is gone.
                if key not in changed and key not in gone and not full:
                    yield kept(key, state, mapping, "sharepoint file")
            withheld = []
            for entry in changed.values():
                item = self._file(graph, entry, mapping, ctx)
                if item is not None:
                    withheld += [item.key] if item.withhold else []
                    yield item
        # Once every item above was listed: the next run reads the feed from here (a failed run keeps the one it
        # started from).
        ctx.cursor.update(delta_link=link, withheld=withheld)

    def _file(self, graph: Graph, entry: dict[str, Any], mapping: PrincipalMapping, ctx: Context) -> Item | None:
        name = entry.get("name", entry["id"])
        if "file" not in entry or not readable(name):
            return None
        key, version = entry["id"], entry.get("cTag") or entry.get("eTag", "")
        url, label = entry.get("webUrl") or key, f"sharepoint file {name}"
        access = Access()
        try:
            principals = {p for permission in graph.permissions(key) for p in _principals(permission)}
        except (Refused, httpx.HTTPError) as exc:
            principals, access.unreadable = set(), _said(exc)
        access.restrictions = [principals]
        memo = {"name": name, "principals": sorted(principals)}
        known, groups = unread(mapping, access, label, key, version, url, ctx, memo)
        if known is not None:
            return known
        if int(entry.get("size") or 0) > ctx.max_item_bytes:
            return Item(key, version, url=url, error=f"{label}: {entry['size']} bytes, over the limit of "
                                                     f"{ctx.max_item_bytes}")
        try:
            data = graph.content(key, ctx)
        except (Refused, httpx.HTTPError, FetchFailed) as exc:
            return Item(key, version, url=url, error=f"{label}: {_said(exc)}")
        return Item(key, version, file_content(name, data), url=url, groups=groups, memo=memo)


class Graph:
    """The few Graph calls read, each with the app's token, 429 and 503 waited out by their Retry-After."""

    def __init__(self, client: httpx.Client, config: SharePointConfig) -> None:
        self.client, self.config, self.token = client, config, ""

    def sign_in(self) -> None:
        answer = self._send("POST", f"{self.config.login_url}/{self.config.tenant_id}/oauth2/v2.0/token", data={
            "grant_type": "client_credentials", "client_id": self.config.client_id,
            "client_secret": self.config.client_secret.get_secret_value(),
            "scope": f"{self.config.url.rsplit('/', 1)[0]}/.default"})
        self.token = answer.json()["access_token"]

    def get(self, url: str, **headers: str) -> dict[str, Any]:
        answer: dict[str, Any] = self._send("GET", url, headers={"Authorization": f"Bearer {self.token}",
                                                                 **headers}).json()
        return answer

    def delta(self, link: str | None) -> tuple[dict[str, dict[str, Any]], set[str], str]:
        url = link or f"{self.config.url}/drives/{quote(self.config.drive_id)}/root/delta"
        folded = Changes()
        while True:
            answer = self.get(url, Prefer=PREFER)
            for entry in answer.get("value", []):
                folded.note(entry["id"], None if "deleted" in entry else entry)
            if answer.get("@odata.deltaLink"):
                return folded.changed, folded.gone, answer["@odata.deltaLink"]
            url = answer["@odata.nextLink"]

    def item(self, item_id: str) -> dict[str, Any] | None:
        try:
            return self.get(self._item_url(item_id))
        except Refused as exc:
            if exc.status == 404:
                return None
            raise

    def permissions(self, item_id: str) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        url: str | None = f"{self._item_url(item_id)}/permissions"
        while url:
            answer = self.get(url)
            found.extend(answer.get("value", []))
            url = answer.get("@odata.nextLink")
        return found

    def content(self, item_id: str, ctx: Context) -> bytes:
        headers = {"Authorization": f"Bearer {self.token}"}
        with self.client.stream("GET", f"{self._item_url(item_id)}/content", headers=headers) as answer:
            if answer.status_code in (301, 302, 303, 307, 308) and "location" in answer.headers:
                location = answer.headers["location"]
            elif answer.status_code >= 400:
                answer.read()
                raise Refused(answer.status_code, _error(answer))
            else:  # served in place: read in chunks, cut at the item limit
                data = bytearray()
                for chunk in answer.iter_bytes():
                    data.extend(chunk)
                    if len(data) > ctx.max_item_bytes:
                        raise FetchFailed(f"over the limit of {ctx.max_item_bytes} bytes")
                return bytes(data)
        # The pre-authenticated download URL: read through the guard with the item limits, no token sent.
        return ctx.fetcher.get(location).data

    def _item_url(self, item_id: str) -> str:
        return f"{self.config.url}/drives/{quote(self.config.drive_id)}/items/{quote(item_id)}"

    def _send(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        for attempt in range(3):
            response = self.client.request(method, url, **kwargs)
            if response.status_code in (429, 503) and attempt < 2:
                time.sleep(min(float(response.headers.get("retry-after") or 2 ** attempt), MAX_RETRY_AFTER_S))
                continue
            if response.status_code >= 400:
                raise Refused(response.status_code, _error(response))
            return response
        raise AssertionError("unreachable")


def _principals(permission: dict[str, Any]) -> set[str]:
    found: set[str] = set()
    link = permission.get("link")
    if isinstance(link, dict) and link.get("scope") in ("organization", "anonymous"):
        found.add(f"link:{link['scope']}")
    for identity in [permission.get("grantedToV2") or {}, *(permission.get("grantedToIdentitiesV2") or [])]:
        for kind in ("user", "group", "siteUser", "siteGroup"):
            who = identity.get(kind)
            if not isinstance(who, dict):
                continue
            if kind == "siteGroup":
                found.add(f"sitegroup:{who.get('displayName', '')}")
            else:
                name = who.get("email") or who.get("loginName") or who.get("id") or ""
                found.add(f"{'group' if kind == 'group' else 'user'}:{str(name).lower()}")
    return found


def _error(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.reason_phrase
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        return f"{error.get('code', '')}: {error.get('message', '')}"
    # The token endpoint's own shape: {"error": "invalid_client", "error_description": "AADSTS7000215: ..."}
    return f"{error}: {str(body.get('error_description', '')).splitlines()[0]}" if error else response.reason_phrase


def _said(exc: Exception) -> str:
    return str(exc) if isinstance(exc, Refused | FetchFailed) else f"{type(exc).__name__}: {exc}"
