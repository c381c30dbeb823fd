"""What a progress report does to a job's row, stated once as one ``UPDATE ... RETURNING``, and written out for each
database by its dialect (``progress_pg`` on PostgreSQL, ``progress_sqlite`` in the embedded mode).

The rule: ``queued`` becomes ``running`` with its start time (kept if it has one), the worker's node is recorded when
one is given, the stage log grows by ``{stage, at}`` when the stage changes, the stage is set, the agents' records
and timings (and the state, when it is kept) are replaced, and only a job still queued or running is updated, so the
report is also the cancellation check. Every column on the right-hand side is the row as it was before the
statement. The dialects differ only in how a parameter is written and typed and how a JSON list grows.

Usage::

    STATEMENTS = statements(lambda with_state, keep_state: report_statement(DIALECT, with_state, keep_state))
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Dialect:
    """How one database writes the rule's parts."""

    value: Callable[[str], str]  # a parameter as it is (a time, an id)
    text: Callable[[str], str]  # a parameter compared with or stored in a text column
    json: Callable[[str], str]  # a parameter stored in a JSON column
    stage_changed: str  # true when the row's stage is not the reported one
    stage_log_grown: str  # the stage log with {stage, at} added at its end


def report_statement(dialect: Dialect, with_state: bool, keep_state: bool) -> str:
    """The report's statement: with the agents' records and timings (``with_state``), and the state (``keep_state``)."""
    records = ""
    if with_state:
        records = f"agent_runs = {dialect.json('runs')}, timings_ms = {dialect.json('timings')},"
        if keep_state:
            records += f" state = {dialect.json('state')},"
    now = dialect.value("now")
    # Built from this module's fragments and the dialect's; every value a report sends is a bound parameter.
    return f"""
        UPDATE jobs SET
            status = CASE WHEN status = 'queued' THEN 'running' ELSE status END,
            started_at = CASE WHEN status = 'queued' THEN COALESCE(started_at, {now}) ELSE started_at END,
            worker = COALESCE({dialect.text('node')}, worker),
            stage_log = CASE WHEN {dialect.stage_changed}
                THEN {dialect.stage_log_grown}
                ELSE stage_log END,
            stage = {dialect.text('stage')},
            {records}
            updated_at = {now}
        WHERE id = {dialect.value('job_id')} AND status IN ('queued', 'running')
        RETURNING id"""  # noqa: S608


def statements(build: Callable[[bool, bool], str]) -> dict[tuple[bool, bool], str]:
    """The report's statement for each (with the records, with the state) that is sent, by ``build``."""
    return {(False, False): build(False, False), (True, False): build(True, False), (True, True): build(True, True)}
