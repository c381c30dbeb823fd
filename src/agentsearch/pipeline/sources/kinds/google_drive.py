"""Google Drive files (a user's drive, or a shared drive), read with ``google-api-python-client`` (Drive API v3)
through Drive's change feed.

The first run asks for the feed's start (``changes.getStartPageToken``), then lists every file
(``files.list``, ``nextPageToken``) with its checksum, edit time, size and sharing. Later runs read only the feed
from the token the last run kept (``changes.list`` with ``includeRemoved``, to its ``newStartPageToken``): a file
changed, shared differently, trashed or deleted is in it; nothing else is asked for. A file's version is its
``md5Checksum`` (a Google Doc's, which has none, its ``modifiedTime``): a new or changed file is downloaded
(``alt=media``), a Google Doc, Sheet or Slides exported as text (``EXPORTS``); a file removed or trashed is gone.

Permissions (``kinds.access``): a file's sharing (``permissions``: ``user:EMAIL``, ``group:EMAIL``,
``domain:NAME``, ``anyone``, each role reading it) is a restriction, so only a file whose sharing names a mapped
principal is indexed; a shared drive is its place (``drive:ID``). A sharing change is in the feed, so it reaches
the document at the next run; the principals are kept with each item, so a changed mapping reaches every document
at the next run too. A file whose ``permissions`` the account may not read is asked for them
(``permissions.list``); refused, it is not indexed, and asked again each run (``cursor["withheld"]``). A 429 (or a
403 ``rateLimitExceeded``) is retried after its ``Retry-After`` (at most ``MAX_RETRY_AFTER_S``), which the
library's own retries do not read.

Usage::

    GoogleDrive().items(GoogleDriveConfig(service_account='{"type": "service_account", ...}',
                                          subject="desk@example.org", groups={"domain:example.org": "staff"}), ctx)
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any, ClassVar

from pydantic import Field, SecretStr, field_validator, model_validator

from agentsearch.pipeline.sources.kinds.access import (
    Access,
    Changes,
    PrincipalMapping,
    SaasConfig,
    guard_host,
    kept,
    unread,
)
from agentsearch.pipeline.sources.kinds.base import Content, Context, Item, ListingFailed, SourceConfig, folder_url
from agentsearch.pipeline.sources.kinds.files import file_content, readable

PAGE = 100
MAX_RETRY_AFTER_S = 60
SCOPES = ["https://www.googleapis.com/auth/drive.readonly"]
FOLDER = "application/vnd.google-apps.folder"
EXPORTS = {"application/vnd.google-apps.document": ("text/plain", ".txt"),
           "application/vnd.google-apps.presentation": ("text/plain", ".txt"),
           "application/vnd.google-apps.spreadsheet": ("text/csv", ".csv")}
PERMISSION = "id,type,role,emailAddress,domain"
FILE = f"id,name,mimeType,md5Checksum,modifiedTime,size,trashed,driveId,webViewLink,permissions({PERMISSION})"


class GoogleDriveConfig(SaasConfig):
    service_account: SecretStr | None = Field(None, description="A service account's JSON key (write-only).")
    subject: str | None = Field(None, max_length=320, description="The user the service account acts for "
                                                                  "(domain-wide delegation).")
    token: SecretStr | None = Field(None, description="An OAuth access token instead of a service account.")
    url: str = Field("https://www.googleapis.com/drive/v3/", max_length=2000, description="The API's base URL.")
    drive_id: str | None = Field(None, max_length=200, description="A shared drive; none: the account's files.")
    max_items: int = Field(10_000, ge=1, le=1_000_000, description="Files listed at most on the first run.")

    _folder = field_validator("url")(folder_url)

    @model_validator(mode="after")
    def _credentials(self) -> GoogleDriveConfig:
        if (self.service_account is None) == (self.token is None):
            raise ValueError("give either service_account (a JSON key) or token")
        return self


class GoogleDrive:
    name: ClassVar[str] = "google_drive"
    config_model: ClassVar[type[SourceConfig]] = GoogleDriveConfig
    keeps_missing: ClassVar[bool] = False

    def items(self, config: GoogleDriveConfig, ctx: Context) -> Iterator[Item]:
        from googleapiclient.errors import Error as GoogleError
        from httplib2 import HttpLib2Error

        guard_host(config.url, ctx)
        mapping = PrincipalMapping.of(config)
        try:
            service = _service(config, ctx)
            scope = ({"corpora": "drive", "driveId": config.drive_id, "includeItemsFromAllDrives": True}
                     if config.drive_id else {})
            token = ctx.cursor.get("page_token")
            withheld: list[str] = list(ctx.cursor.get("withheld", []))
            changed: dict[str, dict[str, Any]] = {}
            gone: set[str] = set()
            if token is None:
                start = _call(service.changes().getStartPageToken(
                    supportsAllDrives=True, **({"driveId": config.drive_id} if config.drive_id else {})
                ))["startPageToken"]
                files = self._listing(service, config, scope, ctx)
            else:
                files = []
                changed, gone, start = self._changes(service, config, token)
            for file_id in withheld:  # asked again each run: their sharing may be readable now
                if file_id not in changed and file_id not in gone:
                    found = _got(service, file_id)
                    if found is not None:
                        changed[file_id] = found
            fresh = {f["id"]: f for f in files} | changed
            for key, state in ctx.previous.items():
                # After a whole listing (no token kept) what it did not name is gone.
                if key not in fresh and key not in gone and token is not None:
                    yield kept(key, state, mapping, "google drive file")
            withheld = []
            for file in fresh.values():
                item = self._file(service, file, mapping, ctx)
                if item is not None:
                    if item.withhold:
                        withheld.append(item.key)
                    yield item
        except (GoogleError, HttpLib2Error, OSError, ValueError) as exc:
            raise ListingFailed(f"google drive: {_said(exc)}") from exc
        # Once every item above was listed: the next run reads the feed from here (a failed run keeps the one it
        # started from).
        ctx.cursor.update(page_token=start, withheld=withheld)

    def _listing(self, service: Any, config: GoogleDriveConfig, scope: dict[str, Any], ctx: Context
                 ) -> list[dict[str, Any]]:
        files: list[dict[str, Any]] = []
        page = None
        while True:
            answer = _call(service.files().list(q="trashed = false", pageSize=PAGE, pageToken=page,
                                                fields=f"nextPageToken,files({FILE})", supportsAllDrives=True,
                                                **scope))
            files.extend(answer.get("files", []))
            page = answer.get("nextPageToken")
            if len(files) > config.max_items:
                ctx.partial = (f"google drive: more than {config.max_items} files (max_items): the rest not "
                               "listed, nothing removed")
                return files[:config.max_items]
            if not page:
                return files

    def _changes(self, service: Any, config: GoogleDriveConfig, token: str
                 ) -> tuple[dict[str, dict[str, Any]], set[str], str]:
        folded = Changes()
        while True:
            answer = _call(service.changes().list(
                pageToken=token, pageSize=PAGE, includeRemoved=True, supportsAllDrives=True,
                includeItemsFromAllDrives=True, **({"driveId": config.drive_id} if config.drive_id else {}),
                fields=f"nextPageToken,newStartPageToken,changes(changeType,removed,fileId,file({FILE}))"))
            for change in answer.get("changes", []):
                if change.get("changeType", "file") == "file":
                    file = change.get("file") or {}
                    folded.note(change["fileId"], None if change.get("removed") or file.get("trashed") else file)
            if answer.get("newStartPageToken"):
                return folded.changed, folded.gone, answer["newStartPageToken"]
            token = answer["nextPageToken"]

    def _file(self, service: Any, file: dict[str, Any], mapping: PrincipalMapping, ctx: Context) -> Item | None:
        from googleapiclient.errors import HttpError

        kind, name = file.get("mimeType", ""), file.get("name", file["id"])
        if kind == FOLDER or (kind not in EXPORTS and not readable(name)):
            return None
        key, version = file["id"], file.get("md5Checksum") or file.get("modifiedTime", "")
        url = file.get("webViewLink") or f"https://drive.google.com/file/d/{key}/view"
        label = f"google drive file {name}"
        place = {f"drive:{file['driveId']}"} if file.get("driveId") else set()
        access = Access(place=place)
        permissions = file.get("permissions")
        if permissions is None:  # not given to this account in the listing: asked for them
            try:
                permissions = _permissions(service, key)
            except HttpError as exc:
                access.unreadable = f"its sharing: {_said(exc)}"
        principals = set() if permissions is None else {_principal(p) for p in permissions}
        access.restrictions = [principals]
        memo = {"name": name, "place": sorted(place), "principals": sorted(principals)}
        known, groups = unread(mapping, access, label, key, version, url, ctx, memo)
        if known is not None:
            return known
        if int(file.get("size") or 0) > ctx.max_item_bytes:
            return Item(key, version, url=url, error=f"{label}: {file['size']} bytes, over the limit of "
                                                     f"{ctx.max_item_bytes}")
        try:
            if kind in EXPORTS:
                mime, suffix = EXPORTS[kind]
                data = _call(service.files().export(fileId=key, mimeType=mime))
                content = Content(f"{name}{suffix}", data, name, as_text=suffix == ".txt")
            else:
                content = file_content(name, _call(service.files().get_media(fileId=key, supportsAllDrives=True)))
        except HttpError as exc:
            return Item(key, version, url=url, error=f"{label}: {_said(exc)}")
        if len(content.data) > ctx.max_item_bytes:
            return Item(key, version, url=url, error=f"{label}: over the limit of {ctx.max_item_bytes} bytes")
        return Item(key, version, content, url=url, groups=groups, memo=memo)


def _service(config: GoogleDriveConfig, ctx: Context) -> Any:
    import google_auth_httplib2
    import httplib2
    from google.oauth2 import credentials as user_credentials, service_account
    from googleapiclient.discovery import build

    if config.service_account is not None:
        info = json.loads(config.service_account.get_secret_value())
        guard_host(str(info.get("token_uri", "https://oauth2.googleapis.com/token")), ctx)
        creds: Any = service_account.Credentials.from_service_account_info(info, scopes=SCOPES,
                                                                           subject=config.subject)
    else:
        assert config.token is not None
        creds = user_credentials.Credentials(config.token.get_secret_value())
    http = google_auth_httplib2.AuthorizedHttp(creds, http=httplib2.Http(timeout=int(ctx.timeout_s) or 1))
    return build("drive", "v3", http=http, client_options={"api_endpoint": config.url}, static_discovery=True,
                 cache_discovery=False)


def _call(request: Any) -> Any:
    """The request's answer, a 429 (or 403 rateLimitExceeded) waited out by its Retry-After, three times at most."""
    from googleapiclient.errors import HttpError

    for attempt in range(3):
        try:
            return request.execute(num_retries=0)
        except HttpError as exc:
            limited = exc.resp.status == 429 or (exc.resp.status == 403 and "ateLimitExceeded" in str(exc.content))
            if not limited or attempt == 2:
                raise
            time.sleep(min(float(exc.resp.get("retry-after") or 2 ** attempt), MAX_RETRY_AFTER_S))
    raise AssertionError("unreachable")


