"""A collection's question set in the database: made from its indexed documents, edited, and refreshed for the
documents that changed or went (SQLite, the migrations' schema)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from agentsearch.pipeline.eval.eval_sets import (
    add_question,
    drop_question,
    generate_set,
    read_set,
    refresh_set,
    set_questions,
)
from agentsearch.pipeline.platform.tables.collections import CollectionRow, DocumentRow
from agentsearch.pipeline.platform.tables.users import UserRow
from agentsearch.pipeline.refusal import Refusal

SAMPLE = Path(__file__).resolve().parents[3] / "src" / "agentsearch" / "examples" / "sample_corpus.jsonl"
DOCS = [json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip()]


@pytest.fixture
def collection(migrated_db):
    with migrated_db.session() as s:
        user = UserRow(name=f"u-{uuid.uuid4().hex[:6]}")
        s.add(user)
        s.flush()
        row = CollectionRow(user_id=user.id, name="reports", embedding_model="m")
        s.add(row)
        s.flush()
        for i, doc in enumerate(DOCS):
            s.add(DocumentRow(collection_id=row.id, external_id=doc["id"], title=doc["title"], text=doc["text"],
                              status="indexed" if i else "pending", version=f"v1-{doc['id']}"))
        collection_id = row.id
    return migrated_db, collection_id


def test_the_set_is_made_from_indexed_documents_and_read_back(collection) -> None:
    db, collection_id = collection
    with db.session() as s:
        made = generate_set(s, s.get(CollectionRow, collection_id), size=10)
    assert made["questions"] == 10 and made["documents"] == 10 and made["method"] == "cloze"
    with db.session() as s:
        listed = read_set(s, collection_id)["questions"]
        texts = {d.external_id: d.text for d in s.query(DocumentRow)}
    assert DOCS[0]["id"] not in {q["document_id"] for q in listed}  # still pending: not drawn
    for q in listed:
        assert texts[q["document_id"]][q["location"]["start"]:q["location"]["end"]] == q["answer"]
        assert q["version"] == f"v1-{q['document_id']}"
    with db.session() as s, pytest.raises(Refusal) as refused:
        generate_set(s, s.get(CollectionRow, collection_id), size=501)
    assert refused.value.errors[0]["loc"] == ("body", "size")


def test_questions_are_added_and_dropped_by_hand_and_kept_when_the_set_is_made_again(collection) -> None:
    db, collection_id = collection
    doc = DOCS[1]
    span = doc["text"].split()[3]
    with db.session() as s:
        found = s.get(CollectionRow, collection_id)
        with pytest.raises(Refusal):
            add_question(s, found, "Q?", "x", doc["id"])  # no set yet: 404
        generate_set(s, found, size=5)
        added = add_question(s, found, "Which word?", span.upper(), doc["id"])
        assert added.answer == span and doc["text"][added.start:added.end] == span  # the document's own casing
        for bad, field in ((("Q?", "not in it at all", doc["id"]), "answer"),
                           (("Q?", span, "no-such-document"), "document_id"),
                           (("Q?", "word", DOCS[0]["id"]), "document_id")):  # pending: not among the indexed
            with pytest.raises(Refusal) as refused:
                add_question(s, found, *bad)
            assert refused.value.errors[0]["loc"] == ("body", field)
        added_id = added.id
    with db.session() as s:
        generate_set(s, s.get(CollectionRow, collection_id), size=3)
        assert added_id in {q.id for q in set_questions(s, collection_id)}
        drop_question(s, collection_id, added_id)
    with db.session() as s:
        assert added_id not in {q.id for q in set_questions(s, collection_id)}
        with pytest.raises(Refusal) as refused:
            drop_question(s, collection_id, added_id)
        assert refused.value.status == 404


def test_a_refresh_replaces_the_questions_of_changed_and_deleted_documents(collection) -> None:
    db, collection_id = collection
    with db.session() as s:
        generate_set(s, s.get(CollectionRow, collection_id), size=6)
    with db.session() as s:
        before = set_questions(s, collection_id)
        changed, deleted = before[0].document_id, before[1].document_id
        row = s.query(DocumentRow).filter_by(collection_id=collection_id, external_id=changed).one()
        row.text += " The Kestrelford annex opened with 1,234 new desks in the autumn of that year."
        row.version = "v2"
        s.delete(s.query(DocumentRow).filter_by(collection_id=collection_id, external_id=deleted).one())
        kept = {q.id for q in before[2:]}
    with db.session() as s:
        counts = refresh_set(s, s.get(CollectionRow, collection_id))
        after = set_questions(s, collection_id)
    assert counts == {"dropped": 2, "made": 2}
    assert kept <= {q.id for q in after} and len(after) == len(before)
    assert deleted not in {q.document_id for q in after}
    assert [q.version for q in after if q.document_id == changed] == ["v2"]
    assert len({q.document_id for q in after}) == len(after)  # still one question per document
    with db.session() as s:
        assert refresh_set(s, s.get(CollectionRow, collection_id)) == {"dropped": 0, "made": 0}
