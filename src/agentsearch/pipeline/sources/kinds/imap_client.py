"""An IMAP connection held to a source's limits: every literal the server sends is cut at a size before it is read,
and each command's answer at a time from when it was asked, so a server that trickles bytes or announces a message
of gigabytes ends the read with a reason instead of holding the worker.

``imaplib`` reads a literal whole once the server announced its size (``{N}``): ``read`` is where that size is seen
first, so it is refused there; the reading itself goes a chunk at a time against the deadline.

Usage::

    with connect("imap.example.org", 993, "ssl", max_bytes=20_000_000, timeout_s=20) as imap:
        imap.login("ana", "s3cret")
        imap.deadline_in(20)                      # the next command's answer within 20 s
"""

from __future__ import annotations

import imaplib
import ssl
import time
from typing import Any


class TooLarge(imaplib.IMAP4.abort):
    """The server announced a literal past the limit: the connection is left (its rest cannot be skipped safely)."""


class _Limits:
    max_bytes: int
    deadline: float
    file: Any

    def deadline_in(self, seconds: float) -> None:
        self.deadline = time.monotonic() + seconds

    def read(self, size: int) -> bytes:
        if size > self.max_bytes:
            raise TooLarge(f"the server sends {size} bytes, over the limit of {self.max_bytes}")
        data = bytearray()
        while len(data) < size:
            if time.monotonic() > self.deadline:
                raise imaplib.IMAP4.abort("no whole answer within the time limit")
            chunk = self.file.read1(min(65536, size - len(data)))
            if not chunk:
                raise imaplib.IMAP4.abort("the server closed the connection mid-answer")
            data.extend(chunk)
        return bytes(data)

    def readline(self) -> bytes:
        if time.monotonic() > self.deadline:
            raise imaplib.IMAP4.abort("no whole answer within the time limit")
        return super().readline()  # type: ignore[misc]  # bounded by imaplib's _MAXLINE


class LimitedIMAP(_Limits, imaplib.IMAP4):
    def __init__(self, host: str, port: int, max_bytes: int, timeout_s: float) -> None:
        self.max_bytes = max_bytes
        self.deadline_in(timeout_s)  # the greeting is read by the constructor
        super().__init__(host, port, timeout=timeout_s)


class LimitedIMAPSSL(_Limits, imaplib.IMAP4_SSL):
    def __init__(self, host: str, port: int, max_bytes: int, timeout_s: float, context: ssl.SSLContext) -> None:
        self.max_bytes = max_bytes
        self.deadline_in(timeout_s)
        super().__init__(host, port, ssl_context=context, timeout=timeout_s)


def connect(host: str, port: int, tls: str, max_bytes: int, timeout_s: float, ca_pem: str | None = None
            ) -> imaplib.IMAP4:
    """A connection (``tls``: "ssl" from the first byte, "starttls" upgraded before login, "none" in the clear),
    its socket timeout ``timeout_s`` per read, its first deadline ``timeout_s`` from now. The server's certificate
    is verified against the system's authorities, or only ``ca_pem`` when given (a private authority's)."""
    context = ssl.create_default_context(cadata=ca_pem) if ca_pem else ssl.create_default_context()
    if tls == "ssl":
        return LimitedIMAPSSL(host, port, max_bytes, timeout_s, context)
    imap = LimitedIMAP(host, port, max_bytes, timeout_s)
    if tls == "starttls":
        imap.starttls(context)
    return imap


def said(answer: Any) -> str:
    """The server's words (an exception's, or an answer's lines), as text."""
    if isinstance(answer, BaseException):
        answer = answer.args[0] if answer.args else str(answer)
    if isinstance(answer, list):
        answer = b" ".join(a if isinstance(a, bytes) else str(a).encode() for a in answer if a)
    return (answer.decode("utf-8", "replace") if isinstance(answer, bytes) else str(answer))[:300]
