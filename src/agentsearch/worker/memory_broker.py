"""The embedded mode's broker: kombu's in-memory transport, with consumers woken by a publish instead of a timer.

kombu's ``memory://`` transport cannot block on a queue. A consumer that finds its queues empty sleeps
``polling_interval`` and looks again, so every hop between two steps of a job waited half an interval on average,
and a short interval spends CPU while the service is idle. Here every change that may let a consumer take a message
(a publish, an ack, a reject) rings one bell, and a consumer that found nothing waits on the bell instead: a hop
costs a thread's wake-up. ``polling_interval`` stays as the longest wait between two looks, a safety net for a
message put on the queues by some other transport of the process (they share kombu's queues), which rings nothing.

Selected by ``agentsearch.worker.app.create_app`` for the memory broker (Celery's ``broker_transport``); the URL stays
``memory://``.

Usage::

    app.conf.broker_transport = "agentsearch.worker.memory_broker:Transport"    # with broker_url "memory://"
"""

from __future__ import annotations

import threading
from queue import Empty
from time import monotonic

from kombu.transport import memory


class Bell:
    """A counter of rings that threads wait on: ``wait(seen, ...)`` returns as soon as the count is past ``seen``,
    so a ring between a consumer's look at the queues and its wait is not missed."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._rings = 0

    @property
    def rings(self) -> int:
        return self._rings

    def ring(self) -> None:
        with self._changed:
            self._rings += 1
            self._changed.notify_all()

    def wait(self, seen: int, timeout_s: float) -> bool:
        """Wait until a ring after ``seen`` or ``timeout_s``; whether it rang."""
        with self._changed:
            return self._changed.wait_for(lambda: self._rings != seen, timeout_s)


BELL = Bell()


class Channel(memory.Channel):
    def _put(self, queue, message, **kwargs):
        super()._put(queue, message, **kwargs)
        BELL.ring()

    def _put_fanout(self, exchange, message, routing_key=None, **kwargs):
        super()._put_fanout(exchange, message, routing_key, **kwargs)
        BELL.ring()

    # An ack or a reject frees a place in a consumer's prefetch window: one that stopped taking messages for want
    # of room may take the next now.
    def basic_ack(self, delivery_tag, multiple=False):
        super().basic_ack(delivery_tag, multiple)
        BELL.ring()

    def basic_reject(self, delivery_tag, requeue=False):
        super().basic_reject(delivery_tag, requeue)
        BELL.ring()


class Transport(memory.Transport):
    Channel = Channel

    def drain_events(self, connection, timeout=None):
        """kombu's loop (``virtual.Transport.drain_events``) with the sleep between two looks replaced by a wait
        on the bell, no longer than ``polling_interval``."""
        started = monotonic()
        while True:
            seen = BELL.rings  # read before the look: a publish during the look is then not waited past
            try:
                self.cycle.get(self._deliver, timeout=timeout)
                return
            except Empty:
                waited = monotonic() - started
                if timeout is not None and waited >= timeout:
                    raise TimeoutError() from None  # socket.timeout, which Celery catches
                longest = self.polling_interval if self.polling_interval is not None else 1.0
                if timeout is not None:
                    longest = min(longest, timeout - waited)
                BELL.wait(seen, longest)
