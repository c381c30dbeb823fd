"""Does the BM25 side of search answer to k1 and b? SciFact train, keyword search alone, one collection per setting.

Every SciFact abstract is chunked and analysed as ingestion does (``chunk_keywords``), and only the keyword side
is indexed (no embeddings, so a setting costs seconds): a collection per ``(k1, b)``, the two given to the sparse
index as ``bm25_k1`` and ``bm25_b``. Each training claim is analysed as a search analyses it and the nDCG@10 of the
keyword ranking is printed per setting. The same figure for every setting means the server does not apply them.

Usage::

    .venv/bin/python -m agentsearch.bench.bm25_parameters [--data ../shared/eval/scifact] [--milvus /tmp/bm25.db]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

SETTINGS = ((1.2, 0.75), (0.9, 0.4), (1.2, 0.5), (1.5, 0.75), (0.9, 0.75), (1.2, 0.9), (2.0, 0.75))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/eval/scifact"))
    parser.add_argument("--milvus", default=str(Path(tempfile.gettempdir()) / "bm25-parameters.db"),
                        help="A Milvus Lite file, or a server's URI.")
    args = parser.parse_args()

    from pymilvus import DataType, Function, FunctionType, MilvusClient

    from agentsearch.pipeline.eval.retrieval import load_beir_corpus, load_beir_queries, load_qrels, ndcg_at
    from agentsearch.pipeline.ingestion.chunking import chunk_text
    from agentsearch.pipeline.ingestion.indexing import chunk_keywords
    from agentsearch.pipeline.retrieval.analyzer import KeywordAnalyzer, bm25_text

    analyzer = KeywordAnalyzer("auto")
    rows = [{"id": f"{d['id']}#{i}", "document_id": d["id"],
             "keywords": chunk_keywords(analyzer, d["title"], piece, {})[1] or " "}
            for d in load_beir_corpus(args.data / "corpus.jsonl") for i, piece in enumerate(chunk_text(d["text"]))]
    judged = load_qrels(args.data / "qrels" / "train.tsv")
    claims = {q: bm25_text(analyzer.query_terms(t, ["en"])[0])
              for q, t in load_beir_queries(args.data / "queries_train.jsonl").items() if q in judged}
    print(f"{len(rows)} chunks, {len(claims)} claims")
    client = MilvusClient(args.milvus)
    for k1, b in SETTINGS:
        name = f"bm25_{k1}_{b}".replace(".", "_")
        if client.has_collection(name):
            client.drop_collection(name)
        schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=512)
        schema.add_field("document_id", DataType.VARCHAR, max_length=512)
        schema.add_field("keywords", DataType.VARCHAR, max_length=65535, enable_analyzer=True,
                         analyzer_params={"type": "standard"})
        schema.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
        schema.add_function(Function(name="bm25", function_type=FunctionType.BM25, input_field_names=["keywords"],
                                     output_field_names=["sparse"]))
        index = client.prepare_index_params()
        index.add_index(field_name="sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25",
                        params={"bm25_k1": k1, "bm25_b": b})
        client.create_collection(name, schema=schema, index_params=index, consistency_level="Strong")
        for start in range(0, len(rows), 1000):
            client.insert(name, rows[start : start + 1000])
        client.flush(name)
        client.load_collection(name)
        scores = []
        for claim_id, analysed in claims.items():
            hits = client.search(name, data=[analysed], anns_field="sparse", limit=100, output_fields=["document_id"],
                                 search_params={"metric_type": "BM25"})[0] if analysed.strip() else []
            scores.append(ndcg_at(list(dict.fromkeys(h["entity"]["document_id"] for h in hits)), judged[claim_id]))
        print(f"k1 {k1}, b {b}: nDCG@10 {sum(scores) / len(scores):.4f}", flush=True)
        client.drop_collection(name)


if __name__ == "__main__":
    main()
