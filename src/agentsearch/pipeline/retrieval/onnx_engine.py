"""A sentence-transformers model with mean pooling on ONNX Runtime: the packaged MiniLM's default runtime.

Two things make ingestion faster here than on the model as sentence-transformers runs it. The graph, exported once
(``agentsearch.pipeline.retrieval.onnx_export``), is fused and, by default, quantised to int8. And the pass returns
token states, not one vector per text: ``encode_spans`` pools the vector of the whole text and of spans of it (a chunk's
sentences) from the same pass, as "late chunking" does; with ``AGENTSEARCH_LATE_CHUNKING`` ingestion uses it instead
of a second pass over every sentence alone. A span's tokens have read the whole chunk, so its vector knows the
sentence's context; docs/evaluation.md ("Embedding runtime") measures what that does to the search.

A passages' engine runs its passes side by side (``parallel=True``): one session of one thread per core it is given,
each batch of a call on the next free one. One session on every core synchronises its threads at each of the
graph's operations; on shared cores every such wait lasts until the scheduler runs the sleeping thread again, and a
pass of short sentences spent more time waiting than computing (src/agentsearch/bench/results/embedding_sessions.md).

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
import queue
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

Span = tuple[int, int]


class OnnxEngine:
    def __init__(self, model_dir: Path, onnx_path: Path, threads: int = 0, batch_size: int = 32,
                 spin: bool = False, parallel: bool = False) -> None:
        from tokenizers import Tokenizer

        config = json.loads((model_dir / "sentence_bert_config.json").read_text())
        self.max_tokens = int(config.get("max_seq_length") or 256)
        self.batch_size = batch_size
        self._tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self._tokenizer.enable_truncation(self.max_tokens)
        self._tokenizer.no_padding()
        self.threads = threads  # 0: every core; read when this process's sessions are made
        self.spin = spin
        self.parallel = parallel
        # Read now, so that a path that is not a model fails here rather than in the first pass.
        self._model_bytes = onnx_path.read_bytes()
        self._sessions: queue.SimpleQueue | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._sessions_pid: int | None = None
        self._side_by_side = 1
        self._made = threading.Lock()  # the sessions are made once, by whichever call comes first
        self.dimension = int(json.loads((model_dir / "config.json").read_text())["hidden_size"])

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
        sessions, pool = self._sessions_of_this_process()
        # Side by side, a call gives each session a batch at least: 40 texts on two run as 20 and 20, not 32 and 8.
        size = max(1, min(self.batch_size, -(-len(order) // self._side_by_side))) if pool else self.batch_size
        batches = [order[start:start + size] for start in range(0, len(order), size)]

        def run(batch: list[int]) -> None:
            states, mask = self._run([encodings[i].ids for i in batch], sessions)
            for row, i in enumerate(batch):
                vectors[i] = _unit(states[row][mask[row]].mean(axis=0))
                if spans[i]:
                    pooled[i] = _span_vectors(states[row][:len(encodings[i].ids)], encodings[i], spans[i])

        if pool is None or len(batches) < 2:
            for batch in batches:
                run(batch)
        else:
            list(pool.map(run, batches))  # each batch's rows are its own: no two threads write one row
        return vectors, pooled

    def _run(self, token_ids: list[list[int]], sessions: queue.SimpleQueue) -> tuple[np.ndarray, np.ndarray]:
        width = max(len(ids) for ids in token_ids)
        ids = np.zeros((len(token_ids), width), dtype=np.int64)
        for row, own in enumerate(token_ids):
            ids[row, :len(own)] = own
        mask = (np.arange(width)[None, :] < np.array([len(own) for own in token_ids])[:, None])
        feed = {"input_ids": ids, "attention_mask": mask.astype(np.int64), "token_type_ids": np.zeros_like(ids)}
        # A free session, or a wait for one: every session already uses the threads it was given.
        session = sessions.get()
        try:
            inputs = {i.name for i in session.get_inputs()}
            (states,) = session.run(None, {k: v for k, v in feed.items() if k in inputs})
        finally:
            sessions.put(session)
        return states, mask

    def _sessions_of_this_process(self) -> tuple[queue.SimpleQueue, ThreadPoolExecutor | None]:
        """The free sessions, and the threads that run batches side by side (None: one session), made in the
        process that runs them: a worker loads the engine before it forks its pool, and a session's thread pool
        does not survive a fork (its threads stay in the parent)."""
        with self._made:
            if self._sessions_pid != os.getpid():
                self._make_sessions()
        assert self._sessions is not None
        return self._sessions, self._pool

    def _make_sessions(self) -> None:
        cores = self.threads or (os.cpu_count() or 1)
        count, threads = (cores, 1) if self.parallel else (1, cores)
        sessions: queue.SimpleQueue = queue.SimpleQueue()
        for _ in range(count):
            sessions.put(self._new_session(threads))
        self._pool = ThreadPoolExecutor(count, thread_name_prefix="agentsearch-onnx") if count > 1 else None
        self._sessions, self._sessions_pid, self._side_by_side = sessions, os.getpid(), count

    def _new_session(self, threads: int):
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        # Idle threads sleep rather than spin unless asked (``embedding_spin``): several worker processes share
        # the cores, and a spinning pool takes from its neighbours the time it waits (measured: twice the time
        # per pass under load). A session of one thread has no pool to spin.
        options.add_session_config_entry("session.intra_op.allow_spinning", "1" if self.spin else "0")
        return onnxruntime.InferenceSession(self._model_bytes, options, providers=["CPUExecutionProvider"])


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
