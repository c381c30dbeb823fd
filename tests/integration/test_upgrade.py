"""Upgrades on real PostgreSQL: every migration from the schema before it with rows in it, and the previous release's
database migrated to head under the current stack, beside messages its API had queued.

Every migration N is run on a database at N-1 holding one row in every table, built from the column types of the
tables as they are at N-1 (``tests.support.schema_rows.fill``), and the previous release's rows for the key tables
cut to N-1's columns (``tests.support.previous_release.rows``): after the upgrade every row is there with every value
it had, then again after the downgrade to N-1, and the upgrade runs once more on it. The steps are read from the
migrations themselves, so a migration added later is covered without a change here. At head the rows are read
through the current models and stores as well.

The previous release's database (its schema head, ``PREVIOUS_HEAD``, with its rows) is then migrated by
``agentsearch migrate`` as an operator would, and an API and a worker of the current code run on it: its jobs,
documents, configs, webhooks and conversations read through the API; a job the release had queued (its message as
the release's API sent it) runs to its end on the current worker, and so does a new job with the release's agent
configs; a document the release's API sends again is indexed; and the release's own code reads the rows the
current code wrote and what it hands between tasks (``capture.py read``, on the release's tree from git).
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from types import SimpleNamespace

import httpx
import psycopg
import pytest
from alembic import command
from alembic.script import ScriptDirectory
from celery import Celery
from sqlalchemy import create_engine, select
from sqlalchemy.pool import NullPool

from agentsearch.api.routes.jobs import job_view
from agentsearch.devstack import BIN, PG_ADMIN, REPO
from agentsearch.migrations import alembic_config, upgrade
from agentsearch.pipeline.ingestion.progress import collection_progress
from agentsearch.pipeline.job.conversation import turns_of
from agentsearch.pipeline.job.job_state import JobState
from agentsearch.pipeline.job.job_store import JobStore
from agentsearch.pipeline.platform.db import Base, Database
from agentsearch.pipeline.platform.tables.jobs import JobRow
from agentsearch.pipeline.platform.tables.webhooks import WebhookDeliveryRow
from tests.integration.conftest import SAMPLE_CORPUS, extra_api_and_worker, wait_job
from tests.support.previous_release import rows as release
from tests.support.previous_release.messages import PREVIOUS_HEAD, load
from tests.support.previous_release.tree import release_tree
from tests.support.schema_rows import Rows, fill, insert_known, merged, primary_keys, reflect, snapshot

pytestmark = pytest.mark.integration

SCRIPTS = ScriptDirectory.from_config(alembic_config(PG_ADMIN))
# (N-1, N) for every migration, oldest first; N-1 is None for the first.
STEPS = [(script.down_revision, script.revision) for script in reversed(list(SCRIPTS.walk_revisions()))]
HEAD = SCRIPTS.get_current_head()


def _url(name: str) -> str:
    return PG_ADMIN.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://") + f"/{name}"


def _admin(sql: str) -> None:
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(sql)


class Walk:
    """One database taken through every migration in turn, rows written at each revision on the way: a step's
    database holds what every revision before it wrote. (One database, not a fresh one a step: each DROP DATABASE
    waits for a checkpoint of the shared server, two seconds and more.)"""

    def __init__(self) -> None:
        self.name = f"agentsearch_upgrade_{uuid.uuid4().hex[:8]}"
        self.url = _url(self.name)
        self.at: str | None = None
        self.written: Rows = {}
        self.keys: dict[str, list[str]] = {}


@pytest.fixture(scope="module")
def walk() -> Iterator[Walk]:
    database = Walk()
    _admin(f'CREATE DATABASE "{database.name}"')
    try:
        yield database
    finally:
        _admin(f'DROP DATABASE IF EXISTS "{database.name}" WITH (FORCE)')


def _changed(before: dict, after: dict) -> list[str]:
    """The rows of ``before`` that ``after`` lost, or whose values (of the columns both have) differ."""
    problems = []
    for key, row in before.items():
        now = after.get(key, row)  # a table the migration dropped is its own business
        if now is None:
            problems.append(f"{key}: gone")
            continue
        problems += [f"{key}.{column}: {row[column]!r} -> {now[column]!r}" for column in row
                     if column in now and now[column] != row[column]]
    return problems


@pytest.mark.parametrize(("before", "after"), STEPS, ids=[rev for _, rev in STEPS])
def test_a_migration_keeps_every_row_written_before_it(walk, before, after):
    if walk.at != before:
        pytest.fail(f"the database is at {walk.at}, not {before}: an earlier step failed")
    engine = create_engine(walk.url, poolclass=NullPool)
    with engine.begin() as conn:
        schema = reflect(conn)
        walk.keys |= primary_keys(schema)
        walk.written = merged(walk.written, insert_known(conn, schema, release.release_rows()), fill(conn, schema))
        kept = snapshot(conn, walk.written, walk.keys)
    upgrade(walk.url, after)
    with engine.connect() as conn:
        assert _changed(kept, snapshot(conn, walk.written, walk.keys)) == [], f"{after} changed rows before it"
    command.downgrade(alembic_config(walk.url), before or "base")
    with engine.connect() as conn:
        assert _changed(kept, snapshot(conn, walk.written, walk.keys)) == [], f"{after}'s downgrade changed rows"
    upgrade(walk.url, after)
    engine.dispose()
    walk.at = after
    if after == HEAD:
        _read_through_current_code(walk.url, walk.written)


def _read_through_current_code(url: str, written: dict) -> None:
    """At head: every row read by the current models, and the release's rows by the stores and the job view."""
    db = Database(url)
    try:
        with db.session() as s:
            for mapper in Base.registry.mappers:
                table = mapper.class_.__tablename__
                assert len(s.scalars(select(mapper.class_)).all()) >= len(written.get(table, [])), table
            assert [t.answer for t in turns_of(s, release.CONVERSATION)] == [
                release.captured()["response"]["answer"]]
            progress = collection_progress(s, release.UPLOADS)
            assert progress is not None and progress.documents_total >= 1
            deliveries = s.scalars(select(WebhookDeliveryRow).where(
                WebhookDeliveryRow.webhook_id == release.WEBHOOK)).all()
            assert sorted(d.status for d in deliveries) == ["delivered", "failed", "pending"]
            cached = s.get(JobRow, release.JOBS["cached"])
            view = job_view(SimpleNamespace(db=db, settings=SimpleNamespace(artifact_max_bytes=1 << 20)), cached)
        jobs = JobStore(db)
        assert base64.b64decode(view["response"]["agent_artifacts"][0]["data"]) == release.SUMMARY_BYTES
        assert len(jobs.load_state(str(release.JOBS["running"])).documents) == 1
        assert len(jobs.for_assembly(str(release.JOBS["succeeded"]))[2]) == len(release.captured()["specs"])
        assert jobs.status(str(release.JOBS["cancelled"])) == "cancelled"
    finally:
        db.dispose()


