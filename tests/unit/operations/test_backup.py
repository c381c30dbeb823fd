"""A backup of the embedded SQLite database: the manifest, the checks a restore makes first, and what it refuses."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from agentsearch.pipeline.operations.backup import (
    MANIFEST,
    SQLITE_FILE,
    BackupError,
    BackupInvalid,
    TargetNotEmpty,
    make_backup,
    restore_backup,
    sha256_of,
    verify_backup,
)
from agentsearch.pipeline.platform.db import Database
from agentsearch.pipeline.platform.tables.users import UserRow
from tests.support.databases import migrated_sqlite


@pytest.fixture
def database(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'service.db'}"
    migrated_sqlite(url)
    db = Database(url)
    with db.session() as s:
        s.add_all([UserRow(name="alice"), UserRow(name="bob")])
    db.dispose()
    return url


def users_of(path: Path) -> list[str]:
    with closing(sqlite3.connect(path)) as conn:
        return [r[0] for r in conn.execute("SELECT name FROM users ORDER BY name")]


def test_the_manifest_names_each_file_with_its_checksum_and_counts_every_table(database, tmp_path):
    manifest = make_backup(database, tmp_path / "backup")
    dump = tmp_path / "backup" / SQLITE_FILE
    assert manifest["files"] == {SQLITE_FILE: {"bytes": dump.stat().st_size, "sha256": sha256_of(dump)}}
    assert manifest["rows"]["users"] == 3  # the default user, alice and bob
    assert manifest["database"] == "sqlite" and manifest["alembic_revision"]
    assert json.loads((tmp_path / "backup" / MANIFEST).read_text()) == manifest
    assert "reindex" in manifest["milvus"]


def test_a_restore_gives_the_same_rows_in_a_new_database(database, tmp_path):
    make_backup(database, tmp_path / "backup")
    target = tmp_path / "restored" / "service.db"
    restore_backup(tmp_path / "backup", f"sqlite:///{target}")
    assert users_of(target) == ["alice", "bob", "default"]


def test_a_changed_or_missing_file_is_refused_before_anything_is_written(database, tmp_path):
    make_backup(database, tmp_path / "backup")
    dump = tmp_path / "backup" / SQLITE_FILE
    data = bytearray(dump.read_bytes())
    data[len(data) // 2] ^= 0xFF
    dump.write_bytes(bytes(data))
    target = tmp_path / "restored.db"
    with pytest.raises(BackupInvalid, match="SHA-256 does not match"):
        restore_backup(tmp_path / "backup", f"sqlite:///{target}")
    assert not target.exists()
    dump.write_bytes(bytes(data[:-1]))
    with pytest.raises(BackupInvalid, match="bytes, the manifest says"):
        verify_backup(tmp_path / "backup")
    dump.unlink()
    with pytest.raises(BackupInvalid, match="missing"):
        verify_backup(tmp_path / "backup")


def test_a_database_with_tables_is_replaced_only_when_forced(database, tmp_path):
    make_backup(database, tmp_path / "backup")
    other = tmp_path / "other.db"
    migrated_sqlite(f"sqlite:///{other}")
    with pytest.raises(TargetNotEmpty, match="--force"):
        restore_backup(tmp_path / "backup", f"sqlite:///{other}")
    assert users_of(other) == ["default"]
    restore_backup(tmp_path / "backup", f"sqlite:///{other}", force=True)
    assert users_of(other) == ["alice", "bob", "default"]


def test_a_backup_goes_into_an_empty_directory_and_of_its_own_kind(database, tmp_path):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "old.txt").write_text("x")
    with pytest.raises(BackupError, match="not empty"):
        make_backup(database, tmp_path / "full")
    make_backup(database, tmp_path / "backup")
    with pytest.raises(BackupError, match="sqlite database"):
        restore_backup(tmp_path / "backup", "postgresql+psycopg://nobody@127.0.0.1:1/none")


@pytest.mark.parametrize(("change", "named"), [
    (lambda m: m.pop("files"), "files: missing"),
    (lambda m: m.pop("rows"), "rows: missing"),
    (lambda m: m.update(files=["database.sqlite"]), "files: Input should be a valid dictionary"),
    (lambda m: m.update(files={}), "files: Dictionary should have at least 1 item"),
    (lambda m: m["files"][SQLITE_FILE].update(bytes="12"), f"files.{SQLITE_FILE}.bytes: Input should be a valid "
                                                           "integer"),
    (lambda m: m["files"][SQLITE_FILE].pop("sha256"), f"files.{SQLITE_FILE}.sha256: missing"),
    (lambda m: m["rows"].update(users=-1), "rows.users: Input should be greater than or equal to 0"),
    (lambda m: m.update(database="oracle"), "database: Input should be 'postgresql' or 'sqlite'"),
    (lambda m: m.update(created_at="yesterday"), "created_at: Input should be a valid datetime"),
    (lambda m: m.update(files={"../service.db": m["files"][SQLITE_FILE]}), "files.../service.db.[key]: String "
                                                                           "should match pattern"),
    (lambda m: m.update(files={"other.db": m["files"][SQLITE_FILE]}), f"files: no {SQLITE_FILE}"),
])
def test_a_manifest_missing_a_field_or_with_one_of_the_wrong_kind_is_refused_naming_it(database, tmp_path, change,
                                                                                        named):
    make_backup(database, tmp_path / "backup")
    path = tmp_path / "backup" / MANIFEST
    manifest = json.loads(path.read_text())
    change(manifest)
    path.write_text(json.dumps(manifest))
    target = tmp_path / "restored.db"
    with pytest.raises(BackupInvalid, match=r"manifest\.json: ") as refused:
        restore_backup(tmp_path / "backup", f"sqlite:///{target}")
    assert named in str(refused.value)
    assert not target.exists()


def test_a_manifest_that_is_not_an_object_and_every_problem_of_one_are_named(database, tmp_path):
    make_backup(database, tmp_path / "backup")
    path = tmp_path / "backup" / MANIFEST
    path.write_text("[1, 2]")
    with pytest.raises(BackupInvalid, match="not a JSON object but list"):
        verify_backup(tmp_path / "backup")
    path.write_text(json.dumps({"format": 1, "database": "sqlite"}))
    with pytest.raises(BackupInvalid) as refused:
        verify_backup(tmp_path / "backup")
    assert all(f"{field}: missing" in str(refused.value)
               for field in ("agentsearch", "alembic_revision", "created_at", "files", "rows")), refused.value


def test_restore_says_what_is_wrong_with_the_manifest_and_exits_non_zero(database, tmp_path):
    from click.testing import CliRunner

    from agentsearch.cli.backup import restore

    make_backup(database, tmp_path / "backup")
    path = tmp_path / "backup" / MANIFEST
    manifest = json.loads(path.read_text())
    del manifest["files"]
    path.write_text(json.dumps(manifest))
    target = tmp_path / "restored.db"
    done = CliRunner().invoke(restore, [str(tmp_path / "backup"), "--database-url", f"sqlite:///{target}"])
    assert done.exit_code == 2 and isinstance(done.exception, SystemExit), done.exception  # a message, no traceback
    assert "error: " in done.output and "files: missing" in done.output, done.output
    assert not target.exists()
