"""Slack channels' messages, read with ``slack-sdk``'s ``WebClient``: one document per channel and day (UTC).

Each run lists the channels (``conversations.list``, public and private, archived left out, following
``response_metadata.next_cursor``); those the token's account is a member of (or those named in ``channels``) are
read. A channel's change feed is its history (``conversations.history``) listed from a midnight (UTC): on the first
run ``since_days`` ago; after it, the earlier of the newest message stored and ``thread_days`` ago. Each day it
holds is whole, and is compared with what the last run saw of it (``_signature``: each message's text, edit,
files, and its thread's ``reply_count`` and ``latest_reply``): an unchanged day is not read further; a changed or
new one has its threads read (``conversations.replies``, paginated) and is rendered again, each thread's replies
under their parent, and stored when its text changed. A day before the listing's first is kept as it was; a day
from it on no longer in the history (its messages deleted) is gone; so is a channel archived, deleted or left.

Threads: Slack does not put a reply in the channel's history; it moves its parent's ``latest_reply``. A reply to an
old thread is therefore found by listing the parents of the last ``thread_days`` (default 14) each run, not only
the messages after the newest stored: one history request per channel and 200 messages of that window, and
``conversations.replies`` only for the days whose threads moved. A reply to a thread whose parent is older than
``thread_days`` is not seen until that day is read again (a later edit within the window, a bigger
``thread_days``). Files shared in the day's messages and replies are items of their own (``kinds.slack_files``),
read through the parsers with the size limit of every kind, and go with their day.

Permissions (``kinds.access``): a public channel's place is ``channel:ID`` and ``#name``; a private channel is a
restriction to ``channel:ID``, ``#name`` and each member's ``user:ID`` (``conversations.members``), so a member
added or removed in Slack changes its documents' groups at the next run. A private channel whose members cannot be
read (a scope missing) is not indexed. A 429 is retried after its ``Retry-After`` (at most ``MAX_RETRY_AFTER_S``).

Not read: direct messages, canvases, files hosted elsewhere (``is_external``); an edit or a deletion of a message
older than the listing's first day is seen only when its day is read again.

Usage::

    Slack().items(SlackConfig(token="xoxb-...", channels=["#general"], groups={"#payroll": "hr"}), ctx)
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, ClassVar

from pydantic import Field, SecretStr, field_validator

from agentsearch.pipeline.sources.kinds.access import Access, PrincipalMapping, SaasConfig, guard_host
from agentsearch.pipeline.sources.kinds.base import Content, Context, Item, ListingFailed, SourceConfig, folder_url
from agentsearch.pipeline.sources.kinds.permissions import Unmapped
from agentsearch.pipeline.sources.kinds.slack_files import shared_files

PAGE = 200
MAX_RETRY_AFTER_S = 60
DAY_S = 86_400


class SlackConfig(SaasConfig):
    token: SecretStr = Field(description="A bot or user token (xoxb-, xoxp-) with the channels' read and history "
                                         "scopes (write-only).")
    url: str = Field("https://slack.com/api/", max_length=2000, description="The Web API's base URL.")
    channels: list[str] = Field(default_factory=list, max_length=500,
                                description="Channels read, by #name or ID; none: every one the account is in.")
    since_days: int = Field(90, ge=1, le=3650, description="How far back the first run reads.")
    thread_days: int = Field(14, ge=0, le=3650, description="How far back each run looks for threads answered "
                                                            "since the last run (and messages edited or deleted).")

    _folder = field_validator("url")(folder_url)


class Slack:
    name: ClassVar[str] = "slack"
    config_model: ClassVar[type[SourceConfig]] = SlackConfig
    keeps_missing: ClassVar[bool] = False

    def items(self, config: SlackConfig, ctx: Context) -> Iterator[Item]:
        from slack_sdk.errors import SlackApiError, SlackClientError

        guard_host(config.url, ctx)
        client = _client(config, ctx)
        mapping = PrincipalMapping.of(config)
        wanted = {c.lstrip("#") for c in config.channels}
        try:
            channels = [c for c in _paged(client.conversations_list, "channels", types="public_channel,private_channel",
                                          exclude_archived=True)
                        if ((c["id"] in wanted or c.get("name") in wanted) if wanted else c.get("is_member"))]
        except SlackApiError as exc:
            raise ListingFailed(f"slack conversations.list: {_said(exc)}") from exc
        except SlackClientError as exc:
            raise ListingFailed(f"slack conversations.list: {type(exc).__name__}: {exc}") from exc
        for channel in channels:
            try:
                yield from self._channel(client, config, channel, mapping, ctx)
            except SlackApiError as exc:
                raise ListingFailed(f"slack #{channel.get('name')}: {_said(exc)}") from exc
            except SlackClientError as exc:
                raise ListingFailed(f"slack #{channel.get('name')}: {type(exc).__name__}: {exc}") from exc

    def _channel(self, client: Any, config: SlackConfig, channel: dict[str, Any], mapping: PrincipalMapping,
                 ctx: Context) -> Iterator[Item]:
        from slack_sdk.errors import SlackApiError

        cid, name = channel["id"], channel.get("name", channel["id"])
        label = f"slack #{name}"
        access = Access(place={f"channel:{cid}", f"#{name}"})
        if channel.get("is_private"):
            try:
                members = _paged(client.conversations_members, "members", channel=cid)
                access = Access(restrictions=[{f"channel:{cid}", f"#{name}", *(f"user:{m}" for m in members)}])
            except SlackApiError as exc:
                access.unreadable = f"its members: {_said(exc)}"
        try:
            groups = mapping.groups_of(access, label)
        except Unmapped as exc:
            # Not read at all; its days' documents, had it any, are removed as items gone.
            yield Item(cid, "", error=str(exc), withhold=True)
            return
        known = {key: state for key, state in ctx.previous.items() if key.startswith(f"{cid}/")}
        start = _scan_start(config, known)
        scanned = _paged(client.conversations_history, "messages", channel=cid, oldest=f"{start:.6f}",
                         inclusive=True)
        days: dict[str, list[dict[str, Any]]] = {}
        for message in scanned:
            if _top_level(message):
                days.setdefault(_day(float(message["ts"])), []).append(message)
        first = _day(start)  # the scan's first day, read whole: a known day from it on not found again is gone
        url = f"{config.url.removesuffix('api/')}archives/{cid}"
        for key, state in known.items():
            if key.split("/")[1] < first:
                yield Item(key, state.get("version", ""), url=state.get("url", url), groups=groups,
                           memo=state.get("memo", {}))
        for day, listed in sorted(days.items()):
            key = f"{cid}/{day}"
            signature = _signature(listed)
            before = ctx.previous.get(key)
            if before is not None and before.get("memo", {}).get("sig") == signature:
                # Nothing in the day changed, not even a thread's latest reply: its document and files as they were.
                for file_key, state in known.items():
                    if file_key == key or file_key.startswith(f"{key}/"):
                        yield Item(file_key, state.get("version", ""), url=state.get("url", url), groups=groups,
                                   memo=state.get("memo", {}))
                continue
            threads = {m["ts"]: [r for r in _paged(client.conversations_replies, "messages", channel=cid,
                                                   ts=m["ts"]) if r.get("ts") != m["ts"]]
                       for m in listed if int(m.get("reply_count") or 0) > 0}
            text = _render(name, day, listed, threads)
            version = hashlib.sha256(text.encode()).hexdigest()[:32]
            memo = {"ts": max(m["ts"] for m in listed), "sig": signature}
            yield Item(key, version, Content(f"slack-{name}-{day}.md", text.encode(), f"#{name} {day}",
                                             as_text=True),
                       url=f"{url}?day={day}", groups=groups, memo=memo)
            shared = [f for m in [*listed, *(r for replies in threads.values() for r in replies)]
                      for f in m.get("files") or []]
            yield from shared_files(shared, key, config.token.get_secret_value(), groups, f"{label} {day}", ctx)


def _scan_start(config: SlackConfig, known: dict[str, dict[str, Any]]) -> float:
    """The midnight (UTC) from which the channel's history is listed: the first run's ``since_days``; after it, the
    earlier of the newest message stored and ``thread_days`` ago, so that new messages and the threads answered
    lately are both seen."""
    now = time.time()
    newest = max((float(s.get("memo", {}).get("ts", 0)) for s in known.values()), default=0.0)
    start = min(newest, now - config.thread_days * DAY_S) if newest else now - config.since_days * DAY_S
    return start - start % DAY_S


def _top_level(message: dict[str, Any]) -> bool:
    """A message of the channel itself: not a join or a leave, not a thread's reply (a reply also sent to the
    channel is shown under its thread)."""
    if message.get("type", "message") != "message" or message.get("subtype") in ("channel_join", "channel_leave"):
        return False
    return message.get("thread_ts") in (None, message.get("ts"))


def _signature(messages: list[dict[str, Any]]) -> str:
    """What the history tells of a day: each message's text, edit, files, and its thread's count and latest reply
    (Slack moves a parent's ``latest_reply`` when its thread is answered, however old the parent)."""
    seen = [(m["ts"], m.get("user"), m.get("text"), (m.get("edited") or {}).get("ts"), m.get("reply_count"),
             m.get("latest_reply"), [f.get("id") for f in m.get("files") or []])
            for m in sorted(messages, key=lambda m: float(m["ts"]))]
    return hashlib.sha256(json.dumps(seen).encode()).hexdigest()[:32]


def _client(config: SlackConfig, ctx: Context) -> Any:
    from slack_sdk import WebClient
    from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler

    class CappedRateLimit(RateLimitErrorRetryHandler):
        """The library's handler sleeps whatever Retry-After says; a run waits at most ``MAX_RETRY_AFTER_S``."""

        def prepare_for_next_attempt(self, *, state: Any, request: Any, response: Any = None,
                                     error: Any = None) -> None:
            if response is None:
                raise error
            said = next((v for k, v in response.headers.items() if k.lower() == "retry-after"), ["1"])
            wait = said[0] if isinstance(said, list) else said
            state.next_attempt_requested = True
            time.sleep(min(float(wait or 1), MAX_RETRY_AFTER_S))
            state.increment_current_attempt()

    return WebClient(token=config.token.get_secret_value(), base_url=config.url, timeout=int(ctx.timeout_s) or 1,
                     retry_handlers=[CappedRateLimit(max_retry_count=2)])


def _paged(method: Any, field: str, **params: Any) -> list[Any]:
    """Every page of a cursor-paginated method's ``field``."""
    found: list[Any] = []
    cursor = None
    while True:
        answer = method(**params, limit=PAGE, **({"cursor": cursor} if cursor else {}))
        found.extend(answer.get(field) or [])
        cursor = (answer.get("response_metadata") or {}).get("next_cursor")
        if not cursor:
            return found


def _day(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d")


def _render(name: str, day: str, messages: list[dict[str, Any]], threads: dict[str, list[dict[str, Any]]]) -> str:
    """The day's messages in order, each thread's replies under its parent (a reply of a later day included)."""
    lines = [f"# #{name}, {day}", ""]
    for message in sorted(messages, key=lambda m: float(m["ts"])):
        lines.append(_line(message, "%H:%M"))
        for reply in sorted(threads.get(message["ts"], []), key=lambda m: float(m["ts"])):
            lines.append(f"  > {_line(reply, '%Y-%m-%d %H:%M')}")
        lines.append("")
    return "\n".join(lines)


def _line(message: dict[str, Any], when: str) -> str:
    at = datetime.fromtimestamp(float(message["ts"]), UTC).strftime(when)
    who = message.get("user") or message.get("username") or message.get("bot_id") or "someone"
    names = [f.get("name") or f.get("title") or f.get("id") for f in message.get("files") or []]
    shared = f" [files: {', '.join(str(n) for n in names)}]" if names else ""
    return f"**{who}** ({at}): {message.get('text', '')}{shared}"


def _said(exc: Any) -> str:
    """Slack's error code (answered with HTTP 200 and ``"ok": false``), and the scope it needed when it says."""
    response = getattr(exc, "response", None)
    if response is None or not response.get("error"):
        return f"HTTP {getattr(response, 'status_code', '')} {exc}".strip()
    error, needed = response.get("error"), response.get("needed")
    return f"{error} (needed: {needed})" if needed else str(error)
