"""Dovecot, the IMAP server, run on its own for the mail source's tests and bench: its configuration under a
temporary folder, a free loopback port, plain authentication against a passwd-file, mail in a maildir there. No
system service is touched (Debian's ``dovecot-imapd``, installed by ``make services``).

Usage::

    with Dovecot(users={"ana": "s3cret"}) as imap:
        imap.deliver("ana", "INBOX", message("Hello", "Body."))       # APPEND over IMAP, as a mail arriving
        imap.create("ana", "HR")
        imap.expunge("ana", "INBOX", uid)                            # a message gone
        imap.move("ana", "INBOX", uid, "HR")

    with Dovecot(users={"ana": "s3cret"}, acl=True) as imap:
        imap.setacl("ana", "HR", "$hr", "lr")                         # RFC 4314 SETACL: the hr group may read HR
"""

from __future__ import annotations

import grp
import imaplib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from email import message_from_bytes, policy
from email.message import EmailMessage
from pathlib import Path

from agentsearch.devstack.processes import free_port, stop_process, wait_for


def installed() -> str | None:
    """The dovecot binary, when the package is installed."""
    return shutil.which("dovecot") or ("/usr/sbin/dovecot" if Path("/usr/sbin/dovecot").exists() else None)


def message(subject: str, body: str, attachments: dict[str, bytes] | None = None, sender: str = "ana@example.org"
            ) -> bytes:
    """An e-mail's bytes, with files attached (an ``.eml`` attached as a message)."""
    mail = EmailMessage()
    mail["From"], mail["To"], mail["Subject"] = sender, "team@example.org", subject
    mail["Date"] = "Sun, 01 Nov 2026 08:00:00 +0000"
    mail.set_content(body)
    for name, data in (attachments or {}).items():
        if name.endswith(".eml"):
            mail.add_attachment(message_from_bytes(data, policy=policy.default), filename=name)
        else:
            mail.add_attachment(data, maintype="application", subtype="octet-stream", filename=name)
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

    def __init__(self, users: dict[str, str], tls: bool = False, acl: bool = False) -> None:
        self.base = Path(tempfile.mkdtemp(prefix="agentsearch-dovecot-"))
        self.users, self.port = users, free_port()
        # With ``tls``: IMAPS on ``tls_port`` and STARTTLS on ``port``, with a certificate for 127.0.0.1 made here,
        # whose PEM (``ca_pem``) is what a client must trust.
        self.tls_port = free_port() if tls else 0
        self.ca_pem = ""
        # With ``acl``: the acl and imap_acl plugins (RFC 4314 GETACL, SETACL, MYRIGHTS), ACLs kept in files beside
        # each folder, "anyone" allowed as an identifier.
        self.acl = acl
        self.proc: subprocess.Popen | None = None

    def _certificate(self) -> str:
        """``ssl = required`` with a self-signed certificate for 127.0.0.1 (key and certificate files here)."""
        import datetime
        import ipaddress

        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
        now = datetime.datetime.now(datetime.UTC)
        cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
                .not_valid_after(now + datetime.timedelta(days=1))
                .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                               critical=False)
                .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                .sign(key, hashes.SHA256()))
        self.ca_pem = cert.public_bytes(serialization.Encoding.PEM).decode()
        (self.base / "cert.pem").write_text(self.ca_pem)
        (self.base / "key.pem").write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                                              serialization.PrivateFormat.PKCS8,
                                                              serialization.NoEncryption()))
        return f"ssl = yes\nssl_cert = <{self.base}/cert.pem\nssl_key = <{self.base}/key.pem\n"

    def _configure(self) -> Path:
        uid, gid = _mail_user()
        for sub in ("run", "state", "mail"):
            (self.base / sub).mkdir(parents=True, exist_ok=True)
        os.chown(self.base / "mail", uid, gid)
        os.chmod(self.base, 0o755)  # noqa: S103 - Dovecot's own users read its config
        (self.base / "passwd").write_text("".join(
            f"{name}:{{PLAIN}}{password}:{uid}:{gid}::{self.base}/mail/{name}::\n"
            for name, password in self.users.items()))
        # As root, Dovecot's own unprivileged users; otherwise every process runs as the caller, in its group.
        internal = "dovecot" if os.getuid() == 0 else pwd.getpwuid(os.getuid()).pw_name
        login = "dovenull" if os.getuid() == 0 else internal
        group = "dovecot" if os.getuid() == 0 else grp.getgrgid(os.getgid()).gr_name
        config = self.base / "dovecot.conf"
        config.write_text(f"""
protocols = imap
listen = 127.0.0.1
base_dir = {self.base}/run
state_dir = {self.base}/state
log_path = {self.base}/dovecot.log
{self._certificate() if self.tls_port else "ssl = no"}
disable_plaintext_auth = no
auth_mechanisms = plain login
default_internal_user = {internal}
default_internal_group = {group}
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
    address = 127.0.0.1
    port = {self.tls_port}
  }}
}}
{self._acl_plugins() if self.acl else ""}
service anvil {{
  chroot =
}}
service imap-login {{
  chroot =
}}
""")
        return config

    @staticmethod
    def _acl_plugins() -> str:
        return """mail_plugins = $mail_plugins acl
protocol imap {
  mail_plugins = $mail_plugins imap_acl
}
plugin {
  acl = vfile
  acl_anyone = allow
}
"""

    def __enter__(self) -> Dovecot:
        config = self._configure()
        self.proc = subprocess.Popen([installed() or "", "-F", "-c", str(config)], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, start_new_session=True)
        wait_for(self._accepts, 15, "dovecot", self.proc, self.base / "dovecot.log")
        return self

    def _accepts(self) -> bool:
        socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
        return True

    def stop(self) -> None:
        if self.proc is not None:
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
        return self.deliver_many(user, folder, [data])[0]

    def deliver_many(self, user: str, folder: str, messages: list[bytes]) -> list[int]:
        """The messages appended to the folder over one connection: their UIDs."""
        uids = []
        with self.client(user) as imap:
            for data in messages:
                typ, answer = imap.append(folder, None, None, data)
                if typ != "OK":
                    raise RuntimeError(f"APPEND to {folder} refused: {answer!r}")
                # APPENDUID (RFC 4315): [APPENDUID <uidvalidity> <uid>]
                uids.append(int(answer[0].decode().split("APPENDUID ")[1].split()[1].rstrip("]")))
        return uids

    def setacl(self, user: str, folder: str, identifier: str, rights: str) -> None:
        """The folder's ACL entry for ``identifier`` (``bob``, ``$hr``, ``anyone``, ``-carol``) set to ``rights``
        (RFC 4314 letters), or removed when ``rights`` is empty; as ``user``, who must hold the administer right."""
        with self.client(user) as imap:
            typ, answer = imap.deleteacl(folder, identifier) if not rights else imap.setacl(folder, identifier, rights)
            if typ != "OK":
                raise RuntimeError(f"ACL of {folder} for {identifier} refused: {answer!r}")

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
