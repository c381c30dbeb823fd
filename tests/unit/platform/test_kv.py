"""The in-process Redis store (no AGENTSEARCH_REDIS_URL): one store behind the sync and the asyncio clients."""

from __future__ import annotations

import asyncio
import uuid

from agentsearch.pipeline.platform.kv import connect_async_redis, connect_redis


def test_the_sync_and_asyncio_clients_share_one_in_process_store():
    key = f"kv-test-{uuid.uuid4().hex}"
    connect_redis(None).set(key, b"from sync")

    async def read_and_write() -> bytes | None:
        client = connect_async_redis(None)
        seen = await client.get(key)
        await client.set(key, b"from asyncio")
        return seen

    assert asyncio.run(read_and_write()) == b"from sync"
    assert connect_redis(None).get(key) == b"from asyncio"
