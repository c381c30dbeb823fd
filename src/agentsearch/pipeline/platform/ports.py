"""A free TCP port on this machine, for a server this process starts (the in-process API, a dev stack's services).

Usage::

    port = free_port()                  # on 127.0.0.1
    port = free_port("0.0.0.0")
"""

from __future__ import annotations

import socket


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now: the operating system's pick, released at once for the caller to bind."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]
