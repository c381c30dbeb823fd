"""Seen-content dedup on a real (SQLite) database: by id, URL and embedding, within a window of days."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from agentsearch.pipeline.agentic.config import IterativeConfig
from agentsearch.pipeline.agentic.loop import LoopState, LoopTools, final_documents, run_loop
from agentsearch.pipeline.agentic.refine import OfflineRefiner
from agentsearch.pipeline.agentic.scoring import OfflineScorer
from agentsearch.pipeline.agentic.seen import SeenFilter, SeenPolicy, SqlSeenStore
from agentsearch.pipeline.agents.base import Document
from agentsearch.pipeline.platform.db import utcnow
from agentsearch.pipeline.platform.tables.users import DEFAULT_USER_ID, UserRow
from agentsearch.pipeline.retrieval.analyzer import KeywordAnalyzer
from tests.support.toy_search import ToySearch

ANALYZER = KeywordAnalyzer()


@pytest.fixture
def db(migrated_db):
    return migrated_db


def doc(id_: str, url: str | None = None, collection: str = "c1") -> Document:
    metadata = {"collection_id": collection, **({"url": url} if url else {})}
    return Document(id=id_, title=f"title {id_}", text="text", metadata=metadata)


def test_items_seen_within_the_window_are_skipped_by_id_url_and_near_duplicate(db):
    store = SqlSeenStore(db)
    shown = [doc("a"), doc("b", url="https://news.example/b")]
    store.record(DEFAULT_USER_ID, "research", "job:1", shown, vectors={"a": [1.0, 0.0], "b": [0.0, 1.0]})
    candidates = [
        doc("a"),                                           # same id, same collection
        doc("a", collection="c2"),                          # same id in another collection: another document
        doc("b-amp", url="https://news.example/b"),         # same URL
        doc("copy"),                                        # reworded copy of a: cosine 0.95
        doc("near"),                                        # related but distinct: cosine 0.8
    ]
    vectors = {"copy": [0.95, 0.312], "near": [0.8, 0.6]}
    skip = SeenFilter(store, DEFAULT_USER_ID, "industry", SeenPolicy(), vectors=lambda docs: vectors)
    fresh, matches = skip(candidates)
    assert [(d.id, d.metadata["collection_id"]) for d in fresh] == [("a", "c2"), ("near", "c1")]
    assert {m["document_id"]: m["reason"] for m in matches} == {"a": "id", "b-amp": "url", "copy": "near_duplicate"}
    copy = next(m for m in matches if m["document_id"] == "copy")
    assert copy["similarity"] >= 0.9 and copy["seen_item"] == "a" and copy["source"] == "job:1"
    assert copy["profile"] == "research"  # the default scope is every profile of the user


def test_the_window_scope_and_user_bound_what_is_skipped(db):
    store = SqlSeenStore(db)
    other_user = uuid.uuid4()
    with db.session() as s:
        s.add(UserRow(id=other_user, name="other"))
    store.record(DEFAULT_USER_ID, "research", "job:old", [doc("old")], at=utcnow() - timedelta(days=6))
    store.record(DEFAULT_USER_ID, "research", "job:new", [doc("new")])
    store.record(other_user, "research", "job:x", [doc("theirs")])
    candidates = [doc("old"), doc("new"), doc("theirs")]
    fresh, _ = SeenFilter(store, DEFAULT_USER_ID, "industry", SeenPolicy(window_days=5))(candidates)
    assert [d.id for d in fresh] == ["old", "theirs"]
    fresh, _ = SeenFilter(store, DEFAULT_USER_ID, "industry", SeenPolicy(scope="profile"))(candidates)
    assert [d.id for d in fresh] == ["old", "new", "theirs"]
    fresh, _ = SeenFilter(store, DEFAULT_USER_ID, "x", SeenPolicy(enabled=False))(candidates)
    assert len(fresh) == 3


def test_recording_twice_for_one_job_records_each_item_once(db):
    store = SqlSeenStore(db)
    job_id = uuid.uuid4()
    assert store.record(DEFAULT_USER_ID, "", "job", [doc("a"), doc("b")], job_id=job_id) == 2
    assert store.record(DEFAULT_USER_ID, "", "job", [doc("a"), doc("b")], job_id=job_id) == 0
    assert len(store.recent(DEFAULT_USER_ID, utcnow() - timedelta(days=1))) == 2


def test_a_failing_lookup_skips_nothing_and_says_why():
    class Broken:
        def recent(self, *args, **kwargs):
            raise ConnectionError("database down")

    skip = SeenFilter(Broken(), DEFAULT_USER_ID, "", SeenPolicy())
    fresh, matches = skip([doc("a")])
    assert [d.id for d in fresh] == ["a"] and matches == [] and "database down" in skip.error


CORPUS = [Document(id=f"d{i}", title=f"Gearbox study {i}",
                   text=f"Offshore wind turbine gearbox failures were studied in {2010 + i} across {i + 3} farms.")
          for i in range(12)]


def run_once(store: SqlSeenStore, now=None) -> list[Document]:
    config = IterativeConfig(target=3, per_iteration=3, max_iterations=2, sufficiency=False)
    tools = LoopTools(search=ToySearch(CORPUS), scorer=OfflineScorer(ANALYZER), refiner=OfflineRefiner(ANALYZER),
                      skip_seen=SeenFilter(store, DEFAULT_USER_ID, "research", SeenPolicy(), now=now))
    state = run_loop(LoopState.start("offshore wind turbine gearbox failures", config), tools)
    return [j.document for j in final_documents(state)]


def test_a_second_run_within_the_window_returns_nothing_from_the_first_and_after_it_may_again(db):
    store = SqlSeenStore(db)
    first = run_once(store)
    assert len(first) == 3
    store.record(DEFAULT_USER_ID, "research", "job:first", first)
    second = run_once(store)
    assert len(second) == 3 and not {d.id for d in first} & {d.id for d in second}
    later = run_once(store, now=utcnow() + timedelta(days=5, hours=1))
    assert {d.id for d in later} == {d.id for d in first}
