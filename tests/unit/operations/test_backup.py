"""A backup of the embedded SQLite database: the manifest, the checks a restore makes first, and what it refuses."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from migrations import upgrade
from pipeline.operations.backup import (
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
from pipeline.platform.db import Database, User


@pytest.fixture
def database(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'service.db'}"
    upgrade(url)
    db = Database(url)
    with db.session() as s:
        s.add_all([User(name="alice"), User(name="bob")])
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
    upgrade(f"sqlite:///{other}")
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
