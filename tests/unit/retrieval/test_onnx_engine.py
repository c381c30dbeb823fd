"""The packaged MiniLM exported to ONNX and run by ONNX Runtime, read against sentence-transformers running the same
weights: the vectors agree, and a chunk's pass gives its sentences' vectors.

The exported files are the ones ``make install`` builds into the model cache (built here if missing).
"""

from __future__ import annotations

import numpy as np
import pytest

from agentsearch.pipeline.platform.settings import get_settings
from agentsearch.pipeline.retrieval.embedder import Embedder
from agentsearch.pipeline.retrieval.model_files import resolve_model_path
from agentsearch.pipeline.retrieval.onnx_engine import OnnxEngine
from agentsearch.pipeline.retrieval.onnx_export import exported_model, onnx_model_for

MODEL = "all-MiniLM-L6-v2"
TEXTS = [
    "Solar panels convert sunlight into electricity.",
    "The committee approved the budget for the next fiscal year after a long debate about road repairs.",
    "Mitochondria are the powerhouse of the cell.",
    "x",
]
CHUNK = ("Harbour report. The harbour handled 4.2 million containers in 2023. Most ships came from Asia. "
         "A new crane was bought in March.")


@pytest.fixture(scope="module")
def reference():
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(resolve_model_path(MODEL)), device="cpu")


@pytest.fixture(scope="module", params=["onnx", "onnx-int8"])
def engine(request):
    path = onnx_model_for(MODEL, request.param, get_settings().model_cache_dir)
    assert path is not None and path.is_file()
    return request.param, OnnxEngine(resolve_model_path(MODEL), path)


def test_the_exported_model_gives_the_vectors_sentence_transformers_gives(engine, reference):
    runtime, onnx = engine
    expected = reference.encode(TEXTS, normalize_embeddings=True)
    got = onnx.encode(TEXTS)
    assert got.shape == expected.shape
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    cosines = (got * expected).sum(axis=1)
    # float32 is the same computation in another order; int8 weights move a vector a little (0.99 on average over
    # SciFact abstracts, 0.98 for a one-letter text), never to another text.
    assert cosines.min() > (0.9999 if runtime == "onnx" else 0.97), cosines
    assert (got @ expected.T).argmax(axis=1).tolist() == list(range(len(TEXTS)))


def test_a_chunks_pass_gives_each_sentence_a_vector_near_its_own(engine, reference):
    _, onnx = engine
    sentences = ["The harbour handled 4.2 million containers in 2023.", "Most ships came from Asia.",
                 "A new crane was bought in March."]
    spans = [(CHUNK.index(s), CHUNK.index(s) + len(s)) for s in sentences]
    (chunk_vector,), (pooled,) = onnx.encode_spans([CHUNK], [spans])
    assert np.allclose(chunk_vector, onnx.encode([CHUNK])[0], atol=1e-5)  # the chunk's vector is unchanged
    alone = reference.encode(sentences, normalize_embeddings=True)
    similarity = np.array(pooled) @ alone.T
    # Each sentence read in its chunk is nearest to itself read alone, though it has read its neighbours too.
    assert similarity.argmax(axis=1).tolist() == [0, 1, 2], similarity
    assert similarity.diagonal().min() > 0.7, similarity


def test_a_span_past_the_models_window_or_of_no_token_is_not_read(engine):
    _, onnx = engine
    long_text = "word " * 600 + "The last sentence stands far beyond the window."
    tail = long_text.index("The last")
    (_,), (pooled,) = onnx.encode_spans([long_text], [[(0, 4), (tail, len(long_text)), (3, 3)]])
    assert pooled[0] is not None and pooled[1] is None and pooled[2] is None
    with pytest.raises(ValueError, match="spans for 0"):
        onnx.encode_spans(["a"], [])


