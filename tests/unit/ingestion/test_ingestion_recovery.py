"""A document's lease (``agentsearch.pipeline.ingestion.lease``) and the reaper's look for lost documents
(``agentsearch.pipeline.ingestion.recovery``), on document rows in SQLite: which task may work on a document, when a
lost worker or task counts, what is sent again, and when a document ends ``failed`` instead."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from agentsearch.pipeline.ingestion.lease import claim, finish, queue, queue_in_tasks
from agentsearch.pipeline.ingestion.recovery import BrokerView, find_lost, send_again
from agentsearch.pipeline.platform.tables.collections import DocumentFileRow, DocumentRow

GRACE_S = 45.0


@pytest.fixture
def db(migrated_db):
    return migrated_db


@pytest.fixture
def collection(collection_id):
    return collection_id


def _queued(db, collection, n: int, task_documents: int = 32) -> list[tuple[str, list[str]]]:
    with db.session() as s:
        rows = [DocumentRow(collection_id=collection, external_id=f"d{i}", text="t") for i in range(n)]
        s.add_all(rows)
        s.flush()
        return queue_in_tasks(rows, task_documents)


def _rows(db, ids) -> dict[str, DocumentRow]:
    with db.session() as s:
        rows = s.query(DocumentRow).filter(DocumentRow.id.in_([uuid.UUID(str(i)) for i in ids])).all()
        s.expunge_all()
        return {str(r.id): r for r in rows}


def _claim(db, ids, task_id, retries=0, node="w1@host", max_attempts=3) -> list[str]:
    with db.session() as s:
        rows = s.query(DocumentRow).filter(DocumentRow.id.in_([uuid.UUID(i) for i in ids])).all()
        return [str(r.id) for r in claim(rows, task_id, retries, node, max_attempts)]


def _age(db, ids, seconds: float) -> None:
    """As if the rows last changed ``seconds`` ago (``updated_at`` follows every write)."""
    with db.session() as s:
        s.query(DocumentRow).filter(DocumentRow.id.in_([uuid.UUID(i) for i in ids])).update(
            {DocumentRow.updated_at: datetime.now(UTC) - timedelta(seconds=seconds)}, synchronize_session=False)


def test_an_upload_is_queued_as_tasks_of_at_most_the_setting(db, collection):
    tasks = _queued(db, collection, 100, task_documents=32)
    assert [len(ids) for _, ids in tasks] == [32, 32, 32, 4]
    assert len({task_id for task_id, _ in tasks}) == 4
    rows = _rows(db, [i for _, ids in tasks for i in ids])
    assert {r.task_id for r in rows.values()} == {task_id for task_id, _ in tasks}
    assert all(r.status == "pending" and r.queued_at is not None and r.attempts == 0 for r in rows.values())


def test_a_task_claims_only_the_documents_still_sent_with_it(db, collection):
    [(task_id, ids)] = _queued(db, collection, 3)
    with db.session() as s:
        again = s.get(DocumentRow, uuid.UUID(ids[0]))
        queue(again, "newer-task")          # sent again meanwhile: its new task indexes it
    assert sorted(_claim(db, ids, task_id)) == sorted(ids[1:])
    assert {r.worker for r in _rows(db, ids[1:]).values()} == {"w1@host"}
    with db.session() as s:
        ended = finish(s, [uuid.UUID(i) for i in ids], task_id, "indexed", chunks={"d1": 4})
    assert sorted(r.external_id for r in ended) == ["d1", "d2"]
    rows = _rows(db, ids)
    assert rows[ids[0]].status == "pending" and rows[ids[0]].task_id == "newer-task"
    assert (rows[ids[1]].status, rows[ids[1]].chunks) == ("indexed", 4) and rows[ids[1]].finished_at is not None
    assert rows[ids[2]].chunks == 0


def test_a_message_that_comes_back_after_its_process_died_counts_an_attempt_and_the_last_fails_it(db, collection):
    [(task_id, ids)] = _queued(db, collection, 1)
    assert _claim(db, ids, task_id) == ids
    assert _claim(db, ids, task_id, retries=1) == ids   # a retry the task asked for: no attempt lost
    assert _rows(db, ids)[ids[0]].attempts == 0
    assert _claim(db, ids, task_id, retries=1, node="w2@host") == ids   # the same message again: its process died
    assert _rows(db, ids)[ids[0]].attempts == 1
    assert _claim(db, ids, task_id, retries=1, node="w3@host") == ids
    assert _rows(db, ids)[ids[0]].attempts == 2
    assert _claim(db, ids, task_id, retries=1) == []                    # the third loss: given up
    row = _rows(db, ids)[ids[0]]
    assert (row.status, row.attempts) == ("failed", 3) and row.finished_at is not None
    assert row.error == ("indexing given up after 3 lost attempts (the last: the worker process running it on "
                         "w3@host stopped); send the document again, and split it if it is very large")


def _view(held=None, queued=()):
    return BrokerView(held=held or {}, queued=set(queued) if queued is not None else None)


def _lost(db, alive=frozenset({"w1@host"}), broker=None):
    with db.session() as s:
        return {str(item.document_id): item.cause for item in
                find_lost(s, datetime.now(UTC), set(alive), lambda: broker, GRACE_S)}


def test_a_document_whose_node_stopped_heartbeating_is_lost_once_its_row_is_older_than_the_grace(db, collection):
    [(task_id, ids)] = _queued(db, collection, 2)
    _claim(db, ids[:1], task_id, node="w1@host")
    _claim(db, ids[1:], task_id, node="w9@gone")
    held = _view(held={task_id: 0.0})
    assert _lost(db, broker=held) == {}                      # claimed a moment ago
    _age(db, ids, GRACE_S + 1)
    assert _lost(db, broker=held) == {ids[1]: "worker w9@gone stopped while it held the document"}
    assert _lost(db, alive={"w1@host", "w9@gone"}, broker=held) == {}
    with db.session() as s:                                  # Redis unreachable: no node counts as gone
        assert find_lost(s, datetime.now(UTC), None, lambda: held, GRACE_S) == []


def test_a_task_nowhere_in_the_broker_or_taken_and_never_started_is_lost(db, collection):
    (waiting, w_ids), (held, h_ids), (gone, g_ids), (unread, u_ids) = _queued(db, collection, 4, task_documents=1)
    _age(db, w_ids + h_ids + g_ids + u_ids, GRACE_S + 1)
    now = datetime.now(UTC).timestamp()
    view = _view(held={held: now - GRACE_S - 5}, queued={waiting})
    assert _lost(db, broker=view) == {h_ids[0]: "the worker that took its task stopped before starting it",
                                      g_ids[0]: "its task was lost from the broker",
                                      u_ids[0]: "its task was lost from the broker"}
    # Taken a moment ago: on its way to a process. A queue too long to read: nothing is called lost from it.
    assert _lost(db, broker=_view(held={held: now}, queued={waiting, gone, unread})) == {}
    assert set(_lost(db, broker=_view(held={held: now}, queued=None))) == set()
    assert _lost(db, broker=None) == {}


def test_the_lost_are_sent_again_as_new_tasks_and_past_their_attempts_fail_with_the_cause(db, collection):
    tasks = _queued(db, collection, 5, task_documents=5)
    [(task_id, ids)] = tasks
    _claim(db, ids, task_id, node="w9@gone")
    with db.session() as s:
        file_row = s.get(DocumentRow, uuid.UUID(ids[0]))
        s.add(DocumentFileRow(document_id=file_row.id, name="scan.pdf", format="pdf", data=b"%PDF", parsed={"next": 6}))
        s.get(DocumentRow, uuid.UUID(ids[1])).attempts = 2       # lost twice before
    _age(db, ids, GRACE_S + 1)
    with db.session() as s:
        lost = find_lost(s, datetime.now(UTC), {"w1@host"}, lambda: _view(held={task_id: 0.0}), GRACE_S)
    with db.session() as s:
        s.get(DocumentRow, uuid.UUID(ids[4])).worker = "w1@host"  # a worker started it since it was looked at
    with db.session() as s:
        sends, failed = send_again(s, lost, max_attempts=3, task_documents=2)
    assert [str(d) for d in failed] == [ids[1]]
    parse = [send for send in sends if send.task == "agentsearch.parse_document"]
    assert [(p.document_ids, p.start, p.args[1:]) for p in parse] == [([ids[0]], 6, (ids[0], 6))]
    index = [send for send in sends if send.task == "agentsearch.ingest_documents"]
    assert sorted(len(send.document_ids) for send in index) == [2]
    assert sorted(d for send in index for d in send.document_ids) == sorted(ids[2:4])
    rows = _rows(db, ids)
    assert rows[ids[1]].status == "failed" and "w9@gone stopped" in rows[ids[1]].error
    for send in sends:
        for document_id in send.document_ids:
            row = rows[document_id]
            assert (row.task_id, row.worker, row.attempts, row.status) == (send.task_id, None, 1, "pending")
            assert row.queued_at is not None
    assert rows[ids[4]].task_id == task_id and rows[ids[4]].attempts == 0