# -- the previous release's database under the current stack --------------------------------------------------


# The upgraded deployment's broker, results and caches: Redis databases of the suite's stack no other test uses.
BROKER_DB, RESULTS_DB, CACHE_DB = 12, 13, 14


@dataclass
class Upgraded:
    """The previous release's database migrated to head, with an API and a worker of the current code on it."""

    database_url: str
    env: dict[str, str]
    api_url: str = ""

    def http(self, api_key: str) -> httpx.Client:
        return httpx.Client(base_url=self.api_url, timeout=30, headers={"Authorization": f"Bearer {api_key}"})

    def sql(self, query: str, *params):
        with psycopg.connect(self.database_url.replace("+psycopg", "")) as conn:
            return conn.execute(query, params).fetchall()


@pytest.fixture(scope="module")
def upgraded(stack, tmp_path_factory) -> Iterator[Upgraded]:
    """The database the previous release left (its schema head, its rows) migrated by ``agentsearch migrate`` as an
    operator upgrades; then the current API and worker on it, beside the suite's stack (its Redis server and
    Milvus, on Redis databases of their own)."""
    name = f"agentsearch_release_{uuid.uuid4().hex[:8]}"
    _admin(f'CREATE DATABASE "{name}"')
    deployment = Upgraded(_url(name), {
        **stack.env, "AGENTSEARCH_DATABASE_URL": _url(name),
        "AGENTSEARCH_BROKER_URL": f"{stack.redis_base}/{BROKER_DB}",
        "AGENTSEARCH_RESULT_BACKEND": f"{stack.redis_base}/{RESULTS_DB}",
        "AGENTSEARCH_REDIS_URL": f"{stack.redis_base}/{CACHE_DB}"})
    try:
        upgrade(deployment.database_url, PREVIOUS_HEAD)
        engine = create_engine(deployment.database_url, poolclass=NullPool)
        with engine.begin() as conn:
            schema = reflect(conn)
            insert_known(conn, schema, release.release_rows())
            fill(conn, schema)
        engine.dispose()
        subprocess.run([str(BIN / "agentsearch"), "migrate"], env=deployment.env, check=True, capture_output=True)
        with extra_api_and_worker(tmp_path_factory.mktemp("upgraded"), deployment.env, "celery,artifacts,ingest",
                                  4, "upgraded") as deployment.api_url:
            yield deployment
    finally:
        _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_the_previous_release_rows_read_through_the_api_after_the_upgrade(upgraded):
    assert upgraded.sql("SELECT version_num FROM alembic_version") == [(HEAD,)]
    with upgraded.http(release.API_KEY) as http:
        listed = {j["job_id"]: j["status"] for j in http.get("/v1/jobs", params={"limit": 50}).json()["items"]}
        assert listed == {str(job_id): status if status != "cached" else "succeeded"
                          for status, job_id in release.JOBS.items()}
        succeeded = http.get(f"/v1/jobs/{release.JOBS['succeeded']}").json()
        assert succeeded["response"]["answer"] == release.captured()["response"]["answer"]
        artifact = succeeded["response"]["agent_artifacts"][0]
        assert base64.b64decode(artifact["data"]) == release.SUMMARY_BYTES
        assert http.get(artifact["url"]).content == release.SUMMARY_BYTES
        cached = http.get(f"/v1/jobs/{release.JOBS['cached']}").json()
        assert cached["cached"] and cached["response"]["agent_artifacts"][0]["data"] == artifact["data"]
        running = http.get(f"/v1/jobs/{release.JOBS['running']}").json()
        assert (running["status"], running["stage"]) == ("running", "post_search:deduplicator")
        assert http.get(f"/v1/jobs/{release.JOBS['failed']}").json()["error"].startswith("agentsearch.core_search")

        uploads = http.get(f"/v1/collections/{release.UPLOADS}").json()
        assert uploads["documents"] == {"pending": 1, "indexed": 1, "failed": 1}
        deliveries = http.get(f"/v1/webhooks/{release.WEBHOOK}/deliveries").json()
        assert sorted((d["status"], len(d["attempts"])) for d in deliveries) == [
            ("delivered", 1), ("failed", 1), ("pending", 0)]
        turns = http.get(f"/v1/conversations/{release.CONVERSATION}").json()["turns"]
        assert [t["answer"] for t in turns] == [release.captured()["response"]["answer"]]
        agents = http.get(f"/v1/collections/{release.COLLECTION}/agents").json()["agents"]
        assert len(agents) == 3 and [a["fallback_agent_config_id"] for a in agents].count(
            str(release.CONFIGS["relevance_filter"])) == 1
    with upgraded.http(release.REVOKED_KEY) as http:
        assert http.get("/v1/jobs").status_code == 401


