"""A progress report on SQLite (the embedded mode): one ``UPDATE ... RETURNING``, as ``progress_pg`` on PostgreSQL.

The statement does what loading the row through the ORM did: ``queued`` becomes ``running`` with its start time,
the worker's node is recorded, the stage log grows when the stage changes (``json_insert``), the agents' records
and timings are replaced, and only a job still queued or running is updated, so the report is also the
cancellation check. Loading the row read and parsed every JSON column of it, the saved state and the request
included, to change a few: every step of an embedded job paid that before its work, and the answer once more as it
ended. The statement is written out and sent through ``exec_driver_sql`` (building it with SQLAlchemy's
expressions cost as much as the ORM's load), in the column formats SQLAlchemy stores on SQLite: a UUID as 32 hex
digits, a time as ``YYYY-MM-DD HH:MM:SS.ffffff`` in UTC. It is atomic too, with no read and write of the stage log
in turn. A response agent's records are added the same way (``append_runs``): that column read and written alone.

Usage::

    ended = not report(db, job_id, "pre_search:translator", state, keep_state=False, node=None)
"""

from __future__ import annotations

import json
import threading
import uuid
from typing import Any

from agentsearch.pipeline.job.job_state import JobState
from agentsearch.pipeline.job.progress_pg import RUNS, record_params
from agentsearch.pipeline.job.progress_rule import Dialect, report_statement, statements
from agentsearch.pipeline.platform.db import Database, utcnow
from agentsearch.pipeline.records.agent_runs import AgentRun

_STORED_TIME = "%Y-%m-%d %H:%M:%S.%f"


# SQLite's parameters as they are; json_insert takes the result of json_object as JSON, not as a string.
DIALECT = Dialect(
    value=lambda name: f":{name}",
    text=lambda name: f":{name}",
    json=lambda name: f":{name}",
    stage_changed="stage IS NOT :stage",
    stage_log_grown="json_insert(COALESCE(stage_log, '[]'), '$[#]', json_object('stage', :stage, 'at', :at))",
)
STATEMENTS = statements(lambda with_state, keep_state: report_statement(DIALECT, with_state, keep_state))
STATUS = "SELECT status FROM jobs WHERE id = :job_id"


def report(db: Database, job_id: str, stage: str, state: JobState | None, keep_state: bool,
           node: str | None) -> bool:
    """Record the stage (and state); False when the job has ended. ``keep_state``: the state is saved too."""
    now = utcnow()
    params: dict[str, Any] = {"job_id": uuid.UUID(job_id).hex, "stage": stage, "at": now.isoformat(),
                              "now": now.strftime(_STORED_TIME), "node": node, **record_params(state, keep_state)}
    statement = STATEMENTS[state is not None, keep_state and state is not None]
    # As on PostgreSQL, only a report that keeps the state (what assemble builds the response from) waits for the
    # disk; the others are consistent after a crash of the machine, and may be lost by it.
    with (db.engine if keep_state else db.progress_engine).begin() as conn:
        if conn.exec_driver_sql(statement, params).first() is not None:
            return True
        # Nothing updated: the job has ended (False), or it has no row (a step run on its own: nothing to stop).
        return conn.exec_driver_sql(STATUS, {"job_id": params["job_id"]}).first() is None


READ_RUNS = "SELECT status, agent_runs FROM jobs WHERE id = :job_id"
WRITE_RUNS = "UPDATE jobs SET agent_runs = :runs, updated_at = :now WHERE id = :job_id"
# The embedded mode is one process whose worker threads end response agents at once: a read and a write of the
# list by two of them in turn would lose one record.
_appending = threading.Lock()


def append_runs(db: Database, job_id: str, runs: list[AgentRun], probe: dict[str, Any]) -> bool:
    """Add ``runs`` to a running job's records (``JobStore.record_runs``), reading and writing that column alone;
    ``probe`` is what a record already added contains (a redelivered step adds nothing twice). False when nothing
    was added."""
    params: dict[str, Any] = {"job_id": uuid.UUID(job_id).hex}
    with _appending, db.progress_engine.begin() as conn:
        row = conn.exec_driver_sql(READ_RUNS, params).first()
        if row is None or row[0] not in ("queued", "running"):
            return False
        stored = json.loads(row[1]) if row[1] else []
        if any(all(r.get(k) == v for k, v in probe.items()) for r in stored):
            return False
        added = RUNS.dump_python(runs, mode="json")
        conn.exec_driver_sql(WRITE_RUNS, {**params, "runs": json.dumps([*stored, *added]),
                                          "now": utcnow().strftime(_STORED_TIME)})
        return True
