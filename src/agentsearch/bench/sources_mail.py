"""What a mail source's run costs: messages per second read from a real IMAP server, and an unchanged run's IMAP
commands and time.

Dovecot (``agentsearch.devstack.dovecot``, Debian's ``dovecot-imapd``) is started on 127.0.0.1 with one mailbox of
``--pages`` messages in INBOX (each a short e-mail with a small text attachment); a fresh database (the machine's
PostgreSQL, or with ``--sqlite`` a SQLite file) holds a collection and one mail source over it. The first run lists
the folder, asks each message's size and fetches it, storing each as a ``pending`` document for the parsing queue
(the tasks it would send are counted, not sent: parsing the e-mails and embedding are the ingestion's). Then
``--rounds`` runs over the unchanged mailbox: each opens the folder, finds its state the last run's, and reads no
message. Medians of the rounds; the IMAP commands a run sends are counted at the client.

    agentsearch bench sources --kind mail --pages 1000 --rounds 5
"""

from __future__ import annotations

import imaplib
import statistics
from typing import Any

from cryptography.fernet import Fernet
from pydantic import SecretStr

from agentsearch.bench.retention import scratch_database
from agentsearch.bench.sources import timed_run
from agentsearch.devstack.dovecot import Dovecot, installed, message
from agentsearch.pipeline.platform.settings import Settings
from agentsearch.pipeline.platform.tables.collections import CollectionRow
from agentsearch.pipeline.platform.tables.users import DEFAULT_USER_ID
from agentsearch.pipeline.sources.store import create_source


class _Commands:
    """Counts the IMAP commands every client of the process sends (``IMAP4._command``), while entered."""

    def __init__(self) -> None:
        self.count = 0
        self._original = imaplib.IMAP4._command  # type: ignore[attr-defined]

    def __enter__(self) -> _Commands:
        original = self._original

        def counted(imap: Any, name: str, *args: Any) -> Any:
            self.count += 1
            return original(imap, name, *args)

        imaplib.IMAP4._command = counted  # type: ignore[attr-defined]
        return self

    def __exit__(self, *exc: object) -> None:
        imaplib.IMAP4._command = self._original  # type: ignore[attr-defined]


def measure(messages: int, rounds: int, sqlite: bool) -> dict[str, Any]:
    if installed() is None:
        raise RuntimeError("dovecot is not installed: make services (Debian's dovecot-imapd)")
    settings = Settings(egress_allow=["127.0.0.1"], sources_key=SecretStr(Fernet.generate_key().decode()))
    with Dovecot({"bench": "bench"}) as imap, scratch_database(sqlite) as (db, database):
        imap.deliver_many("bench", "INBOX", [
            message(f"Report {n}", f"Report {n} of the bench mailbox: wind, solar and grain silos, item "
                                   f"{n * 7919 % 1000}.", {f"notes-{n}.txt": f"Notes of report {n}.".encode()})
            for n in range(messages)])
        with db.session() as s:
            collection = CollectionRow(user_id=DEFAULT_USER_ID, name="bench-mail", embedding_model="m")
            s.add(collection)
            s.flush()
            source_id = create_source(s, settings, collection, DEFAULT_USER_ID, "mail", {
                "host": "127.0.0.1", "port": imap.port, "username": "bench", "password": "bench", "tls": "none",
                "max_messages": messages}, None, True).id
        with _Commands() as first_commands:
            first, first_s, first_tasks = timed_run(db, settings, source_id)
        if first["documents"]["new"] != messages:
            raise RuntimeError(f"the first run read {first['documents']} of {messages} messages")
        times, commands = [], []
        for _ in range(rounds):
            with _Commands() as counted:
                again, seconds, sent = timed_run(db, settings, source_id)
            if again["documents"]["unchanged"] != messages or sent:
                raise RuntimeError(f"an unchanged run found {again['documents']} and sent {sent} tasks")
            times.append(seconds)
            commands.append(counted.count)
    return {"kind": "mail", "database": database, "messages": messages, "rounds": rounds,
            "first_run_s": round(first_s, 3), "documents_per_s": round(messages / first_s, 1),
            "first_run_tasks": first_tasks, "first_run_imap_commands": first_commands.count,
            "unchanged_run_s_median": round(statistics.median(times), 3),
            "unchanged_run_imap_commands_median": statistics.median(commands),
            "unchanged_run_documents_stored": 0}
