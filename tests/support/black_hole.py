"""A port that behaves as a server behind a network partition does: a connection to it is neither accepted nor
refused, and nothing sent there is ever answered.

Usage::

    with black_hole() as port:
        client = redis.Redis(port=port, socket_timeout=1)   # every call times out; none is refused
    with black_hole(connects=True) as port:
        ...                                                 # connected, and never answered
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def black_hole(connects: bool = False) -> Iterator[int]:
    """A port on 127.0.0.1 where a connection is never accepted nor refused: the one slot of the listening queue
    is taken by connections of its own, so the kernel drops every SYN after them. ``connects``: a connection is
    made (the kernel completes it in the queue) and then hears nothing, as one made before the partition began."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8 if connects else 0)
    port = server.getsockname()[1]
    fillers = []
    try:
        for _ in range(0 if connects else 3):
            filler = socket.socket()
            filler.setblocking(False)
            filler.connect_ex(("127.0.0.1", port))
            fillers.append(filler)
        time.sleep(0.2)
        yield port
    finally:
        for sock in (*fillers, server):
            sock.close()
