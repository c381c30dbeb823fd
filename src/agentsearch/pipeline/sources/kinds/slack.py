"""Slack channels' messages, read with ``slack-sdk``'s ``WebClient``: one document per channel and day (UTC).

Each run lists the channels (``conversations.list``, public and private, archived left out, following
``response_metadata.next_cursor``); those the token's account is a member of (or those named in ``channels``) are
read. A channel's change feed is its history after the newest message the last run stored (``conversations.history``
with ``oldest``): nothing newer, nothing more is read, and its days' documents stay as they are. Newer messages
have their days read again whole (from the first such day's midnight), so each day's document holds all its
top-level messages; a day whose text is unchanged is not stored again. A channel archived, deleted or left (no
longer listed, or no longer a member) is gone: its days' documents are removed.

Permissions (``kinds.access``): a public channel's place is ``channel:ID`` and ``#name``; a private channel is a
restriction to ``channel:ID``, ``#name`` and each member's ``user:ID`` (``conversations.members``), so a member
added or removed in Slack changes its documents' groups at the next run. A private channel whose members cannot be
read (a scope missing) is not indexed. A 429 is retried after its ``Retry-After`` (at most ``MAX_RETRY_AFTER_S``).

Not read: thread replies (a message's replies are not fetched), files shared in channels, direct messages; an edit
or a deletion of a message older than the newest stored is seen only when its day is read again.

Usage::

    Slack().items(SlackConfig(token="xoxb-...", channels=["#general"], groups={"#payroll": "hr"}), ctx)
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, ClassVar

from pydantic import Field, SecretStr, field_validator

from agentsearch.pipeline.sources.kinds.access import Access, PrincipalMapping, SaasConfig, guard_host
from agentsearch.pipeline.sources.kinds.base import Content, Context, Item, ListingFailed, SourceConfig, folder_url
from agentsearch.pipeline.sources.kinds.permissions import Unmapped

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
        newest = max((float(s.get("memo", {}).get("ts", 0)) for s in known.values()), default=0.0)
        since = time.time() - config.since_days * DAY_S
        messages: list[dict[str, Any]] = []
        reread = "9999-12-31"  # the first day read again whole: a known day from it on not found again is gone
        if newest:
            fresh = _paged(client.conversations_history, "messages", channel=cid, oldest=f"{newest:.6f}")
            if fresh:  # read their days again whole, from the first one's midnight
                first = min(float(m["ts"]) for m in fresh)
                reread = _day(first)
                messages = _paged(client.conversations_history, "messages", channel=cid, inclusive=True,
                                  oldest=f"{first - first % DAY_S:.6f}")
        else:
            messages = _paged(client.conversations_history, "messages", channel=cid, oldest=f"{since:.6f}")
        days: dict[str, list[dict[str, Any]]] = {}
        for message in messages:
            if message.get("type", "message") == "message" and message.get("subtype") not in ("channel_join",
                                                                                              "channel_leave"):
                days.setdefault(_day(float(message["ts"])), []).append(message)
        url = f"{config.url.removesuffix('api/')}archives/{cid}"
        for key, state in known.items():
            day = key.split("/", 1)[1]
            if day not in days and day < reread:
                yield Item(key, state.get("version", ""), url=state.get("url", url), groups=groups,
                           memo=state.get("memo", {}))
        for day, listed in sorted(days.items()):
            text = _render(name, day, listed)
            version = hashlib.sha256(text.encode()).hexdigest()[:32]
            memo = {"ts": max(m["ts"] for m in listed)}
            yield Item(f"{cid}/{day}", version, Content(f"slack-{name}-{day}.md", text.encode(), f"#{name} {day}",
                                                        as_text=True),
                       url=f"{url}?day={day}", groups=groups, memo=memo)


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


def _render(name: str, day: str, messages: list[dict[str, Any]]) -> str:
    lines = [f"# #{name}, {day}", ""]
    for message in sorted(messages, key=lambda m: float(m["ts"])):
        at = datetime.fromtimestamp(float(message["ts"]), UTC).strftime("%H:%M")
        who = message.get("user") or message.get("username") or message.get("bot_id") or "someone"
        lines.append(f"**{who}** ({at}): {message.get('text', '')}")
        lines.append("")
    return "\n".join(lines)


def _said(exc: Any) -> str:
    """Slack's error code (answered with HTTP 200 and ``"ok": false``), and the scope it needed when it says."""
    response = getattr(exc, "response", None)
    if response is None or not response.get("error"):
        return f"HTTP {getattr(response, 'status_code', '')} {exc}".strip()
    error, needed = response.get("error"), response.get("needed")
    return f"{error} (needed: {needed})" if needed else str(error)
