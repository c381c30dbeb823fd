"""The Redis broker's transport: kombu's, with one Redis client per channel instead of one per command, and a
channel that can still reach Redis after its connection was taken apart.

kombu's Redis channel makes a new ``redis.Redis`` for every publish, ack and event it sends
(``Channel.conn_or_acquire``), and building one copies redis-py's table of some two hundred reply handlers. In a
thread-pool worker, whose one process holds the GIL for every step's Celery work, that was about a tenth of the
time the GIL was held while 200 jobs ran (``src/agentsearch/bench/concurrency.py``, sampled with py-spy's ``--gil``). A
``redis.Redis`` takes a connection from its pool for each command and gives it back, so one client may serve every
thread; it is made again when kombu replaces the channel's pool (after a fork, on close).

**A Redis restart must not end the worker** (kombu 5.7). When Redis goes away, Celery's consumer takes the broker
connection apart (``Connection.collect``, then ``close``): kombu closes each channel, then detaches the transport
from its ``Connection`` (``transport.client = None``). A channel waiting on a BRPOP reads its reply first as it
closes; on the dead socket that read raises, the error is ignored, and the channel is left open with its delivered,
unacknowledged messages. The ``close`` that follows closes it for real: it drops its pools and restores those
messages, for which it makes a new pool from ``self.connection.client``, now None. The ``AttributeError`` ("'NoneType'
object has no attribute 'hostname'") is no connection error, so nothing catches it: the worker's main process ends
with "Unrecoverable error" (reproduced: one task running and a BRPOP waiting on a prefork worker, Redis stopped).
A channel here keeps the connection parameters it was last given and makes its pools from them once it has been
detached: the restore then meets Redis down (a connection error, which Celery ignores) or up (the messages go back to
their queue), an ack after the reconnect reaches Redis, and the worker reconnects as it should.

Selected by ``agentsearch.worker.app.create_app`` for a ``redis://`` or ``rediss://`` broker (Celery's
``broker_transport``); the URL is read as kombu reads it.

Usage::

    app.conf.broker_transport = "agentsearch.worker.redis_broker:Transport"    # with broker_url "redis://host:6379/0"
"""

from __future__ import annotations

import threading
from contextlib import contextmanager

from kombu.transport import redis
from redis import exceptions as redis_errors


class Channel(redis.Channel):
    _shared_client = None
    _sharing = threading.Lock()
    _kept_connparams: dict[bool, dict] | None = None

    def _connparams(self, asynchronous=False):
        """kombu's parameters of a new pool; those last given, once the transport has left its ``Connection``."""
        transport = self.connection
        if transport is not None and transport.client is not None:
            params = super()._connparams(asynchronous=asynchronous)
            self._kept_connparams = {**(self._kept_connparams or {}), asynchronous: params}
            return dict(params)
        kept = (self._kept_connparams or {}).get(asynchronous)
        if kept is None:  # never connected: there is nothing to restore or acknowledge either
            raise redis_errors.ConnectionError("the broker connection was closed")
        return dict(kept)

    @contextmanager
    def conn_or_acquire(self, client=None):
        if client:
            yield client
            return
        shared, pool = self._shared_client, self.pool
        if shared is None or shared.connection_pool is not pool:
            with self._sharing:
                shared = self._shared_client
                if shared is None or shared.connection_pool is not pool:
                    shared = self._shared_client = self._create_client()
        yield shared


class Transport(redis.Transport):
    Channel = Channel
