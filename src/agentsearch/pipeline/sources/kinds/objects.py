"""An S3 bucket (AWS, or any store speaking its protocol: MinIO, Ceph, Garage, R2) under a key prefix, by ETag.

The bucket is listed a page at a time (``ListObjectsV2``, ``PAGE`` keys a page) to ``max_items`` objects; an object
is versioned by its ETag (which changes with its content), so an object whose ETag is the last run's is not read;
a new or changed one is read with ``GetObject``, its version id kept when the bucket keeps versions. An object
larger than ``max_item_bytes`` (its listed size) is a failed item, never read; a body is read in chunks and cut at
the limit all the same. A key no longer listed is gone; a listing stopped at ``max_items`` removes nothing.

The endpoint's host is checked by the egress guard before the client connects (as the Git kind's is); the client
has the source's timeouts and makes one attempt, so a store away fails the run quickly and removes nothing. A store
refusing the keys fails the run with its error code and message (``InvalidAccessKeyId``, ``SignatureDoesNotMatch``).

Usage::

    Objects().items(ObjectsConfig(bucket="handbook", prefix="team/", access_key="...", secret_key="..."), ctx)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator

from agentsearch.pipeline.platform.egress import EgressGuard, EgressRefused
from agentsearch.pipeline.sources.kinds.base import Context, Item, ListingFailed, SourceConfig, http_url
from agentsearch.pipeline.sources.kinds.files import file_content, readable, unread
from agentsearch.pipeline.sources.kinds.permissions import GroupMapping, GroupsField, RequiredField

PAGE = 1000
CHUNK = 1 << 16


class ObjectsConfig(SourceConfig):
    bucket: str = Field(min_length=3, max_length=255, pattern=r"^[A-Za-z0-9._-]+$")
    prefix: str = Field("", max_length=1000, description="Only keys starting with it are read.")
    endpoint_url: str | None = Field(None, max_length=2000, description="The store's URL (none: AWS S3).")
    region: str = Field("us-east-1", max_length=50, pattern=r"^[a-z0-9-]+$")
    access_key: str = Field(min_length=1, max_length=200)
    secret_key: SecretStr = Field(description="The secret access key (write-only).")
    max_items: int = Field(10_000, ge=1, le=1_000_000, description="Objects listed at most per run.")
    groups: GroupsField = Field(default_factory=dict)
    groups_required: RequiredField = False

    @field_validator("endpoint_url")
    @classmethod
    def _endpoint(cls, value: str | None) -> str | None:
        return None if value is None else http_url(value)


class Objects:
    name: ClassVar[str] = "objects"
    config_model: ClassVar[type[SourceConfig]] = ObjectsConfig
    keeps_missing: ClassVar[bool] = False

    def items(self, config: ObjectsConfig, ctx: Context) -> Iterator[Item]:
        from botocore.exceptions import BotoCoreError, ClientError

        client = self._client(config, ctx)
        mapping = GroupMapping(config.groups, config.groups_required)
        listed = 0
        try:
            pages = client.get_paginator("list_objects_v2").paginate(
                Bucket=config.bucket, Prefix=config.prefix, PaginationConfig={"PageSize": PAGE})
            for page in pages:
                for entry in page.get("Contents", []):
                    key = entry["Key"]
                    # A folder marker, a format not read, or a key a misbehaving store lists outside the prefix.
                    if key.endswith("/") or not readable(key) or not key.startswith(config.prefix):
                        continue
                    if listed >= config.max_items:
                        ctx.partial = (f"s3://{config.bucket}/{config.prefix}: more than {config.max_items} objects "
                                       "(max_items): the rest not listed, nothing removed")
                        return
                    listed += 1
                    yield self._object(client, config, entry, mapping, ctx)
        except ClientError as exc:
            raise ListingFailed(f"s3 {config.bucket}: {_said(exc)}") from exc
        except BotoCoreError as exc:
            raise ListingFailed(f"s3 {config.bucket}: {type(exc).__name__}: {exc}") from exc

    def _client(self, config: ObjectsConfig, ctx: Context) -> Any:
        import boto3
        from botocore.config import Config

        if config.endpoint_url is not None:
            parts = urlsplit(config.endpoint_url)
            try:
                EgressGuard(ctx.fetcher.policy).addresses(parts.hostname or "",
                                                          parts.port or (443 if parts.scheme == "https" else 80))
            except (EgressRefused, OSError) as exc:
                raise ListingFailed(str(exc)) from exc
        return boto3.session.Session().client(
            "s3", endpoint_url=config.endpoint_url, region_name=config.region, aws_access_key_id=config.access_key,
            aws_secret_access_key=config.secret_key.get_secret_value(),
            config=Config(connect_timeout=ctx.timeout_s, read_timeout=ctx.timeout_s, retries={"max_attempts": 1},
                          s3={"addressing_style": "path"}))

    def _object(self, client: Any, config: ObjectsConfig, entry: dict[str, Any], mapping: GroupMapping,
                ctx: Context) -> Item:
        from botocore.exceptions import BotoCoreError, ClientError

        key, version = entry["Key"], str(entry.get("ETag", "")).strip('"') or str(entry.get("LastModified"))
        url = f"s3://{config.bucket}/{key}"
        known, groups = unread(key, version, url, mapping, ctx)
        if known is not None:
            return known
        if int(entry.get("Size", 0)) > ctx.max_item_bytes:
            return Item(key, version, url=url, error=f"{url}: {entry['Size']} bytes, over the limit of "
                                                     f"{ctx.max_item_bytes}")
        try:
            got = client.get_object(Bucket=config.bucket, Key=key)
            data = bytearray()
            for chunk in got["Body"].iter_chunks(CHUNK):
                data.extend(chunk)
                if len(data) > ctx.max_item_bytes:
                    got["Body"].close()
                    return Item(key, version, url=url, error=f"{url}: over the limit of {ctx.max_item_bytes} bytes")
        except ClientError as exc:
            return Item(key, version, url=url, error=f"{url}: {_said(exc)}")
        except BotoCoreError as exc:
            return Item(key, version, url=url, error=f"{url}: {type(exc).__name__}: {exc}")
        memo = {"version_id": got.get("VersionId")} if got.get("VersionId") else {}
        return Item(key, version, file_content(key, bytes(data)), url=url, groups=groups, memo=memo)


def _said(exc: Any) -> str:
    """The store's error code and message (HTTP status too)."""
    error = exc.response.get("Error", {})
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return f"HTTP {status} {error.get('Code', '')}: {error.get('Message', '')}".strip()
