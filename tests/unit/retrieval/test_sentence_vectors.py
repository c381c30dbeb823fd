"""Sentence vectors made at ingest and read by a job: what is stored, how it is read back, and what is embedded.

The model is a fake (a vector per text from its digest) that counts what it was asked to embed: the point of the
stored vectors is that a job asks it for nothing but what ingestion did not store.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from agentsearch.pipeline.documents import Document
from agentsearch.pipeline.ingestion.chunking import ChunkingConfig
from agentsearch.pipeline.ingestion.indexing import index_documents
from agentsearch.pipeline.retrieval.analyzer import KeywordAnalyzer
from agentsearch.pipeline.retrieval.sentence_vectors import (
    MAX_STORED,
    KnownVectors,
    chunk_units,
    pack,
    stored_for,
    text_key,
    unpack,
)

DIM = 8


class CountingEmbed:
    """A deterministic unit vector per text; ``asked`` lists every text the model was given."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def __call__(self, texts: list[str]) -> list[list[float]]:
        self.asked.extend(texts)
        return [vector(t).tolist() for t in texts]


def vector(text: str) -> np.ndarray:
    raw = np.frombuffer(hashlib.sha256(text.encode()).digest()[:DIM], dtype=np.uint8).astype(np.float32) - 127.5
    return raw / np.linalg.norm(raw)


TEXT = "Vitamin D levels fell in winter. John C. Messenger measured them. The cohort had 120 adults."


def test_a_chunk_stores_its_whole_sentences_then_its_title():
    assert chunk_units("Winter study", TEXT) == ["Vitamin D levels fell in winter.", "John C. Messenger measured them.",
                                                 "The cohort had 120 adults.", "Winter study"]
    assert chunk_units("", "One. One. Two.") == ["One.", "Two."]  # each text once
    many = " ".join(f"Sentence number {i} is here." for i in range(MAX_STORED + 10))
    assert len(chunk_units("t", many)) == MAX_STORED


def test_packed_vectors_read_back_by_the_digest_of_their_text():
    texts = chunk_units("Winter study", TEXT)
    stored = unpack(pack(texts, [vector(t) for t in texts]))
    assert set(stored) == {text_key(t) for t in texts}
    for text in texts:  # float16: about three significant digits, far below what moves a cosine ranking
        assert np.allclose(stored[text_key(text)], vector(text), atol=2e-3)
    assert len(pack(texts * 0, [])) == 0


@pytest.mark.parametrize("payload", ["", None, "not base64!", "AAAA", pack(["a"], [vector("a")])[:-8]])
def test_an_empty_foreign_or_damaged_payload_reads_as_nothing(payload):
    assert unpack(payload) == {}


def test_the_largest_chunk_fits_the_milvus_field():
    texts = [f"Sentence number {i} is here." for i in range(MAX_STORED)]
    assert len(pack(texts, np.ones((MAX_STORED, 384)))) <= 65535


def test_known_vectors_embed_only_what_is_neither_stored_nor_looked_up():
    embed = CountingEmbed()
    stored = {text_key("stored one"): vector("stored one")}
    known = KnownVectors(embed, stored, lookup=lambda t: vector(t).tolist() if t == "the query" else None)
    out = known.embed(["the query", "stored one", "new one", "new one"])
    assert embed.asked == ["new one"]  # once, though asked twice
    assert np.allclose(out, [vector(t) for t in ["the query", "stored one", "new one", "new one"]])
    assert (known.hits, known.embedded) == (2, 1)


def test_ingestion_stores_each_chunks_sentences_embedding_a_repeated_sentence_once():
    embed = CountingEmbed()
    text = " ".join(f"Finding {i} holds for the whole cohort of adults." for i in range(40))  # two chunks, overlap
    copy = "Finding 3 holds for the whole cohort of adults."  # a sentence of d1 again, in another document
    chunks = index_documents([("d1", "Cohort", text, {}), ("d2", "Copy", copy, {})], embed, KeywordAnalyzer(),
                             ChunkingConfig(max_chars=1000, overlap_chars=200))
    assert len(chunks) > 2 and chunks[-1].document_id == "d2"
    for chunk in chunks:
        stored = unpack(chunk.sentences)
        assert set(stored) == {text_key(u) for u in chunk_units(chunk.title, chunk.text)}
    sentences = [t for t in embed.asked if t.startswith("Finding")]
    assert len(sentences) == len(set(sentences))  # the overlap's and the copy's sentences were embedded once

    bare = index_documents([("d1", "Cohort", text, {})], CountingEmbed(), KeywordAnalyzer(),
                           ChunkingConfig(sentence_vectors=False))
    assert all(c.sentences == "" for c in bare)


