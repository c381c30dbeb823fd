"""``agentsearch reindex`` on the real stack: a collection's Milvus data rebuilt from PostgreSQL.

The drill: Milvus's data for a collection is deleted, the command rebuilds it, and the same questions return the
same documents in the same order as before. Then a rebuild beside readers: every read of the collection during it
sees all of its chunks (the old generation's, then the new one's, never one half built), searches through the API
answer as before, and a document added and one deleted while it runs are where they should be after it.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
import uuid

import pytest

from agentsearch.pipeline.platform.tables.collections import milvus_collection_name
from agentsearch.pipeline.retrieval.stored_chunks import IndexedChunk
from agentsearch.pipeline.retrieval.vector_store import VectorStore, generation_name
from tests.integration.conftest import BIN, REPO, SAMPLE_CORPUS, Stack, own_collection, search
from tests.support.rankings import KEYWORD, TIED, agrees, ids, ranked, same_keyword_ranking

pytestmark = pytest.mark.integration

QUESTIONS = ["How much revenue did Northwind make in the third quarter of 2024?",
             "When did the Harrow Ridge solar farm start commercial operation?",
             "How do heat pumps provide demand flexibility?"]
ADDED = {"id": "reindex-added", "title": "Lighthouse keepers' rota",
         "text": "The Fenwick lighthouse rota changes every ninth Thursday, when the keepers swap their lamps."}
DELETED = "offshore-wind-foundations"


def indexed_chunks(stack: Stack, collection_id: str) -> int:
    (total,) = stack.sql("SELECT coalesce(sum(chunks), 0) FROM documents WHERE collection_id = %s "
                         "AND status = 'indexed'", collection_id)[0]
    return int(total)


def documents_of(stack: Stack, collection_id: str) -> list[str]:
    return [row[0] for row in stack.sql("SELECT external_id FROM documents WHERE collection_id = %s "
                                        "AND status = 'indexed'", collection_id)]


@pytest.fixture(scope="module")
def drill(stack: Stack):
    documents = [json.loads(line) for line in SAMPLE_CORPUS.read_text().splitlines() if line.strip()]
    with stack.http() as http:
        collection_id = own_collection(http, "reindex-drill", documents)
        store = VectorStore(stack.env["AGENTSEARCH_MILVUS_URI"])
        try:
            yield http, collection_id, store
        finally:
            store.close()


def test_milvus_data_lost_and_rebuilt_answers_the_same_questions_alike(stack, drill):
    http, collection_id, store = drill
    name = milvus_collection_name(collection_id)
    before = ranked(http, collection_id, QUESTIONS)
    assert all(before) and len({tuple(ids(r)) for r in before}) == len(QUESTIONS)
    by_keywords = ranked(http, collection_id, QUESTIONS, search=KEYWORD)
    chunks = indexed_chunks(stack, collection_id)
    assert store.count(name) == chunks

    store.drop_collection(name)  # Milvus's data for the collection, gone
    assert store.target(name) is None and store.generations(name) == []

    printed = stack.cli("reindex", "--collection", collection_id)
    assert f"{len(documents_of(stack, collection_id))} documents, {chunks} chunks in " in printed, printed
    assert store.target(name) == generation_name(name, 2) and store.count(name) == chunks
    rebuilt = ranked(http, collection_id, QUESTIONS, search=KEYWORD)
    assert all(same_keyword_ranking(b, a) for b, a in zip(by_keywords, rebuilt, strict=True)), (by_keywords, rebuilt)
    after = ranked(http, collection_id, QUESTIONS)
    assert all(agrees(b, a) for b, a in zip(before, after, strict=True)), (before, after)
    assert [r[:2] for r in map(ids, after)] == [r[:2] for r in map(ids, before)]


def test_a_rebuild_is_never_seen_half_built_and_keeps_what_changed_meanwhile(stack, drill):
    http, collection_id, store = drill
    name = milvus_collection_name(collection_id)
    before = ranked(http, collection_id, QUESTIONS[:1], top_k=3, search=KEYWORD)[0]
    assert DELETED not in ids(before)  # the change below leaves this answer as it is
    chunks = indexed_chunks(stack, collection_id)
    searched_before = store.target(name)
    deleted = int(stack.sql("SELECT chunks FROM documents WHERE collection_id = %s AND external_id = %s",
                            collection_id, DELETED)[0][0])

    reads: list[tuple[int, str | None, int]] = []  # (chunks seen, generation searched, generations in Milvus)
    answers: list[list[tuple[str, float]]] = []
    command = subprocess.Popen([str(BIN / "agentsearch"), "reindex", "--collection", collection_id], cwd=REPO,
                               env=stack.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def searches() -> None:
        while command.poll() is None:
            answers.append(ranked(http, collection_id, QUESTIONS[:1], top_k=3, search=KEYWORD)[0])

    searching = threading.Thread(target=searches)
    searching.start()
    changed = False
    while command.poll() is None:
        reads.append((store.count(name), store.target(name), len(store.generations(name))))
        if not changed and reads[-1][2] == 2:
            # The new generation is being filled: a document comes and one goes while it is.
            assert http.post(f"/v1/collections/{collection_id}/documents",
                             json={"documents": [ADDED]}).status_code == 202
            assert http.delete(f"/v1/collections/{collection_id}/documents/{DELETED}").status_code == 202
            changed = True
    searching.join()
    output = command.stdout.read()
    assert command.returncode == 0, output

    building = [r for r in reads if r[2] == 2 and r[1] == searched_before]
    assert building, "no read saw the rebuild under way"
    # The change moves BM25's statistics a little: the same documents, in the same order but for exact ties.
    assert answers and all(agrees(before, answer, TIED) for answer in answers), (before, answers)

    deadline = time.monotonic() + 60
    while http.get(f"/v1/collections/{collection_id}").json()["documents"]["pending"]:
        assert time.monotonic() < deadline, "the added document was never indexed"
        time.sleep(0.2)
    # Every read saw the whole collection, of the old generation or the new, with or without the change above.
    added = int(stack.sql("SELECT chunks FROM documents WHERE collection_id = %s AND external_id = %s",
                          collection_id, ADDED["id"])[0][0])
    whole = {chunks, chunks + added, chunks - deleted, chunks + added - deleted}
    assert {seen for seen, _, _ in reads} <= whole, (sorted({r[0] for r in reads}), whole)
    assert store.target(name) == generation_name(name, 3) and store.generations(name) == [store.target(name)]
    assert store.count(name) == indexed_chunks(stack, collection_id)
    found = search(http, collection_id, "Which lighthouse rota changes every ninth Thursday?", agents=[],
                   use_cache=False)["response"]["sources"]
    assert found[0]["document_id"] == ADDED["id"]
    assert DELETED not in [s["document_id"] for s in search(
        http, collection_id, "How are offshore wind turbine foundations built?", agents=[], use_cache=False,
        top_k=24)["response"]["sources"]]


def test_a_collection_made_before_generations_becomes_one_on_its_first_rebuild(stack):
    store = VectorStore(stack.env["AGENTSEARCH_MILVUS_URI"])
    name = f"c_{uuid.uuid4().hex}"
    try:
        store._create(name, 2)  # as ensure_collection made every collection before generations: a plain one
        store.upsert(name, [IndexedChunk(id="old#0", document_id="old", title="", text="old", vector=[1.0, 0.0])])
        assert store.target(name) == name and store.count(name) == 1
        built = store.new_generation(name, 2)
        store.upsert(built, [IndexedChunk(id=f"new#{i}", document_id="new", title="", text="new",
                                          vector=[1.0, float(i)]) for i in range(3)])
        assert store.count(name) == 1  # the new generation is searched by nobody yet
        previous = store.switch(name, built)
        assert (built, previous, store.target(name)) == (generation_name(name, 2), generation_name(name, 0), built)
        assert store.count(name) == 3
        assert [h.document_id for h in store.dense_search(name, [1.0, 0.0], 5)] == ["new"] * 3
        store.drop_generation(previous)
        store.drop_collection(name)
        assert store.target(name) is None and store.generations(name) == []
    finally:
        store.close()
