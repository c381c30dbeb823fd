"""A progress report on PostgreSQL: one ``UPDATE ... RETURNING``, one round trip (``JobStore.progress``).

What ``JobStore.progress`` does with the loaded row on SQLite is done here by the statement itself: ``queued``
becomes ``running`` with its start time, the worker's node is recorded, the stage log grows when the stage
changes (``jsonb ||``), and the agents' records and timings are replaced. Only a job still queued or running is
updated, so the report is also the cancellation check; a cancel committed before it is seen (the row lock orders
the two).

Every agent step sends one, so it skips what it can: no ORM (the statement is written out and sent through
``exec_driver_sql``), no ``BEGIN`` and ``COMMIT`` and no wait for the WAL flush (``Database.progress_engine``), no
pre-ping (a connection found broken is replaced and the report sent once more: sending it twice changes nothing,
as the stage log grows only when the stage changes), and the records are serialised by pydantic in one call.

Usage::

    ended = not report(db, job_id, "pre_search:translator", state, keep_state=False, node="w1@host")
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from pydantic import TypeAdapter
from sqlalchemy import Connection
from sqlalchemy.exc import DBAPIError

from agentsearch.pipeline.job.job_state import JobState
from agentsearch.pipeline.job.progress_rule import Dialect, report_statement, statements
from agentsearch.pipeline.platform.db import Database, utcnow
from agentsearch.pipeline.records.agent_runs import AgentRun

RUNS = TypeAdapter(list[AgentRun])


# PostgreSQL's parameters typed where the column or function needs it; the stage log grows with ``jsonb ||``.
DIALECT = Dialect(
    value=lambda name: f"%({name})s",
    text=lambda name: f"CAST(%({name})s AS varchar)",
    json=lambda name: f"CAST(%({name})s AS jsonb)",
    stage_changed="stage IS DISTINCT FROM CAST(%(stage)s AS varchar)",
    stage_log_grown="COALESCE(stage_log, CAST('[]' AS jsonb)) || jsonb_build_array("
                    "jsonb_build_object('stage', CAST(%(stage)s AS text), 'at', CAST(%(at)s AS text)))",
)


def record_params(state: JobState | None, keep_state: bool) -> dict[str, str]:
    """The records, timings and (``keep_state``) state a report writes, as JSON; none without a state."""
    if state is None:
        return {}
    params = {"runs": RUNS.dump_json(state.agent_runs).decode(), "timings": json.dumps(state.timings_ms)}
    if keep_state:
        params["state"] = state.model_dump_json()
    return params


STATEMENTS = statements(lambda with_state, keep_state: report_statement(DIALECT, with_state, keep_state))
STATUS = "SELECT status FROM jobs WHERE id = %(job_id)s"


def report(db: Database, job_id: str, stage: str, state: JobState | None, keep_state: bool,
           node: str | None) -> bool:
    """Record the stage (and state); False when the job has ended. ``keep_state``: the state is saved too, and
    committed durably (it is what ``assemble`` builds the response from)."""
    now = utcnow()
    params: dict[str, Any] = {"job_id": uuid.UUID(job_id), "stage": stage, "at": now.isoformat(), "now": now,
                              "node": node, **record_params(state, keep_state)}
    statement = STATEMENTS[state is not None, keep_state and state is not None]
    if keep_state:
        with db.engine.begin() as conn:
            return _reported(conn, statement, params)
    try:
        with db.progress_engine.connect() as conn:
            return _reported(conn, statement, params)
    except DBAPIError as exc:
        if not exc.connection_invalidated:
            raise
    with db.progress_engine.connect() as conn:
        return _reported(conn, statement, params)


def _reported(conn: Connection, statement: str, params: dict[str, Any]) -> bool:
    if conn.exec_driver_sql(statement, params).first() is not None:
        return True
    # Nothing updated: the job has ended (False), or it has no row (a step run on its own: nothing to stop).
    return conn.exec_driver_sql(STATUS, {"job_id": params["job_id"]}).first() is None


APPEND = """
        UPDATE jobs SET
            agent_runs = COALESCE(agent_runs, CAST('[]' AS jsonb)) || CAST(%(runs)s AS jsonb),
            updated_at = %(now)s
        WHERE id = %(job_id)s AND status IN ('queued', 'running')
            AND NOT COALESCE(agent_runs, CAST('[]' AS jsonb)) @> CAST(%(probe)s AS jsonb)
        RETURNING id"""


def append_runs(db: Database, job_id: str, runs: list[AgentRun], probe: dict[str, Any]) -> bool:
    """Add ``runs`` to the job's records, in one statement (``JobStore.record_runs``): response agents end side by
    side, and each adds its own without reading the others'. ``probe`` is what a record already added contains (a
    redelivered step adds nothing twice). False when nothing was added."""
    params = {"job_id": uuid.UUID(job_id), "runs": RUNS.dump_json(runs).decode(), "now": utcnow(),
              "probe": json.dumps([probe])}
    try:
        with db.progress_engine.connect() as conn:
            return conn.exec_driver_sql(APPEND, params).first() is not None
    except DBAPIError as exc:
        if not exc.connection_invalidated:
            raise
    with db.progress_engine.connect() as conn:
        return conn.exec_driver_sql(APPEND, params).first() is not None
