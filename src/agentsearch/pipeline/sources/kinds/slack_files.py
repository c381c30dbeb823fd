"""The files shared in a Slack channel's messages and threads: each one an item of its own, read through the parsers
as an upload is.

A file is named by its channel, the day of the message that shared it, and its ID (``C0GENERAL1/2026-11-28/F0ROTA``),
so that it lives and goes with its day: when the day is read again and the file is no longer in it (the message
deleted, the file removed), its document is removed. Its version is its ``edit_timestamp`` (else ``created``) and
``size``: an unchanged file is not downloaded again. A file whose listed size is over ``max_item_bytes`` is a failed
item, never downloaded; its bytes are read from ``url_private_download`` with the token (not sent on to another
host a redirect names), cut at the same limit. A
deleted file (``mode: tombstone``), one hosted elsewhere (``is_external``: a Google Drive file shared in Slack, for
its own source) and one of a format no parser reads are left out.

Usage::

    yield from shared_files(message["files"], "C0GENERAL1/2026-11-28", token, groups, "slack #general", ctx)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from agentsearch.pipeline.sources.fetch import FetchFailed
from agentsearch.pipeline.sources.kinds.base import Context, Item
from agentsearch.pipeline.sources.kinds.files import file_content, readable


def shared_files(files: list[dict[str, Any]], day_key: str, token: str, groups: list[str] | None, label: str,
                 ctx: Context) -> Iterator[Item]:
    seen: set[str] = set()
    for file in files:
        fid, name = str(file.get("id") or ""), str(file.get("name") or file.get("title") or "")
        download = file.get("url_private_download") or file.get("url_private")
        if (not fid or fid in seen or file.get("mode") == "tombstone" or file.get("is_external") or not download
                or not readable(name)):
            continue
        seen.add(fid)
        key = f"{day_key}/{fid}"
        version = f"{file.get('edit_timestamp') or file.get('created') or ''}:{file.get('size', '')}"
        url = str(file.get("permalink") or download)
        before = ctx.previous.get(key)
        if before is not None and before.get("version") == version:
            yield Item(key, version, url=url, groups=groups, memo=before.get("memo", {}))
            continue
        if int(file.get("size") or 0) > ctx.max_item_bytes:
            yield Item(key, version, url=url, error=f"{label}: file {name}: {file['size']} bytes, over the limit of "
                                                    f"{ctx.max_item_bytes}")
            continue
        try:
            fetched = ctx.fetcher.send("GET", str(download), {"Authorization": f"Bearer {token}"})
        except FetchFailed as exc:
            yield Item(key, version, url=url, error=f"{label}: file {name}: {exc}")
            continue
        if fetched.content_type.startswith("text/html") and not name.lower().endswith((".html", ".htm")):
            # Slack answers a download it refuses (the token lacking files:read) with its sign-in page, not an error.
            yield Item(key, version, url=url, error=f"{label}: file {name}: answered with a web page, not the file "
                                                    "(is files:read granted?)")
            continue
        yield Item(key, version, file_content(name, fetched.data), url=url, groups=groups)