def _got(service: Any, file_id: str) -> dict[str, Any] | None:
    from googleapiclient.errors import HttpError

    try:
        found: dict[str, Any] = _call(service.files().get(fileId=file_id, fields=FILE, supportsAllDrives=True))
    except HttpError as exc:
        if exc.resp.status == 404:
            return None
        raise
    return None if found.get("trashed") else found


def _permissions(service: Any, file_id: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    page = None
    while True:
        answer = _call(service.permissions().list(fileId=file_id, pageToken=page, supportsAllDrives=True,
                                                  fields=f"nextPageToken,permissions({PERMISSION})"))
        found.extend(answer.get("permissions", []))
        page = answer.get("nextPageToken")
        if not page:
            return found


def _principal(permission: dict[str, Any]) -> str:
    kind = permission.get("type", "")
    if kind == "anyone":
        return "anyone"
    if kind == "domain":
        return f"domain:{permission.get('domain', '')}"
    return f"{kind}:{str(permission.get('emailAddress', '')).lower()}"


def _said(exc: Exception) -> str:
    from googleapiclient.errors import HttpError

    if isinstance(exc, HttpError):
        return f"HTTP {exc.resp.status} {getattr(exc, 'reason', '')}".strip()
    return f"{type(exc).__name__}: {exc}"
