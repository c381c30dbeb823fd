"""The Redis broker's transport: kombu's, with one Redis client per channel instead of one per command.

kombu's Redis channel makes a new ``redis.Redis`` for every publish, ack and event it sends
(``Channel.conn_or_acquire``), and building one copies redis-py's table of some two hundred reply handlers. In a
thread-pool worker, whose one process holds the GIL for every step's Celery work, that was about a tenth of the
time the GIL was held while 200 jobs ran (``bench/concurrency.py``, sampled with py-spy's ``--gil``). A
``redis.Redis`` takes a connection from its pool for each command and gives it back, so one client may serve every
thread; it is made again when kombu replaces the channel's pool (after a fork, on close).

Selected by ``worker.app.create_app`` for a ``redis://`` or ``rediss://`` broker (Celery's ``broker_transport``);
the URL is read as kombu reads it.

Usage::

    app.conf.broker_transport = "worker.redis_broker:Transport"    # with broker_url "redis://host:6379/0"
"""

from __future__ import annotations

import threading
from contextlib import contextmanager

from kombu.transport import redis


class Channel(redis.Channel):
    _shared_client = None
    _sharing = threading.Lock()

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