class FakeStore:
    def __init__(self, rows: dict[str, dict[str, str]]) -> None:
        self.rows, self.reads = rows, []

    def sentence_vectors(self, name: str, chunk_ids: list[str]):
        self.reads.append((name, chunk_ids))
        if name == "broken":
            raise RuntimeError("Milvus away")
        found = {}
        for chunk_id in chunk_ids:
            found.update(unpack(self.rows.get(name, {}).get(chunk_id)))
        return found


def test_a_jobs_documents_are_read_once_per_collection_and_a_failed_read_costs_only_the_shortcut():
    a, b = chunk_units("A", "Alpha fact one. Alpha fact two."), chunk_units("", "Beta fact.")
    store = FakeStore({"m_c1": {"d1#0": pack(a, [vector(t) for t in a])},
                       "m_c2": {"d2#1": pack(b, [vector(t) for t in b])}})
    docs = [Document(id="d1", title="A", text="Alpha fact one. Alpha fact two.", metadata={"chunk_id": "d1#0"}),
            Document(id="d2", title="", text="Beta fact.", metadata={"chunk_id": "d2#1", "collection_id": "c2"}),
            Document(id="d3", title="", text="No chunk id.", metadata={})]
    stored = stored_for(store, docs, lambda c: f"m_{c}", default_collection="c1")
    assert set(stored) == {text_key(t) for t in a + b}
    assert sorted(store.reads) == [("m_c1", ["d1#0"]), ("m_c2", ["d2#1"])]
    assert stored_for(store, docs[:1], lambda c: "broken", "c1") == {}


def test_a_text_changed_on_the_way_is_embedded_not_read():
    embed = CountingEmbed()
    units = chunk_units("", "Call 555-0100 for results.")
    stored = unpack(pack(units, [vector(t) for t in units]))
    known = KnownVectors(embed, stored)
    known.embed(["Call [PHONE] for results."])  # what a redactor left of the sentence
    assert embed.asked == ["Call [PHONE] for results."]


def test_the_vector_store_reads_the_field_only_where_the_collection_has_it(monkeypatch):
    from agentsearch.pipeline.retrieval import vector_store as module

    payload = pack(["A fact."], [vector("A fact.")])

    class Client:
        def __init__(self, **kwargs) -> None:
            self.gets = []

        def has_collection(self, name, timeout=None):
            return True

        def describe_collection(self, name, timeout=None):
            fields = ["id", "vector", "sparse"] + (["sentences"] if name == "new" else [])
            return {"fields": [{"name": f} for f in fields]}

        def load_collection(self, name, timeout=None):
            pass

        def get(self, name, ids, output_fields, timeout=None):
            self.gets.append((name, output_fields))
            return [{"id": i, "sentences": payload} for i in ids]

        def upsert(self, name, rows):
            self.upserted = (name, rows)

        def flush(self, name):
            pass

    import pymilvus  # vector_store imports it on first use (milvus_channel.milvus)

    monkeypatch.setattr(pymilvus, "MilvusClient", lambda uri, token, grpc_options, dedicated: Client())
    store = module.VectorStore("http://milvus")
    assert set(store.sentence_vectors("new", ["d#0"])) == {text_key("A fact.")}
    assert store.sentence_vectors("old", ["d#0"]) == {}  # made before the field existed: nothing to read
    assert store._client.gets == [("new", ["sentences"])]
    chunk = module.IndexedChunk(id="d#0", document_id="d", title="", text="A fact.", vector=[0.0], sentences=payload)
    store.upsert("new", [chunk])
    assert store._client.upserted[1][0]["sentences"] == payload
    store.upsert("old", [chunk])  # an older collection takes the chunk without the field it lacks
    assert "sentences" not in store._client.upserted[1][0]


