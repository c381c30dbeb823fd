"""Retention (src/agentsearch/pipeline/operations/retention.py) on SQLite: which rows go, with what, in batches of what
size; the dry run; the budget; the counter in /metrics; the command line."""

from __future__ import annotations

import json
import uuid
from dataclasses import replace
from datetime import datetime, timedelta

import pytest
from click.testing import CliRunner
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from pydantic import ValidationError
from sqlalchemy import event, func, insert, select

from agentsearch.bench.retention import artifact_row, attempt_row, delivery_row, job_row, owners, turn_row
from agentsearch.cli import main
from agentsearch.pipeline.observability.exposition import AgentSearchCollector
from agentsearch.pipeline.observability.metrics import MetricsRecorder, read_metrics
from agentsearch.pipeline.operations.retention import PRUNED_KINDS, RetentionPolicy, prune
from agentsearch.pipeline.platform.db import Database, utcnow
from agentsearch.pipeline.platform.settings import Settings, get_settings
from agentsearch.pipeline.platform.tables.agentic import AgenticLoopRow, ProfileRunRow, ProfileSetRow
from agentsearch.pipeline.platform.tables.audit import AuditEventRow
from agentsearch.pipeline.platform.tables.conversations import ConversationTurnRow
from agentsearch.pipeline.platform.tables.jobs import ArtifactRow, JobRow
from agentsearch.pipeline.platform.tables.users import DEFAULT_USER_ID
from agentsearch.pipeline.platform.tables.webhooks import WebhookAttemptRow, WebhookDeliveryRow

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=utcnow().tzinfo)
OLD, RECENT = NOW - timedelta(days=31), NOW - timedelta(days=29)
POLICY = RetentionPolicy(jobs_days=30, webhook_deliveries_days=30, conversation_turns_days=90, batch_rows=500)


def add(db: Database, table, *rows: dict) -> list[uuid.UUID]:
    with db.session() as s:
        s.execute(insert(table), list(rows))
    return [row["id"] for row in rows]


def ids(db: Database, table) -> set[uuid.UUID]:
    with db.session() as s:
        return set(s.scalars(select(table.id)))


@pytest.fixture
def owned(migrated_db) -> tuple[uuid.UUID, uuid.UUID, uuid.UUID]:
    """A collection, a webhook and a conversation of the local user."""
    with migrated_db.session() as s:
        return owners(s)


def test_only_finished_jobs_past_retention_go_and_their_artifacts_loops_and_profile_runs_with_them(migrated_db,
                                                                                                  owned):
    collection_id = owned[0]
    old = [job_row(collection_id, status, OLD) for status in ("succeeded", "failed", "cancelled")]
    # A job still queued or running stays however old it is; a finished one younger than the cutoff stays.
    kept = [job_row(collection_id, "running", None, created_at=NOW - timedelta(days=400)),
            job_row(collection_id, "queued", None, created_at=NOW - timedelta(days=400)),
            job_row(collection_id, "succeeded", RECENT)]
    add(migrated_db, JobRow, *old, *kept)
    add(migrated_db, ArtifactRow, *(artifact_row(job["id"], n) for job in old + kept for n in (1, 2)))
    with migrated_db.session() as s:
        profile_set = ProfileSetRow(user_id=DEFAULT_USER_ID, name="p", collection_id=collection_id)
        s.add(profile_set)
        s.flush()
        for job in (old[0], kept[0]):
            s.add(AgenticLoopRow(job_id=job["id"], profile="p"))
            s.add(ProfileRunRow(profile_set_id=profile_set.id, job_id=job["id"]))

    report = prune(migrated_db, POLICY, now=NOW)

    assert ids(migrated_db, JobRow) == {job["id"] for job in kept}
    with migrated_db.session() as s:
        assert set(s.scalars(select(ArtifactRow.job_id))) == {job["id"] for job in kept}
        assert set(s.scalars(select(AgenticLoopRow.job_id))) == set(s.scalars(select(ProfileRunRow.job_id))) == {
            kept[0]["id"]}
    assert report.counts == {**dict.fromkeys(PRUNED_KINDS, 0), "jobs": 3, "artifacts": 6, "agentic_loops": 1,
                             "profile_runs": 1}
    assert report.complete and report.cutoffs["jobs"] == NOW - timedelta(days=30)


def test_a_job_answered_from_cache_keeps_its_source_until_the_copy_goes_too(migrated_db, owned):
    collection_id = owned[0]
    source, old_source = job_row(collection_id, "succeeded", OLD), job_row(collection_id, "succeeded", OLD)
    copy = job_row(collection_id, "succeeded", RECENT, cached_from=source["id"])
    old_copy = job_row(collection_id, "succeeded", OLD, cached_from=old_source["id"])
    add(migrated_db, JobRow, source, old_source, copy, old_copy)
    add(migrated_db, ArtifactRow, artifact_row(source["id"], 1))

    prune(migrated_db, POLICY, now=NOW)
    # The copy serves its source's artifacts: both stay. An old copy and its old source go together.
    assert ids(migrated_db, JobRow) == {source["id"], copy["id"]}
    assert len(ids(migrated_db, ArtifactRow)) == 1

    later = prune(migrated_db, POLICY, now=NOW + timedelta(days=2))
    assert ids(migrated_db, JobRow) == set() and later.counts["artifacts"] == 1


