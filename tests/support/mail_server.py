"""A real IMAP server for the mail source's tests: Dovecot (Debian's ``dovecot-imapd``, installed by ``make
services``) with its own configuration under a temporary folder, on a free loopback port, plain authentication
against a passwd-file, mail in a maildir there. No system service is touched.

Usage::

    with Dovecot(users={"ana": "s3cret"}) as imap:
        imap.deliver("ana", "INBOX", message("Hello", "Body."))       # APPEND over IMAP, as a mail arriving
        imap.create("ana", "HR")
        imap.expunge("ana", "INBOX", uid)                            # a message gone
"""

from __future__ import annotations

import imaplib
import os
import pwd
import shutil
import subprocess
import tempfile
from email.message import EmailMessage
from pathlib import Path

import pytest

from agentsearch.devstack import free_port
from tests.support.source_servers import stop_process, wait_for_port


def message(subject: str, body: str, attachments: dict[str, bytes] | None = None, sender: str = "ana@example.org"
            ) -> bytes:
    mail = EmailMessage()
    mail["From"], mail["To"], mail["Subject"] = sender, "team@example.org", subject
    mail["Date"] = "Sun, 01 Nov 2026 08:00:00 +0000"
    mail.set_content(body)
    for name, data in (attachments or {}).items():
        maintype, subtype = ("message", "rfc822") if name.endswith(".eml") else ("application", "octet-stream")
        if maintype == "message":
            from email import message_from_bytes, policy

            mail.add_attachment(message_from_bytes(data, policy=policy.default), filename=name)
        else:
            mail.add_attachment(data, maintype=maintype, subtype=subtype, filename=name)
    return bytes(mail)


def _mail_user() -> tuple[int, int]:
    """The uid and gid the mail is kept as: ours, or as root (Dovecot refuses uid 0 for mail) nobody's."""
    if os.getuid() != 0:
        return os.getuid(), os.getgid()
    nobody = pwd.getpwnam("nobody")
    return nobody.pw_uid, nobody.pw_gid


class Dovecot:
    """Dovecot serving IMAP without TLS on 127.0.0.1 for the given users (name -> password), from a folder of its
    own under the system's temporary folder (its unprivileged processes must reach it: pytest's are private)."""

    def __init__(self, users: dict[str, str]) -> None:
        if shutil.which("dovecot") is None and not Path("/usr/sbin/dovecot").exists():
            pytest.skip("dovecot is not installed (make services installs dovecot-imapd)")
        self.base = Path(tempfile.mkdtemp(prefix="agentsearch-dovecot-"))
        self.users, self.port = users, free_port()
        self.proc: subprocess.Popen | None = None

    def _configure(self) -> Path:
        uid, gid = _mail_user()
        for sub in ("run", "state", "mail"):
            (self.base / sub).mkdir(parents=True, exist_ok=True)
        os.chown(self.base / "mail", uid, gid)
        os.chmod(self.base, 0o755)  # noqa: S103 - Dovecot's own users read its config
        (self.base / "passwd").write_text("".join(
            f"{name}:{{PLAIN}}{password}:{uid}:{gid}::{self.base}/mail/{name}::\n"
            for name, password in self.users.items()))
        internal = "dovecot" if os.getuid() == 0 else pwd.getpwuid(os.getuid()).pw_name
        login = "dovenull" if os.getuid() == 0 else internal
        config = self.base / "dovecot.conf"
        config.write_text(f"""
protocols = imap
listen = 127.0.0.1
base_dir = {self.base}/run
state_dir = {self.base}/state
log_path = {self.base}/dovecot.log
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
default_internal_user = {internal}
default_login_user = {login}
first_valid_uid = 1
mail_location = maildir:{self.base}/mail/%u
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {self.base}/passwd
}}
userdb {{
  driver = passwd-file
  args = username_format=%u {self.base}/passwd
}}
service imap-login {{
  inet_listener imap {{
    address = 127.0.0.1
    port = {self.port}
  }}
  inet_listener imaps {{
    port = 0
  }}
}}
service anvil {{
  chroot =
}}
service imap-login {{
  chroot =
}}
""")
        return config

    def __enter__(self) -> Dovecot:
        config = self._configure()
        self.proc = subprocess.Popen([shutil.which("dovecot") or "/usr/sbin/dovecot", "-F", "-c", str(config)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            wait_for_port(self.port, "dovecot", self.proc)
        except RuntimeError:
            log = (self.base / "dovecot.log").read_text() if (self.base / "dovecot.log").exists() else ""
            raise RuntimeError(f"dovecot did not start: {log[-2000:]}") from None
        return self

    def stop(self) -> None:
        stop_process(self.proc)

    def __exit__(self, *exc: object) -> None:
        self.stop()
        shutil.rmtree(self.base, ignore_errors=True)

    def client(self, user: str) -> imaplib.IMAP4:
        imap = imaplib.IMAP4("127.0.0.1", self.port, timeout=10)
        imap.login(user, self.users[user])
        return imap

    def create(self, user: str, folder: str) -> None:
        with self.client(user) as imap:
            imap.create(folder)

    def deliver(self, user: str, folder: str, data: bytes) -> int:
        """The message appended to the folder: its UID."""
        with self.client(user) as imap:
            typ, answer = imap.append(folder, None, None, data)
            assert typ == "OK", answer
            # APPENDUID (RFC 4315): [APPENDUID <uidvalidity> <uid>]
            return int(answer[0].decode().split("APPENDUID ")[1].split()[1].rstrip("]"))

    def expunge(self, user: str, folder: str, uid: int) -> None:
        with self.client(user) as imap:
            imap.select(folder)
            imap.uid("STORE", str(uid), "+FLAGS.SILENT", r"(\Deleted)")
            imap.expunge()

    def move(self, user: str, source: str, uid: int, target: str) -> int:
        with self.client(user) as imap:
            imap.select(source)
            typ, answer = imap.uid("MOVE", str(uid), target)
            assert typ == "OK", answer
            moved = [line for line in answer + imap.untagged_responses.get("OK", []) if b"COPYUID" in (line or b"")]
            return int(moved[0].decode().split("COPYUID ")[1].split()[2].rstrip("]")) if moved else -1


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