def test_the_answers_embed_reads_the_jobs_own_collections_and_the_cached_query_only():
    import uuid
    from types import SimpleNamespace

    from agentsearch.pipeline.job.job_state import JobState
    from agentsearch.pipeline.job.workflow import answer_embedder
    from agentsearch.pipeline.platform.tables.collections import milvus_collection_name

    mine, theirs = str(uuid.uuid4()), str(uuid.uuid4())
    own, other = chunk_units("", "Own fact."), chunk_units("", "Other fact.")
    store = FakeStore({milvus_collection_name(mine): {"d1#0": pack(own, [vector(t) for t in own])},
                       milvus_collection_name(theirs): {"d2#0": pack(other, [vector(t) for t in other])}})
    model = CountingEmbed()
    services = SimpleNamespace(vector_store=store, settings=SimpleNamespace(embedding_model="m"),
                               embedder=SimpleNamespace(embed=model),
                               retriever=SimpleNamespace(cached_embedding=lambda text, m: vector(text).tolist()
                                                         if text == "the query" else None))
    state = JobState(job_id="j", collection_id=mine, query="the query", collections={mine: 0}, documents=[
        Document(id="d1", title="", text="Own fact.", metadata={"chunk_id": "d1#0", "collection_id": mine}),
        Document(id="d2", title="", text="Other fact.", metadata={"chunk_id": "d2#0", "collection_id": theirs})])
    embed = answer_embedder(services, state)
    assert store.reads == []  # nothing read before the answer embeds
    vectors = embed(["the query", "Own fact.", "Other fact."])
    assert model.asked == ["Other fact."]  # not the job's collection: embedded, never read
    assert store.reads == [(milvus_collection_name(mine), ["d1#0"])]
    assert np.allclose(vectors[:2], [vector("the query"), vector("Own fact.")], atol=2e-3)


class SpanReader(CountingEmbed):
    """A model that reads spans from a text's pass: ``spans_read`` lists the span texts it pooled; a span past
    ``window`` characters is not read (None), as a real one past its token window."""

    def __init__(self, window: int = 10_000) -> None:
        super().__init__()
        self.window, self.spans_read = window, []

    def spans(self, texts: list[str], spans: list[list[tuple[int, int]]]):
        pooled = []
        for text, own in zip(texts, spans, strict=True):
            pooled.append([None if end > self.window else vector(f"in context: {text[start:end]}").tolist()
                           for start, end in own])
            self.spans_read.extend(text[start:end] for start, end in own if end <= self.window)
        return self(texts), pooled


def test_sentences_read_in_their_chunks_pass_are_not_embedded_again_but_titles_and_the_unread_are():
    reader = SpanReader(window=60)
    text = "Early finding holds. " + " ".join(f"Later finding {i} holds for the whole cohort." for i in range(3))
    (chunk,) = index_documents([("d1", "Cohort", text, {})], reader, KeywordAnalyzer(), embed_spans=reader.spans)
    assert reader.spans_read == ["Early finding holds."]
    # The chunk itself, then alone: the title and the sentences past the window.
    assert reader.asked[0] == f"Cohort. {text}"
    assert sorted(reader.asked[1:]) == sorted(["Cohort", *[f"Later finding {i} holds for the whole cohort."
                                                            for i in range(3)]])
    stored = unpack(chunk.sentences)
    assert np.allclose(stored[text_key("Early finding holds.")], vector("in context: Early finding holds."), atol=1e-3)
    assert set(stored) == {text_key(u) for u in chunk_units(chunk.title, chunk.text)}


def test_sentence_spans_point_at_each_sentence_in_the_embedded_text():
    from agentsearch.pipeline.ingestion.indexing import sentence_spans

    piece = "First one here. Second  one\nthere. Third."
    text = f"Title. {piece}"
    found = sentence_spans(text, piece)
    assert all(text[start:end] == sentence for sentence, (start, end) in found)
    assert found[0][0] == "First one here." and found[-1][0] == "Third."
