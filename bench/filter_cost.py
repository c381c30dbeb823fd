"""What a metadata filter costs a Milvus Lite search, stored in the JSON field jobs use beside a dynamic field.

Two scratch collections of the same rows (random 384-dimensional vectors, metadata with a region, a tier and a
published date) in a temporary Milvus Lite: one keeps the metadata in the ``metadata`` JSON field only (as
``VectorStore`` does), the other also writes its keys as dynamic fields (``$meta``). Each filter is the expression
``pipeline.retrieval.filters`` compiles, timed on a top-100 dense search; medians of ``--repeat`` searches.

    agentsearch bench filters                            # 10,000 rows
    agentsearch bench filters --rows 2000 --repeat 10 --json filter_cost.json
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pymilvus import DataType, MilvusClient  # noqa: E402

from pipeline.retrieval.filters import MetadataFilter  # noqa: E402

DIMENSION = 384
FILTERS = {
    "trivially true (not exists)": {"not": {"exists": {"key": "absent"}}},
    "eq (a third of the rows)": {"eq": {"key": "region", "value": "emea"}},
    "range on dates (a fifth)": {"range": {"key": "issued", "gte": "2022-01-01", "lt": "2023-01-01"}},
    "and of three": {"and": [{"eq": {"key": "region", "value": "emea"}}, {"range": {"key": "tier", "gte": 2}},
                             {"exists": {"key": "issued"}}]},
}


def build(client: MilvusClient, name: str, rows: list[tuple], dynamic: bool) -> None:
    schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=dynamic)
    schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=64)
    schema.add_field("metadata", DataType.JSON)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=DIMENSION)
    index = client.prepare_index_params()
    index.add_index(field_name="vector", index_type="AUTOINDEX", metric_type="COSINE")
    client.create_collection(name, schema=schema, index_params=index, consistency_level="Strong")
    for start in range(0, len(rows), 1000):
        client.insert(name, [{"id": i, "metadata": m, "vector": v, **(m if dynamic else {})}
                             for i, m, v in rows[start:start + 1000]])
    client.flush(name)


def median_ms(client: MilvusClient, name: str, query: list[float], expression: str, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        client.search(name, data=[query], limit=100, filter=expression, anns_field="vector")
        times.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(times), 1)


def measure(rows_wanted: int = 10_000, repeat: int = 15) -> dict:
    """Median milliseconds of a top-100 dense search per filter, in the JSON field and in dynamic fields."""
    logging.disable(logging.WARNING)
    rng = random.Random(1)
    rows = [(f"d{i}", {"region": rng.choice(["emea", "apac", "amer"]), "tier": rng.randint(1, 5),
                       "issued": f"{rng.randint(2020, 2024)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"},
             [rng.random() for _ in range(DIMENSION)]) for i in range(rows_wanted)]
    query = [rng.random() for _ in range(DIMENSION)]
    with tempfile.TemporaryDirectory() as tmp:
        client = MilvusClient(str(Path(tmp) / "filters.db"))
        build(client, "json_field", rows, dynamic=False)
        build(client, "dynamic_field", rows, dynamic=True)
        results: dict = {"rows": rows_wanted, "no filter": {
            "json_field": median_ms(client, "json_field", query, "", repeat),
            "dynamic_field": median_ms(client, "dynamic_field", query, "", repeat),
        }}
        for label, raw in FILTERS.items():
            expression = MetadataFilter.model_validate(raw).expression()
            results[label] = {
                "json_field": median_ms(client, "json_field", query, expression, repeat),
                # The same expression on the dynamic keys: $meta["k"] where the JSON field has metadata["k"].
                "dynamic_field": median_ms(client, "dynamic_field", query,
                                           expression.replace('metadata["', '$meta["'), repeat),
            }
        client.close()
    return results


def table(results: dict) -> str:
    return "\n".join(f"{label:30} JSON field {figures['json_field']:8.1f} ms   "
                     f"dynamic field {figures['dynamic_field']:8.1f} ms"
                     for label, figures in results.items() if label != "rows")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    results = measure(args.rows, args.repeat)
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
