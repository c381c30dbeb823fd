"""The gRPC options of every Milvus client the service makes: a channel of its own, a short reconnect backoff, and
keepalive pings a ``milvus-lite server`` accepts; and pymilvus itself, imported on first use.

Usage::

    milvus().MilvusClient(uri=uri, grpc_options=dict(GRPC_OPTIONS), dedicated=True)
"""

from __future__ import annotations

from types import ModuleType


def milvus() -> ModuleType:
    """pymilvus, imported now if not yet: it imports pandas (half a second of the API's start-up, which never makes
    a Milvus client; tests/unit/test_api_import.py)."""
    import pymilvus

    return pymilvus

# gRPC shares one connection per address among a process's channels by default, and that connection's reconnect
# backoff grows while the server is away: measured after 15 s of Milvus down, calls kept failing for 9-12 s after it
# was back. A channel of its own (pymilvus makes a fresh one when it recovers) connects at once (0.02 s measured);
# the backoff cap covers a channel that is not replaced.
# Keepalive: pymilvus's own pings every 10 s, calls or none. milvus-lite server is a grpcio server on gRPC core's
# defaults: a ping on a connection with no call is early unless 2 h after the last one, a ping during calls unless
# 5 min after (grpc.http2.min_ping_interval_without_data_ms), and the third early ping gets GOAWAY "too_many_pings"
# and the connection dropped (measured: an idle client cut after 140 s; it pinged at 10 and 20 s, then once a
# minute). So: pings only during a call, at most one per 5 min, which those defaults accept and so does Milvus
# standalone (grpc-go: 5 s, idle pings allowed; it pings an idle client itself every 60 s). No ping is needed to see
# a server stop or restart (it closes the connection), and a hung one is bounded by the calls' deadlines.
GRPC_OPTIONS = {"grpc.use_local_subchannel_pool": 1, "grpc.max_reconnect_backoff_ms": 2000,
                "grpc.keepalive_time_ms": 300_000, "grpc.keepalive_permit_without_calls": 0}