def test_webhook_deliveries_go_once_delivered_or_given_up_with_their_attempts(migrated_db, owned):
    _, webhook_id, _ = owned
    # A delivery names its job by value: it goes by its own setting, whatever became of the job.
    delivered, failed = (delivery_row(webhook_id, uuid.uuid4(), status, OLD) for status in ("delivered", "failed"))
    pending = delivery_row(webhook_id, uuid.uuid4(), "pending", NOW - timedelta(days=90))
    retried = {**delivery_row(webhook_id, uuid.uuid4(), "failed", OLD), "sending_until": NOW + timedelta(seconds=10)}
    recent = delivery_row(webhook_id, uuid.uuid4(), "delivered", RECENT)
    kept = [pending, retried, recent]
    add(migrated_db, WebhookDeliveryRow, delivered, failed, *kept)
    add(migrated_db, WebhookAttemptRow, *(attempt_row(d["id"], n) for d in (delivered, failed, *kept) for n in (1, 2)))

    report = prune(migrated_db, POLICY, now=NOW)

    assert ids(migrated_db, WebhookDeliveryRow) == {d["id"] for d in kept}
    with migrated_db.session() as s:
        assert set(s.scalars(select(WebhookAttemptRow.delivery_id))) == {d["id"] for d in kept}
    assert (report.counts["webhook_deliveries"], report.counts["webhook_attempts"]) == (2, 4)


def test_a_conversation_turn_outlives_its_job_until_its_own_retention(migrated_db, owned):
    collection_id, _, conversation_id = owned
    jobs = [job_row(collection_id, "succeeded", OLD) for _ in range(2)]
    add(migrated_db, JobRow, *jobs)
    young, old = (turn_row(conversation_id, job["id"], NOW - timedelta(days=days)) for job, days in zip(jobs, (31, 91)))
    add(migrated_db, ConversationTurnRow, young, old)

    report = prune(migrated_db, POLICY, now=NOW)

    assert ids(migrated_db, JobRow) == set()  # the young turn now names a job that answers 404
    assert ids(migrated_db, ConversationTurnRow) == {young["id"]}
    assert (report.counts["jobs"], report.counts["conversation_turns"]) == (2, 1)


def test_audit_events_go_after_their_own_retention_and_a_zero_keeps_them(migrated_db):
    old, recent = NOW - timedelta(days=366), NOW - timedelta(days=364)
    add(migrated_db, AuditEventRow, *({"id": i, "at": at, "action": "search", "key_prefix": "as_k", "target_type": "",
                                    "target_id": "", "details": {}} for i, at in enumerate((old, old, recent), 1)))

    dry = prune(migrated_db, POLICY, now=NOW, dry_run=True)
    report = prune(migrated_db, POLICY, now=NOW)

    assert dry.counts["audit_events"] == report.counts["audit_events"] == 2
    assert report.cutoffs["audit_events"] == NOW - timedelta(days=365)
    with migrated_db.session() as s:
        assert list(s.scalars(select(AuditEventRow.id))) == [3]  # the recent one
    assert prune(migrated_db, replace(POLICY, audit_days=0), now=NOW + timedelta(days=3650)).cutoffs[
        "audit_events"] is None


def seed_mix(db: Database, owned, jobs: int) -> None:
    collection_id, webhook_id, conversation_id = owned
    for ended in (OLD, RECENT):
        made = [job_row(collection_id, "succeeded", ended) for _ in range(jobs)]
        add(db, JobRow, *made)
        add(db, ArtifactRow, *(artifact_row(job["id"], 1) for job in made))
        deliveries = [delivery_row(webhook_id, job["id"], "delivered", ended) for job in made]
        add(db, WebhookDeliveryRow, *deliveries)
        add(db, WebhookAttemptRow, *(attempt_row(d["id"], 1) for d in deliveries))
        add(db, ConversationTurnRow, *(turn_row(conversation_id, job["id"], ended - timedelta(days=60))
                                       for job in made))


def test_the_dry_run_counts_exactly_what_the_run_then_deletes_and_deletes_nothing(migrated_db, owned):
    seed_mix(migrated_db, owned, jobs=4)
    with migrated_db.session() as s:
        before = s.scalar(select(func.count()).select_from(JobRow))

    dry = prune(migrated_db, POLICY, dry_run=True, now=NOW)
    assert dry.dry_run and len(ids(migrated_db, JobRow)) == before
    real = prune(migrated_db, POLICY, now=NOW)

    assert dry.counts == real.counts
    assert {k: n for k, n in real.counts.items() if n} == {"jobs": 4, "artifacts": 4, "webhook_deliveries": 4,
                                                            "webhook_attempts": 4, "conversation_turns": 4}
    assert prune(migrated_db, POLICY, dry_run=True, now=NOW).total == 0


