"""Could a chunk's own pass give its sentences' vectors from an earlier layer? How each layer's pooled span agrees
with the vector the sentence gets alone (what ingestion stores, and what a query's vector is compared with).

    .venv/bin/python -m agentsearch.bench.sentence_layers [--docs 60]

The packaged MiniLM in float32 (transformers, every layer's states): for each chunk of the first SciFact abstracts
(title and text, the service's 1,000-character pieces) and each of its sentences, the cosine between the sentence
embedded alone (last layer, mean of its tokens) and the mean of the sentence's tokens in the chunk's pass at layer 0
(the token embeddings) to 6 (the last: late chunking), and mixes of an earlier layer with the last. A variant that
agrees less with the sentence-alone vectors than late chunking does cannot keep what late chunking already lost
(docs/evaluation.md, "Embedding runtime"), so only one that agrees more would be worth a quality evaluation.
"""

from __future__ import annotations

import argparse
import statistics

import numpy as np

MIXES = ((3, 0.3), (4, 0.3), (5, 0.3), (5, 0.5))  # (earlier layer, its weight beside the last layer)


def _unit(vector: np.ndarray) -> np.ndarray:
    return vector / np.linalg.norm(vector)


def measure(docs: int = 60, documents: list[dict] | None = None) -> dict[str, float]:
    """Mean cosine with the sentence-alone vector, per variant (``layer N``, ``mix N w``), over the first ``docs``
    SciFact abstracts or over ``documents`` (``{"title", "text"}``) when given."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    from agentsearch.bench.ingest import CORPUS, chunk_texts
    from agentsearch.pipeline.eval.retrieval import load_beir_corpus
    from agentsearch.pipeline.ingestion.chunking import ChunkingConfig
    from agentsearch.pipeline.ingestion.indexing import sentence_spans
    from agentsearch.pipeline.retrieval.model_files import resolve_model_path

    path = str(resolve_model_path("all-MiniLM-L6-v2"))
    tokenizer, model = AutoTokenizer.from_pretrained(path), AutoModel.from_pretrained(path).eval()
    cosines: dict[str, list[float]] = {}
    with torch.no_grad():
        for text in chunk_texts(documents or load_beir_corpus(CORPUS)[:docs], ChunkingConfig()):
            encoded = tokenizer(text, return_offsets_mapping=True, truncation=True, max_length=256,
                                return_tensors="pt")
            offsets = encoded.pop("offset_mapping")[0].numpy()
            layers = [h[0].numpy() for h in model(**encoded, output_hidden_states=True).hidden_states]
            for sentence, (start, end) in sentence_spans(text, text):
                inside = (offsets[:, 0] >= start) & (offsets[:, 1] <= end) & (offsets[:, 1] > offsets[:, 0])
                if not inside.any():
                    continue
                alone = tokenizer(sentence, truncation=True, max_length=256, return_tensors="pt")
                expected = _unit(model(**alone).last_hidden_state[0].mean(0).numpy())
                pooled = [_unit(states[inside].mean(0)) for states in layers]
                for n, vector in enumerate(pooled):
                    cosines.setdefault(f"layer {n}", []).append(float(vector @ expected))
                for n, weight in MIXES:
                    mixed = _unit(weight * pooled[n] + (1 - weight) * pooled[-1])
                    cosines.setdefault(f"mix {n} {weight}", []).append(float(mixed @ expected))
    return {name: round(statistics.mean(values), 4) for name, values in cosines.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=60)
    for name, cosine in measure(parser.parse_args().docs).items():
        print(f"{name}: mean cosine with the sentence alone {cosine}")


if __name__ == "__main__":
    main()
