"""The contract of a source's kind: its config model, and the items it lists.

A kind lists its source's items (pages, entries, files) with a version each (an ETag or the content's hash, a feed
entry's id and date, a Git blob), and reads the content only of those whose version is not the one the last run
kept (``Context.previous``). The run (``agentsearch.pipeline.sources.run``) compares, hands new and changed content to
the ingestion, and removes the documents of items no longer listed. A listing that cannot be read raises
``ListingFailed``: the run fails and removes nothing. One item that cannot be read is an ``Item`` with its ``error``:
counted failed, its document kept.

Usage::

    class WebConfig(SourceConfig):
        url: str
        password: SecretStr | None = None          # a credential: write-only, encrypted at rest

    class Web:
        name = "web"
        config_model = WebConfig
        keeps_missing = False                      # an item not listed any more is gone: its document is removed
        def items(self, config: WebConfig, ctx: Context) -> Iterator[Item]: ...
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, SecretStr

from agentsearch.pipeline.sources.fetch import Fetcher


class SourceConfig(BaseModel):
    """A kind's config: unknown fields refused, each ``SecretStr`` field a credential."""

    model_config = ConfigDict(extra="forbid")

    @classmethod
    def secret_fields(cls) -> list[str]:
        return [name for name, f in cls.model_fields.items()
                if f.annotation is SecretStr or SecretStr in getattr(f.annotation, "__args__", ())]


def http_url(value: str) -> str:
    """A config's URL read over HTTP: its validator (``field_validator("url")(http_url)``)."""
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("url must be an http:// or https:// URL with a host")
    return value


def folder_url(value: str) -> str:
    """A config's URL naming a folder (a WebDAV collection, an API's base): an ``http_url`` that ends with ``/``, so
    that relative references resolve inside it, not beside it (``urljoin("https://h/api", "x")`` is ``https://h/x``).
    Its validator: ``field_validator("url")(folder_url)``."""
    value = http_url(value)
    return value if value.endswith("/") else value + "/"


@dataclass(frozen=True)
class Content:
    """What an item holds: ``name`` tells its format (``guide.md``, ``index.html``); ``as_text``: its bytes are UTF-8
    text stored as a document's text (the documents path), else a file the parsers read (the files path)."""

    name: str
    data: bytes
    title: str = ""
    as_text: bool = False
    # Fields its document's metadata takes (a Notion row's properties), for search filters; the source's own keys
    # (``source_id``, ``source_kind``, ``source_url``) win over them.
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class Item:
    """One item: ``key`` names it across runs, ``url`` is the link its document shows (the key when not given)."""

    key: str
    version: str
    content: Content | None = None  # None: the kind saw its version unchanged and read nothing
    url: str = ""
    memo: dict[str, Any] = field(default_factory=dict)  # what the kind keeps of it for the next run
    error: str | None = None
    # The document groups its source gives it (``kinds.permissions``): None, found by every member. Compared with
    # the last run's even when its content is unchanged, so a permission change alone reaches the document.
    groups: list[str] | None = None
    # With ``error``: the item may not be indexed at all (its permissions unknown), so its document is removed
    # rather than kept as it was.
    withhold: bool = False

    @property
    def link(self) -> str:
        return self.url or self.key


class ListingFailed(Exception):
    """The source's listing could not be read (its server away, refused, the credentials wrong): nothing is
    removed."""


@dataclass
class Context:
    """What a run gives its kind: the guarded HTTP client, what the last run kept, the credentials, the limits."""

    fetcher: Fetcher
    previous: Mapping[str, dict[str, Any]]
    cursor: dict[str, Any]
    credentials: dict[str, Any]  # the source's, decrypted; a kind may add what it derives from them for this run
    max_item_bytes: int
    timeout_s: float
    # Set by a kind that stopped listing at a limit: the items not listed are not gone, so none is removed (the
    # reason is the run's first error; the run still succeeds with what it read).
    partial: str | None = None


class SourceKind(Protocol):
    name: ClassVar[str]
    config_model: ClassVar[type[SourceConfig]]
    keeps_missing: ClassVar[bool]

    def items(self, config: Any, ctx: Context) -> Iterator[Item]: ...