def test_each_batch_is_a_transaction_of_at_most_batch_rows(migrated_db, owned):
    seed_mix(migrated_db, owned, jobs=5)
    commits, deletes = [], []
    event.listen(migrated_db.engine, "commit", lambda conn: commits.append(1))
    event.listen(migrated_db.engine, "before_cursor_execute",
                 lambda conn, cursor, statement, *args: deletes.append(statement.split()[2])
                 if statement.startswith("DELETE") else None)
    policy = RetentionPolicy(batch_rows=2)

    report = prune(migrated_db, policy, now=NOW)

    # 5 rows of each kind in batches of 2: 2, 2, 1; the dependants deleted in their row's batch, before it.
    assert deletes.count("jobs") == deletes.count("webhook_deliveries") == deletes.count("conversation_turns") == 3
    assert deletes.count("artifacts") == deletes.count("webhook_attempts") == 3
    # Nine batches, and the audit events' one that found none.
    assert len(commits) == 10 and deletes.index("artifacts") < deletes.index("jobs")
    assert report.counts["jobs"] == report.counts["conversation_turns"] == 5


def test_a_run_stops_when_its_budget_is_spent_and_the_next_goes_on(migrated_db, owned):
    seed_mix(migrated_db, owned, jobs=5)
    ticks = iter(range(1000))
    policy = RetentionPolicy(batch_rows=2)

    first = prune(migrated_db, policy, now=NOW, budget_s=2, clock=lambda: float(next(ticks)))
    assert not first.complete and first.counts["jobs"] == 2  # one batch, then the clock said 2 s had gone
    second = prune(migrated_db, policy, now=NOW)
    assert second.complete and first.counts["jobs"] + second.counts["jobs"] == 5


def test_zero_days_keeps_a_kind_for_ever(migrated_db, owned):
    seed_mix(migrated_db, owned, jobs=2)
    policy = RetentionPolicy(jobs_days=0, webhook_deliveries_days=0, conversation_turns_days=0, audit_days=0)

    report = prune(migrated_db, policy, now=NOW + timedelta(days=3650))

    assert report.total == 0 and set(report.cutoffs.values()) == {None}
    assert len(ids(migrated_db, JobRow)) == 4


def test_the_settings_and_their_defaults(monkeypatch):
    defaults = Settings()
    assert RetentionPolicy.of(defaults) == RetentionPolicy(jobs_days=30, webhook_deliveries_days=30,
                                                           conversation_turns_days=90, audit_days=365,
                                                           batch_rows=500)
    assert (defaults.retention_answer_streams_s, defaults.retention_interval_s) == (3600, 3600.0)
    monkeypatch.setenv("AGENTSEARCH_RETENTION_JOBS_DAYS", "7.5")
    monkeypatch.setenv("AGENTSEARCH_RETENTION_BATCH_ROWS", "50")
    assert RetentionPolicy.of(Settings()) == RetentionPolicy(jobs_days=7.5, batch_rows=50)
    with pytest.raises(ValidationError):
        Settings(retention_answer_streams_s=0)  # a stream always expires
    with pytest.raises(ValidationError):
        Settings(retention_jobs_days=-1)


def test_what_a_run_pruned_is_a_counter_per_kind_in_metrics(redis_client):
    recorder = MetricsRecorder(redis_client)
    recorder.record_retention({**dict.fromkeys(PRUNED_KINDS, 0), "jobs": 3, "artifacts": 7})
    recorder.record_retention({**dict.fromkeys(PRUNED_KINDS, 0), "jobs": 2})
    assert read_metrics(redis_client).retention_pruned["jobs"] == 5

    registry = CollectorRegistry(auto_describe=False)
    registry.register(AgentSearchCollector(redis_client))
    families = text_string_to_metric_families(generate_latest(registry).decode())
    samples = {s.labels["kind"]: s.value for family in families for s in family.samples
               if s.name == "agentsearch_retention_pruned_total"}
    assert samples == {**dict.fromkeys(PRUNED_KINDS, 0.0), "jobs": 5.0, "artifacts": 7.0}


def test_the_command_line_says_what_would_go_then_prunes_it(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTSEARCH_DATA_DIR", str(tmp_path / "data"))
    get_settings.cache_clear()
    try:
        cli = CliRunner()
        empty = cli.invoke(main, ["retention", "run", "--dry-run"])  # migrates the embedded database first
        assert empty.exit_code == 0, empty.output
        assert empty.output.startswith("would go (dry run): 0 rows") and "conversation_turns" in empty.output
        db = Database(get_settings().database_url)
        with db.session() as s:
            owned = owners(s)
        now = utcnow()
        add(db, JobRow, job_row(owned[0], "failed", now - timedelta(days=31)), job_row(owned[0], "failed", now))

        dry = json.loads(cli.invoke(main, ["retention", "run", "--dry-run", "--json"]).output)
        assert dry["dry_run"] and dry["counts"]["jobs"] == 1 and len(ids(db, JobRow)) == 2
        done = cli.invoke(main, ["retention", "run"])
        assert done.exit_code == 0 and done.output.startswith("pruned: 1 rows"), done.output
        assert len(ids(db, JobRow)) == 1
        db.dispose()
    finally:
        get_settings.cache_clear()
