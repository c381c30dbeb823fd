"""The Milvus client's keepalive, as pymilvus hands it to the gRPC channel: pings a gRPC core server on its defaults
accepts. pymilvus's own (every 10 s, with no call in flight) got GOAWAY "too_many_pings" from milvus-lite server."""

from __future__ import annotations

import grpc
import pytest
from pymilvus.client.grpc_handler import GrpcHandler

from agentsearch.pipeline.retrieval.vector_store import GRPC_OPTIONS

# gRPC core's server defaults (grpc doc/keepalive.md): pings no closer than 5 min while calls are in flight
# (GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS) and none on a connection without calls (2 h apart).
SERVER_MIN_PING_INTERVAL_MS = 300_000


@pytest.fixture()
def channel_options(monkeypatch) -> dict:
    """The options of the channel pymilvus makes for the store's client: its defaults with GRPC_OPTIONS over them."""
    made: dict = {}
    real = grpc.insecure_channel

    def insecure_channel(target, options=None, **kwargs):
        made.update(options or [])
        return real(target, options=options, **kwargs)

    monkeypatch.setattr(grpc, "insecure_channel", insecure_channel)
    handler = GrpcHandler(uri="http://127.0.0.1:9", grpc_options=dict(GRPC_OPTIONS))  # no call: nothing connects
    handler.close()
    return made


def test_keepalive_pings_only_during_calls_and_no_closer_than_a_default_server_accepts(channel_options):
    assert channel_options["grpc.keepalive_permit_without_calls"] in (0, False)
    assert channel_options["grpc.keepalive_time_ms"] >= SERVER_MIN_PING_INTERVAL_MS


def test_the_reconnect_options_reach_the_channel_too(channel_options):
    assert channel_options["grpc.use_local_subchannel_pool"] == 1
    assert channel_options["grpc.max_reconnect_backoff_ms"] == GRPC_OPTIONS["grpc.max_reconnect_backoff_ms"]