def test_the_torch_runtime_and_engine_models_export_nothing():
    settings = get_settings()
    assert onnx_model_for(MODEL, "torch", settings.model_cache_dir) is None
    assert onnx_model_for("multilingual-e5-small", "onnx-int8", settings.model_cache_dir) is None


def test_the_embedder_reads_spans_on_onnx_and_asks_for_them_alone_on_torch(reference):
    path = onnx_model_for(MODEL, "onnx", get_settings().model_cache_dir)
    on_onnx = Embedder(MODEL, onnx_path=path)
    vectors, spans = on_onnx.embed_spans([CHUNK], [[(0, 14)]])
    assert len(vectors) == 1 and spans[0][0] is not None
    assert np.allclose(on_onnx.embed_queries([TEXTS[0]])[0], reference.encode(TEXTS[0], normalize_embeddings=True),
                       atol=1e-4)
    on_torch = Embedder(MODEL)
    vectors, spans = on_torch.embed_spans([CHUNK], [[(0, 14)]])
    assert len(vectors) == 1 and spans == [[None]]


def test_queries_run_on_the_float32_graph_while_passages_stay_int8(reference):
    from agentsearch.pipeline.platform.settings import Settings
    from agentsearch.pipeline.retrieval.embedder import make_embedder, query_model_for

    cache = get_settings().model_cache_dir
    int8, fp32 = onnx_model_for(MODEL, "onnx-int8", cache), onnx_model_for(MODEL, "onnx", cache)
    embedder = make_embedder(Settings(embedding_runtime="onnx-int8", embedding_query_runtime="onnx",
                                      model_cache_dir=cache, embedding_url=None))
    assert isinstance(embedder, Embedder)
    expected = reference.encode(TEXTS, normalize_embeddings=True)
    queries, passages = np.array(embedder.embed_queries(TEXTS)), np.array(embedder.embed(TEXTS))
    # The query side is the float32 graph's (sentence-transformers to the fourth place); passages are int8's, as
    # they were indexed, so they move a little more.
    assert np.allclose(queries, OnnxEngine(resolve_model_path(MODEL), fp32).encode(TEXTS), atol=1e-5)
    assert (queries * expected).sum(axis=1).min() > 0.9999
    assert np.allclose(passages, OnnxEngine(resolve_model_path(MODEL), int8, parallel=True).encode(TEXTS), atol=1e-5)
    assert not np.allclose(queries, passages, atol=1e-3)
    # "same", or the passages' own runtime, is one graph for both sides; a model off ONNX Runtime has no second.
    for same in (Settings(embedding_runtime="onnx-int8", embedding_query_runtime="same", model_cache_dir=cache),
                 Settings(embedding_runtime="onnx-int8", embedding_query_runtime="onnx-int8", model_cache_dir=cache)):
        assert query_model_for(same, int8) is None
    assert query_model_for(Settings(embedding_runtime="torch", model_cache_dir=cache), None) is None


def test_each_layers_attention_is_one_fused_operator(engine):
    import onnx

    runtime, _ = engine
    path = onnx_model_for(MODEL, runtime, get_settings().model_cache_dir)
    assert path is not None
    ops = [node.op_type for node in onnx.load(str(path)).graph.node]
    layers = 6  # all-MiniLM-L6-v2
    # Unfused, the attention is a dozen small operations per layer (masks, IsNaN, Where) that took half a pass.
    assert ops.count("QAttention" if runtime == "onnx-int8" else "Attention") == layers, sorted(set(ops))
    assert "IsNaN" not in ops and "Where" not in ops and "Softmax" not in ops


def test_a_short_text_padded_in_a_batch_of_longer_ones_keeps_its_vector(engine):
    runtime, onnx = engine
    alone = onnx.encode([TEXTS[0]])
    engine_batch, onnx.batch_size = onnx.batch_size, 8
    try:
        padded = onnx.encode([TEXTS[0], CHUNK, TEXTS[1]])[0]
    finally:
        onnx.batch_size = engine_batch
    # The padding is masked out of the attention: the short text reads as it does alone. int8 quantises each pass's
    # activations on the scale of the whole batch, which moves a vector a little (0.995 here, as before the fused
    # attention).
    assert float(alone[0] @ padded) > (0.9999 if runtime == "onnx" else 0.99)


