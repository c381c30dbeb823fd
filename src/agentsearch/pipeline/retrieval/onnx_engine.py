"""A sentence-transformers model with mean pooling on ONNX Runtime: the packaged MiniLM's default runtime.

Two things make ingestion faster here than on the model as sentence-transformers runs it. The graph, exported once
(``agentsearch.pipeline.retrieval.onnx_export``), is fused and, by default, quantised to int8. And the pass returns
token states, not one vector per text: ``encode_spans`` pools the vector of the whole text and of spans of it (a chunk's
sentences) from the same pass, as "late chunking" does; with ``AGENTSEARCH_LATE_CHUNKING`` ingestion uses it instead
of a second pass over every sentence alone. A span's tokens have read the whole chunk, so its vector knows the
sentence's context; docs/evaluation.md ("Embedding runtime") measures what that does to the search.

Usage::

    engine = OnnxEngine(model_dir, exported_model(model_dir, "int8", cache_dir))
    engine.dimension                                                  # 384
    engine.encode(["solar output", "wind turbines"])                  # unit-length float32 rows
    vectors, spans = engine.encode_spans(["Solar. Panels work."], [[(0, 6), (7, 19)]])
    spans[0][1]                                                       # "Panels work." read in its chunk, or None
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import numpy as np

Span = tuple[int, int]


class OnnxEngine:
    def __init__(self, model_dir: Path, onnx_path: Path, threads: int = 0, batch_size: int = 32,
                 spin: bool = False) -> None:
        from tokenizers import Tokenizer

        config = json.loads((model_dir / "sentence_bert_config.json").read_text())
        self.max_tokens = int(config.get("max_seq_length") or 256)
        self.batch_size = batch_size
        self._tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self._tokenizer.enable_truncation(self.max_tokens)
        self._tokenizer.no_padding()
        self.threads = threads  # 0: every core; read when this process's session is made
        self.spin = spin
        # Read now, so that a path that is not a model fails here rather than in the first pass.
        self._model_bytes = onnx_path.read_bytes()
        self._session, self._session_pid = None, None
        self.dimension = int(json.loads((model_dir / "config.json").read_text())["hidden_size"])
        # One pass at a time per process: each already uses every thread it was given.
        self._lock = threading.Lock()

    def encode(self, texts: list[str]) -> np.ndarray:
        """Unit-length vectors, one row per text (the mean of its token states, as the model was trained)."""
        return self.encode_spans(texts, [[] for _ in texts])[0]

    def encode_spans(self, texts: list[str], spans: list[list[Span]]
                     ) -> tuple[np.ndarray, list[list[np.ndarray | None]]]:
        """Each text's vector, and for each ``(start, end)`` character span of it the mean of the token states of
        the tokens inside it, from the same pass. A span with no token inside the model's window (past its
        ``max_tokens``, or blank) is None: the caller embeds that text alone."""
        if len(spans) != len(texts):
            raise ValueError(f"{len(texts)} texts but spans for {len(spans)}")
        vectors = np.zeros((len(texts), self.dimension), dtype=np.float32)
        pooled: list[list[np.ndarray | None]] = [[] for _ in texts]
        encodings = self._tokenizer.encode_batch(texts)
        # Texts of like length run together, so a batch pads little.
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        for start in range(0, len(order), self.batch_size):
            batch = order[start:start + self.batch_size]
            states, mask = self._run([encodings[i].ids for i in batch])
            for row, i in enumerate(batch):
                vectors[i] = _unit(states[row][mask[row]].mean(axis=0))
                if spans[i]:
                    pooled[i] = _span_vectors(states[row][:len(encodings[i].ids)], encodings[i], spans[i])
        return vectors, pooled

    def _run(self, token_ids: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
        width = max(len(ids) for ids in token_ids)
        ids = np.zeros((len(token_ids), width), dtype=np.int64)
        for row, own in enumerate(token_ids):
            ids[row, :len(own)] = own
        mask = (np.arange(width)[None, :] < np.array([len(own) for own in token_ids])[:, None])
        feed = {"input_ids": ids, "attention_mask": mask.astype(np.int64), "token_type_ids": np.zeros_like(ids)}
        with self._lock:
            session = self._session_of_this_process()
            inputs = {i.name for i in session.get_inputs()}
            (states,) = session.run(None, {k: v for k, v in feed.items() if k in inputs})
        return states, mask

    def _session_of_this_process(self):
        """The session, made in the process that runs it: a worker loads the engine before it forks its pool, and
        a session's thread pool does not survive a fork (its threads stay in the parent)."""
        if self._session_pid != os.getpid():
            import onnxruntime

            options = onnxruntime.SessionOptions()
            options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
            options.intra_op_num_threads = self.threads or (os.cpu_count() or 1)
            options.inter_op_num_threads = 1
            # Idle threads sleep rather than spin unless asked (``embedding_spin``): several worker processes share
            # the cores, and a spinning pool takes from its neighbours the time it waits (measured: twice the time
            # per pass under load).
            options.add_session_config_entry("session.intra_op.allow_spinning", "1" if self.spin else "0")
            self._session = onnxruntime.InferenceSession(self._model_bytes, options,
                                                         providers=["CPUExecutionProvider"])
            self._session_pid = os.getpid()
        return self._session


def _span_vectors(states: np.ndarray, encoding, spans: list[Span]) -> list[np.ndarray | None]:
    offsets = np.asarray(encoding.offsets, dtype=np.int64).reshape(-1, 2)
    # Special tokens ([CLS], [SEP]) and tokens of no characters belong to no span.
    real = (np.asarray(encoding.special_tokens_mask) == 0) & (offsets[:, 1] > offsets[:, 0])
    pooled: list[np.ndarray | None] = []
    for start, end in spans:
        inside = real & (offsets[:, 0] >= start) & (offsets[:, 1] <= end)
        pooled.append(_unit(states[inside].mean(axis=0)) if inside.any() else None)
    return pooled


def _unit(vector: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(vector))
    return (vector / norm).astype(np.float32) if norm > 0 else vector.astype(np.float32)
