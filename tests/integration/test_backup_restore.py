"""``agentsearch backup`` and ``agentsearch restore`` on the real stack.

The stack's database, with two users and their keys, a collection, an agent config, a job and its artifact, is
backed up; restored into a fresh PostgreSQL database beside a fresh data dir, Milvus and broker; the collection
reindexed there; and a second API and worker on the restored database serve the same users (an old key
authenticates), collections, configs, jobs and artifact, and answer the same questions with the same documents.
A backup with a changed file, and a restore into a database that holds tables, are refused and change nothing.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import uuid

import httpx
import psycopg
import pytest

from agentsearch.devstack import PG_ADMIN, start_milvus_lite
from agentsearch.pipeline.operations.backup import PG_DUMP_FILE, libpq_url
from tests.integration.conftest import (
    BIN,
    REPO,
    SAMPLE_CORPUS,
    extra_api_and_worker,
    free_port,
    own_collection,
    search,
    stop_process,
    use_agents,
)
from tests.support.rankings import KEYWORD, agrees, ranked, same_keyword_ranking

pytestmark = pytest.mark.integration

QUESTIONS = ["What was Northwind's revenue in the second quarter of 2025?",
             "How does battery storage support the grid?"]


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "agentsearch"), *args], cwd=REPO, env=env, capture_output=True, text=True)


def rows(database_url: str, query: str) -> list[tuple]:
    with psycopg.connect(libpq_url(database_url)) as conn:
        return conn.execute(query).fetchall()


def unepoched(listed: list[dict]) -> list[dict]:
    """What the API lists but a collection's epoch, which the reindex moves on (its cached searches go)."""
    return [{k: v for k, v in item.items() if k != "index_epoch"} for item in listed]


def test_a_restored_database_serves_the_same_users_collections_jobs_and_answers(stack, tmp_path):
    documents = [json.loads(line) for line in SAMPLE_CORPUS.read_text().splitlines() if line.strip()]
    bob_key = stack.create_user(f"backup-bob-{uuid.uuid4().hex[:6]}")
    with stack.http() as http:
        collection_id = own_collection(http, "backup-corpus", documents)
        (config,) = use_agents(http, collection_id, {"agent_id": "executive_summary", "name": "backup-summary"})
        job = search(http, collection_id, QUESTIONS[0])
        assert job["status"] == "succeeded", job
        (artifact,) = job["response"]["agent_artifacts"]
        stored = http.get(artifact["url"]).content
        by_keywords = ranked(http, collection_id, QUESTIONS, search=KEYWORD)
        by_default = ranked(http, collection_id, QUESTIONS)
        seen = {path: http.get(path).json() for path in ("/v1/collections", "/v1/agent-configs")}
        me = http.get("/v1/me").json()["user"]

    backup_dir = tmp_path / "backup"
    started = time.monotonic()
    printed = stack.cli("backup", str(backup_dir))
    backup_s = time.monotonic() - started
    manifest = json.loads((backup_dir / "manifest.json").read_text())
    assert manifest["rows"]["users"] == rows(stack.database_url, "SELECT count(*) FROM users")[0][0] >= 2
    assert manifest["files"][PG_DUMP_FILE]["bytes"] > 0 and "sha256" in printed

    # A fresh database, data dir, Milvus and broker (other Redis db numbers): nothing shared with the stack's own.
    fresh = f"agentsearch_restored_{uuid.uuid4().hex[:8]}"
    restored_url = stack.database_url.rsplit("/", 1)[0] + f"/{fresh}"
    milvus_port = free_port()
    milvus = start_milvus_lite(tmp_path / "milvus", milvus_port, stack.env, tmp_path / "milvus.log")
    env = {**stack.env, "AGENTSEARCH_DATABASE_URL": restored_url, "AGENTSEARCH_DATA_DIR": str(tmp_path / "data"),
           "AGENTSEARCH_MILVUS_URI": f"http://127.0.0.1:{milvus_port}",
           "AGENTSEARCH_BROKER_URL": f"{stack.redis_base}/5", "AGENTSEARCH_RESULT_BACKEND": f"{stack.redis_base}/6",
           "AGENTSEARCH_REDIS_URL": f"{stack.redis_base}/7"}
    try:
        tampered = tmp_path / "tampered"
        shutil.copytree(backup_dir, tampered)
        dump = bytearray((tampered / PG_DUMP_FILE).read_bytes())
        dump[len(dump) // 2] ^= 0x01
        (tampered / PG_DUMP_FILE).write_bytes(bytes(dump))
        refused = run(env, "restore", str(tampered), "--database-url", restored_url)
        assert refused.returncode != 0 and "SHA-256 does not match" in refused.stderr, refused.stderr
        with psycopg.connect(PG_ADMIN) as conn:  # nothing was made
            assert not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (fresh,)).fetchall()

        started = time.monotonic()
        restored = run(env, "restore", str(backup_dir), "--database-url", restored_url)
        restore_s = time.monotonic() - started
        assert restored.returncode == 0, restored.stderr
        again = run(env, "restore", str(backup_dir), "--database-url", restored_url)
        assert again.returncode != 0 and "already holds" in again.stderr, again.stderr
        reindexed = run(env, "reindex", "--collection", collection_id)
        assert reindexed.returncode == 0, reindexed.stderr
        print(f"backup {backup_s:.1f} s, restore {restore_s:.1f} s; {reindexed.stdout.strip().splitlines()[-1]}")

        for query in ("SELECT id, name FROM users ORDER BY id", "SELECT id, digest, revoked_at FROM api_keys "
                      "ORDER BY id", "SELECT id, status, response FROM jobs ORDER BY id"):
            assert rows(restored_url, query) == rows(stack.database_url, query), query
        with extra_api_and_worker(tmp_path, env, "celery,artifacts,ingest", 4, "restored") as url, \
                stack.http() as old:
            new = httpx.Client(base_url=url, timeout=30, headers={"Authorization": old.headers["Authorization"]})
            assert new.get("/v1/me").json()["user"] == me  # the old key, on the restored database
            for path, before in seen.items():
                assert unepoched(new.get(path).json()) == unepoched(before), path
            assert new.get("/v1/me", headers={"Authorization": f"Bearer {bob_key}"}).status_code == 200
            assert new.get(f"/v1/agent-configs/{config['id']}").json() == old.get(
                f"/v1/agent-configs/{config['id']}").json()
            path = f"/v1/jobs/{job['job_id']}"
            assert new.get(path).json()["response"] == old.get(path).json()["response"]
            assert new.get(artifact["url"]).content == stored
            rebuilt = ranked(new, collection_id, QUESTIONS, search=KEYWORD)
            assert all(same_keyword_ranking(b, a) for b, a in zip(by_keywords, rebuilt, strict=True)), rebuilt
            after = ranked(new, collection_id, QUESTIONS)
            assert all(agrees(b, a) for b, a in zip(by_default, after, strict=True)), (by_default, after)
            new.close()
    finally:
        stop_process(milvus)
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{fresh}" WITH (FORCE)')
