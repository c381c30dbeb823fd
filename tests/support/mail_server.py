"""The IMAP servers of the mail source's tests: Dovecot as the devstack runs it (skipped where it is not installed),
and a hostile one that misbehaves mid-message.

Usage::

    with Dovecot({"ana": "s3cret"}) as imap: ...
    with HostileImap("drop") as imap: ...           # imap.port
"""

from __future__ import annotations

import pytest

from agentsearch.devstack import free_port
from agentsearch.devstack.dovecot import Dovecot as _Dovecot, installed, message

__all__ = ["Dovecot", "HostileImap", "message"]


class Dovecot(_Dovecot):
    def __init__(self, users: dict[str, str], tls: bool = False, acl: bool = False) -> None:
        if installed() is None:
            pytest.skip("dovecot is not installed (make services installs dovecot-imapd)")
        super().__init__(users, tls, acl)


class HostileImap:
    """An IMAP server that answers the listing of one folder of two messages, then misbehaves when a message is
    fetched: ``drop`` announces 5,000 bytes and closes the connection after 100; ``huge`` announces a literal of a
    gigabyte (and would trickle it)."""

    def __init__(self, mode: str) -> None:
        import socketserver
        import threading

        self.mode, self.port = mode, free_port()
        hostile = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                self.wfile.write(b"* OK IMAP4rev1 ready\r\n")
                for raw in self.rfile:
                    tag, _, rest = raw.decode().rstrip("\r\n").partition(" ")
                    command = rest.upper()
                    if command.startswith("CAPABILITY"):
                        self.wfile.write(b"* CAPABILITY IMAP4rev1 AUTH=PLAIN\r\n")
                    elif command.startswith(("EXAMINE", "SELECT")):
                        self.wfile.write(b"* 2 EXISTS\r\n* OK [UIDVALIDITY 7] ok\r\n* OK [UIDNEXT 3] ok\r\n")
                    elif command.startswith("UID SEARCH"):
                        self.wfile.write(b"* SEARCH 1 2\r\n")
                    elif "RFC822.SIZE" in command:
                        self.wfile.write(b"* 1 FETCH (UID 1 RFC822.SIZE 5000)\r\n"
                                         b"* 2 FETCH (UID 2 RFC822.SIZE 5000)\r\n")
                    elif "BODY.PEEK" in command:
                        size = 5000 if hostile.mode == "drop" else 1 << 30
                        self.wfile.write(f"* 1 FETCH (UID 1 BODY[] {{{size}}}\r\n".encode() + b"x" * 100)
                        self.wfile.flush()
                        return  # the connection dropped mid-message
                    elif command.startswith("LOGOUT"):
                        self.wfile.write(b"* BYE\r\n" + tag.encode() + b" OK\r\n")
                        return
                    self.wfile.write(tag.encode() + b" OK done\r\n")
                    self.wfile.flush()

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self.server = Server(("127.0.0.1", self.port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> HostileImap:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