def test_the_previous_release_work_runs_on_the_current_worker_and_reads_back(upgraded, tmp_path):
    """A job its API queued, a new job with its configs and a document its API sent again run on the current
    worker; then its own code reads the states and rows the current code wrote."""
    documents = [json.loads(line) for line in SAMPLE_CORPUS.read_text().splitlines() if line.strip()]
    with upgraded.http(release.API_KEY) as http:
        assert http.post(f"/v1/collections/{release.COLLECTION}/documents",
                         json={"documents": documents}).status_code == 202
        _wait_indexed(http, release.COLLECTION)

        # The release's API had queued this job (its row, its message) just before the upgrade.
        message = load("job_messages.json")["single"]
        broker = Celery(broker=upgraded.env["AGENTSEARCH_BROKER_URL"])
        with broker.connection_for_write() as conn:
            conn.SimpleQueue("celery").put(message["body"], headers=message["headers"], serializer="json")
        job = wait_job(http, str(release.JOBS["queued"]), timeout_s=120)
        assert job["status"] == "succeeded", job["error"]
        response = job["response"]
        assert "fourth quarter" in response["search_query"] and "$412 million" in response["answer"]
        names = sorted(a["filename"] for a in response["agent_artifacts"])
        assert len(names) == 2 and len(set(names)) == 2, names  # one response agent under two configs

        # A new job with the release's agent configs on its collection.
        submitted = http.post("/v1/search", json={"collection_id": str(release.COLLECTION), "use_cache": False,
                                                  "query": "What was Northwind Energy's revenue in Q4 2025?"})
        job = wait_job(http, submitted.json()["job_id"], timeout_s=120)
        assert job["status"] == "succeeded", job["error"]
        assert [(a["agent_id"], a["status"]) for a in job["response"]["agents"]] == [
            ("language_detector", "ok"), ("deduplicator", "ok"), ("executive_summary", "ok")]

        # The release's API sends a document again: pending, new text, a task of its own id; nothing else changed.
        (row_id, chunks), = upgraded.sql("SELECT id, chunks FROM documents WHERE collection_id = %s AND "
                                         "external_id = %s", release.COLLECTION, documents[0]["id"])
        upgraded.sql("UPDATE documents SET text = text || ' Sent again.', status = 'pending', error = NULL "
                     "WHERE id = %s RETURNING id", row_id)
        broker.send_task("agentsearch.ingest_documents", args=(str(release.COLLECTION), [str(row_id)]),
                         queue="ingest")
        _wait_indexed(http, release.COLLECTION)
    (status, text, chunks_now, attempts), = upgraded.sql("SELECT status, text, chunks, attempts FROM documents "
                                                         "WHERE id = %s", row_id)
    assert (status, attempts) == ("indexed", 0) and text.endswith("Sent again.") and chunks_now >= chunks >= 1
    _release_reads_what_the_current_code_wrote(upgraded, tmp_path)


def _wait_indexed(http, collection_id: uuid.UUID, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while (counts := http.get(f"/v1/collections/{collection_id}").json()["documents"])["pending"]:
        assert time.monotonic() < deadline, f"indexing stuck: {counts}"
        time.sleep(0.2)


def _release_reads_what_the_current_code_wrote(upgraded: Upgraded, tmp_path) -> None:
    """The release's models load the states the current worker handed on, and read every row of the database."""
    tree = release_tree(tmp_path / "release")
    written = release.captured()
    current = JobStore(db := Database(upgraded.database_url))
    written["states"] = {"ran": current.load_state(str(release.JOBS["queued"])).dump(),
                         "queued": JobState.load(written["states"]["queued"]).dump()}
    db.dispose()
    states = tmp_path / "current.json"
    states.write_text(json.dumps(written))
    done = subprocess.run([sys.executable, str(REPO / "tests/support/previous_release/capture.py"), "read",
                           str(states), "--tree", str(tree), "--database", upgraded.database_url],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    read = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(read["states"]) == {"ran", "queued"} and read["job_states"] >= 3
    assert read["tables"]["documents"] >= 5 and read["tables"]["jobs"] >= 7
