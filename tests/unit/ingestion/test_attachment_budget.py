"""What a tree of e-mails may become (``agentsearch.pipeline.ingestion.attachments``), on document rows in SQLite: the
e-mails are read in any order, each storing its attachments as the worker does; the tree never passes the documents one
upload may become nor the quota, and a small tree is taken whole. The real stack's runs are
``tests/integration/test_attachment_limits.py``."""

from __future__ import annotations

import random
import uuid
from typing import Any

import pytest

from agentsearch.pipeline.ingestion.attachments import _shares, store_attachments
from agentsearch.pipeline.ingestion.documents import upload_state
from agentsearch.pipeline.parsing import Attachment
from agentsearch.pipeline.platform.settings import Settings
from agentsearch.pipeline.platform.tables.collections import DocumentFileRow, DocumentRow
from agentsearch.pipeline.platform.tables.users import DEFAULT_USER_ID

# A tree: an e-mail is the list of what it carries, a note is None.
Tree = list[Any]


def _wide(width: int, depth: int) -> Tree:
    return [None] * width if depth == 1 else [_wide(width, depth - 1) for _ in range(width)]


def _uneven(rng: random.Random, depth: int) -> Tree:
    return [_uneven(rng, depth - 1) if depth > 1 and rng.random() < 0.4 else None for _ in range(rng.randint(0, 20))]


def _size(tree: Tree) -> int:
    return 1 + sum(_size(child) if child is not None else 1 for child in tree)


def _read_all(db, collection_id, tree: Tree, settings: Settings, seed: int) -> tuple[int, list[str]]:
    """Every e-mail of the tree read in a random order, as the parsing tasks would: (documents made, notes)."""
    rng = random.Random(seed)
    with db.session() as s:
        root = DocumentRow(collection_id=collection_id, external_id="mail", text="")
        s.add(root)
        s.flush()
        waiting: list[tuple[Any, Tree, dict[str, Any]]] = [(root.id, tree, upload_state(DEFAULT_USER_ID))]
    while waiting:
        row_id, mail, state = waiting.pop(rng.randrange(len(waiting)))
        attachments = [Attachment(f"m{i}.eml" if child is not None else f"n{i}.txt",
                                  b"From: a@example.org\n\nmail" if child is not None else b"a note")
                       for i, child in enumerate(mail)]
        with db.session() as s:
            parent = s.get(DocumentRow, row_id)
            made = store_attachments(s, parent, attachments, state, settings)
            s.flush()
            for child_id, _ in made:
                file = s.get(DocumentFileRow, uuid.UUID(child_id))
                carried = mail[int(file.name[1:].split(".")[0])]
                if carried is not None:
                    waiting.append((file.document_id, carried, dict(file.parsed)))
    with db.session() as s:
        rows = s.query(DocumentRow).filter(DocumentRow.collection_id == collection_id).all()
        return len(rows), [note for row in rows for note in row.notes or []]


@pytest.mark.parametrize("seed", range(2))
def test_a_tree_never_becomes_more_documents_than_one_upload_may(migrated_db, collection_id, seed):
    settings = Settings(max_documents_per_upload=100)
    made, notes = _read_all(migrated_db, collection_id, _wide(20, 2), settings, seed)
    assert made == 100
    assert len(notes) == _size(_wide(20, 2)) - 100
    assert all("AGENTSEARCH_MAX_DOCUMENTS_PER_UPLOAD" in note for note in notes), notes[:3]


@pytest.mark.parametrize("seed", range(5))
def test_an_uneven_tree_read_in_any_order_stays_within_the_limit(migrated_db, collection_id, seed):
    tree = _uneven(random.Random(seed), 4)
    limit = max(2, _size(tree) // 2)
    made, _ = _read_all(migrated_db, collection_id, tree, Settings(max_documents_per_upload=limit), seed)
    assert made <= limit


def test_a_small_tree_is_taken_whole(migrated_db, collection_id):
    tree = [[None, None, [None]], None, [None] * 5]
    made, notes = _read_all(migrated_db, collection_id, tree, Settings(max_documents_per_upload=_size(tree) + 20), 0)
    assert made == _size(tree) and notes == []


def test_the_quota_counts_each_attachment_as_it_is_made(migrated_db, collection_id):
    made, notes = _read_all(migrated_db, collection_id, _wide(20, 2), Settings(max_documents=30), 1)
    assert made == 30
    assert any("refused: 413" in note and "quota of 30" in note for note in notes), notes[:3]


def test_shares_are_even_and_only_for_what_carries_attachments():
    assert _shares(10, [True, False, True, True]) == [4, 0, 3, 3]
    assert _shares(0, [True, True]) == [0, 0]
    assert _shares(5, [False]) == [0]