def test_a_spinning_session_gives_the_same_vectors_and_the_setting_reaches_it(engine, monkeypatch):
    from agentsearch.pipeline.platform.settings import Settings
    from agentsearch.pipeline.retrieval.embedder import make_embedder

    runtime, onnx = engine
    path = onnx_model_for(MODEL, runtime, get_settings().model_cache_dir)
    spinning = OnnxEngine(resolve_model_path(MODEL), path, threads=2, spin=True)
    # How idle threads wait changes the time of a pass, never what it computes.
    assert np.array_equal(spinning.encode(TEXTS), onnx.encode(TEXTS))
    made = []

    class Recorded:
        dimension = 384

        def __init__(self, *args, **kwargs) -> None:
            made.append(kwargs)

    monkeypatch.setattr("agentsearch.pipeline.retrieval.onnx_engine.OnnxEngine", Recorded)
    for env, expected in (("true", True), ("false", False)):
        monkeypatch.setenv("AGENTSEARCH_EMBEDDING_SPIN", env)
        settings = Settings(embedding_runtime=runtime)
        assert settings.embedding_spin is expected
        make_embedder(settings)
        assert made[-1]["spin"] is expected


def test_passes_side_by_side_give_the_vectors_of_one_session_and_use_every_session(engine):
    runtime, onnx = engine
    path = onnx_model_for(MODEL, runtime, get_settings().model_cache_dir)
    side_by_side = OnnxEngine(resolve_model_path(MODEL), path, threads=2, parallel=True)
    texts = [f"{text} ({i})" for i in range(10) for text in TEXTS]
    spans = [[(0, len(text) // 2)] for text in texts]
    vectors, pooled = side_by_side.encode_spans(texts, spans)
    alone, alone_pooled = onnx.encode_spans(texts, spans)
    # Each text's row, in the caller's order, whichever session ran its batch. int8 quantises each pass's activations
    # on its batch's scale, and the batches differ (20 and 20 texts instead of 32 and 8): a little movement only.
    cosines = (vectors * alone).sum(axis=1)
    assert cosines.min() > (0.9999 if runtime == "onnx" else 0.97), cosines
    nearest = (vectors @ alone.T).argmax(axis=1)
    assert [int(i) % len(TEXTS) for i in nearest] == [i % len(TEXTS) for i in range(len(texts))]
    spans_agree = [float(a[0] @ b[0]) for a, b in zip(pooled, alone_pooled, strict=True)]
    assert min(spans_agree) > (0.9999 if runtime == "onnx" else 0.97)
    sessions, pool = side_by_side._sessions_of_this_process()
    assert pool is not None and sessions.qsize() == 2  # two sessions, both free again
    assert all(s.get_session_options().intra_op_num_threads == 1 for s in (sessions.get(), sessions.get()))


def test_a_model_shipped_without_its_weights_finds_the_graph_exported_from_them(tmp_path):
    """The image removes the weights after its build exported them: the graph is found by the model's name, never
    built again (there is nothing to build it from), and its absence is said plainly."""
    model_dir, cache = tmp_path / "model", tmp_path / "cache"
    model_dir.mkdir()
    cache.mkdir()
    (model_dir / "config.json").write_text('{"hidden_size": 384}')
    (model_dir / "tokenizer.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match="no weights"):
        exported_model(model_dir, "int8", cache)
    built = cache / "model-0123456789ab-int8.onnx"
    built.write_bytes(b"graph")
    (cache / "model-0123456789ab-fp32.onnx").write_bytes(b"other precision")
    assert exported_model(model_dir, "int8", cache) == built
