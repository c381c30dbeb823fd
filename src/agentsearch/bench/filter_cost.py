"""What a metadata filter costs a Milvus Lite search, stored in the JSON field jobs use beside a dynamic field, and
what the document-groups filter of a team collection's search costs.

Two scratch collections of the same rows (random 384-dimensional vectors, metadata with a region, a tier and a
published date) in a temporary Milvus Lite: one keeps the metadata in the ``metadata`` JSON field only (as
``VectorStore`` does), the other also writes its keys as dynamic fields (``$meta``). Each filter is the expression
``agentsearch.pipeline.retrieval.filters`` compiles, timed on a top-100 dense search; medians of ``--repeat`` searches.

Document groups: a fifth of the rows (``--restricted``) are chunks of documents restricted to one of four groups of
a team, their tokens in ``metadata["_access_groups"]`` as ``VectorStore`` writes them; the rest are unrestricted.
A top-100 dense search in the JSON field is timed without a filter and with ``access_filter(tokens)`` of
``agentsearch.pipeline.security.document_access`` for a searcher in no group, in one, in three and in twenty (groups of
other teams too), and that filter joined with a user's filter (``restricted``): what every search of a job over a team
collection applies. The cases are interleaved, each round timing every case once, so a change in the machine's
load falls on all of them; every hit returned is checked against the filter (``MetadataFilter.matches``), and the
rows Milvus counts with the filter against those the filter keeps in Python.

    agentsearch bench filters                            # 10,000 rows, a fifth restricted
    agentsearch bench filters --rows 2000 --repeat 10 --json filter_cost.json
    .venv/bin/python -m agentsearch.bench.filter_cost --restricted 0.5   # half of the rows restricted
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from pymilvus import DataType, MilvusClient

from agentsearch.pipeline.retrieval.filters import MetadataFilter
from agentsearch.pipeline.security.document_access import ACCESS_KEY, access_filter, restricted, token

DIMENSION = 384
RESULTS = Path(__file__).resolve().parent / "results" / "filter_cost.md"
TEAM = "5f0c2a3e-0000-4000-8000-00000000beef"
GROUPS = ("finance", "legal", "hr", "board")
TRUE = {"not": {"exists": {"key": "absent"}}}
FILTERS = {
    "trivially true (not exists)": TRUE,
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
        # The access key stays out of the dynamic fields: Milvus Lite refuses json_contains_any (the `in` over a
        # list the access filter needs) there, so only the JSON field is timed with it.
        client.insert(name, [{"id": i, "metadata": m, "vector": v,
                              **({k: x for k, x in m.items() if k != ACCESS_KEY} if dynamic else {})}
                             for i, m, v in rows[start:start + 1000]])
    client.flush(name)


def settle(client: MilvusClient, name: str, query: list[float], limit_s: float = 60) -> None:
    """Search without a filter until three searches in a row take under 1.5 times the fastest (at most ``limit_s``):
    after the flush Milvus Lite reports the index built, yet its searches take ten times longer for some seconds,
    which would fall on the cases timed first."""
    times: list[float] = []
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline and (len(times) < 3 or max(times[-3:]) > 1.5 * min(times)):
        started = time.perf_counter()
        client.search(name, data=[query], limit=100, anns_field="vector")
        times.append(time.perf_counter() - started)
        time.sleep(0.2)


def median_ms(client: MilvusClient, name: str, query: list[float], expression: str, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        client.search(name, data=[query], limit=100, filter=expression, anns_field="vector")
        times.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(times), 1)


def groups_cases() -> dict[str, MetadataFilter]:
    """The access filters a team collection's search applies, by what the searcher holds, and one joined with a
    user's own filter."""
    one = {token(TEAM, GROUPS[0])}
    three = {token(TEAM, g) for g in GROUPS[:3]}
    # A member of many teams: its tokens of every team it searches, most of them in no row here.
    twenty = three | {token(f"other-team-{i}", "finance") for i in range(17)}
    user_filter = {"eq": {"key": "region", "value": "emea"}}
    return {
        "groups: in no group": access_filter(set()),
        "groups: in one group": access_filter(one),
        "groups: in three groups": access_filter(three),
        "groups: in twenty groups": access_filter(twenty),
        "groups: one group and eq (user filter)": MetadataFilter.model_validate(restricted(user_filter, one)),
    }


def make_rows(rows_wanted: int, restricted_share: float) -> tuple[list[tuple], list[float]]:
    """The rows (id, metadata, vector) and the query vector. The access groups come from a random generator of their
    own, so the other metadata and the vectors are those of every run before groups were measured."""
    rng, access_rng = random.Random(1), random.Random(2)
    rows = []
    for i in range(rows_wanted):
        metadata = {"region": rng.choice(["emea", "apac", "amer"]), "tier": rng.randint(1, 5),
                    "issued": f"{rng.randint(2020, 2024)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"}
        if access_rng.random() < restricted_share:
            metadata[ACCESS_KEY] = [token(TEAM, access_rng.choice(GROUPS))]
        rows.append((f"d{i}", metadata, [rng.random() for _ in range(DIMENSION)]))
    return rows, [rng.random() for _ in range(DIMENSION)]


def checked_hits(client: MilvusClient, name: str, query: list[float], rule: MetadataFilter, rows: list[tuple]) -> dict:
    """One top-100 search with the filter, each hit checked against it in Python, and the rows Milvus counts with
    the filter against those Python keeps (a filter Milvus read wrongly would drop rows it must keep, or keep rows
    it must not). The hits of restricted documents show the tokens' part of the filter at work. The number of hits
    is not checked: the index is approximate, and with a filter that keeps few rows it may find fewer than 100."""
    hits = client.search(name, data=[query], limit=100, filter=rule.expression(), anns_field="vector",
                         output_fields=["metadata"])[0]
    wrong = [hit["id"] for hit in hits if not rule.matches(hit["entity"]["metadata"])]
    assert not wrong, f"{len(wrong)} hits the filter does not keep, e.g. {wrong[:3]}: {rule.expression()}"
    kept = sum(1 for _, metadata, _ in rows if rule.matches(metadata))
    counted = client.query(name, filter=rule.expression(), output_fields=["count(*)"])[0]["count(*)"]
    assert counted == kept, f"Milvus keeps {counted} rows, the filter {kept}: {rule.expression()}"
    return {"hits": len(hits), "rows_kept": kept,
            "restricted_hits": sum(1 for hit in hits if ACCESS_KEY in hit["entity"]["metadata"])}


def measure_groups(client: MilvusClient, name: str, query: list[float], rows: list[tuple], repeat: int) -> dict:
    """Median milliseconds of a top-100 dense search per access filter, beside no filter, interleaved."""
    cases = groups_cases()
    expressions = {"no filter": "", **{label: rule.expression() for label, rule in cases.items()}}
    checks = {label: checked_hits(client, name, query, rule, rows) for label, rule in cases.items()}
    checks["no filter"] = checked_hits(client, name, query, MetadataFilter.model_validate(TRUE), rows)
    times: dict[str, list[float]] = {label: [] for label in expressions}
    for _ in range(repeat):
        for label, expression in expressions.items():
            started = time.perf_counter()
            client.search(name, data=[query], limit=100, filter=expression, anns_field="vector")
            times[label].append((time.perf_counter() - started) * 1000)
    base = statistics.median(times["no filter"])
    return {label: {"ms": round(statistics.median(values), 1), "ratio": round(statistics.median(values) / base, 1),
                    **checks[label]} for label, values in times.items()}


def measure(rows_wanted: int = 10_000, repeat: int = 15, restricted_share: float = 0.2) -> dict:
    """Median milliseconds of a top-100 dense search per filter, in the JSON field and in dynamic fields; and per
    access filter of document groups in the JSON field (``"groups"``), with its ratio to no filter."""
    # Milvus Lite's warnings about each search would bury the table; the level is put back for whoever runs next
    # in this process (a test suite).
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        return _measure(rows_wanted, repeat, restricted_share)
    finally:
        logging.disable(previous)


def _measure(rows_wanted: int, repeat: int, restricted_share: float) -> dict:
    rows, query = make_rows(rows_wanted, restricted_share)
    with tempfile.TemporaryDirectory() as tmp:
        client = MilvusClient(str(Path(tmp) / "filters.db"))
        build(client, "json_field", rows, dynamic=False)
        build(client, "dynamic_field", rows, dynamic=True)
        settle(client, "json_field", query)
        settle(client, "dynamic_field", query)
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
        results["restricted_share"] = restricted_share
        results["groups"] = measure_groups(client, "json_field", query, rows, repeat)
        client.close()
    return results


def table(results: dict) -> str:
    lines = [f"{label:30} JSON field {figures['json_field']:8.1f} ms   "
             f"dynamic field {figures['dynamic_field']:8.1f} ms"
             for label, figures in results.items() if isinstance(figures, dict) and "json_field" in figures]
    if "groups" in results:
        lines.append(f"\ndocument groups, {results['restricted_share']:.0%} of the rows restricted, JSON field, "
                     "interleaved:")
        lines += [f"{label:40} {figures['ms']:8.1f} ms   x{figures['ratio']:5.1f}   {figures['hits']:3} hits "
                  f"({figures['restricted_hits']:3} restricted) of {figures['rows_kept']} rows kept"
                  for label, figures in results["groups"].items()]
    return "\n".join(lines)


def report(results: dict, command: str, load: tuple[float, float, float]) -> str:
    """The groups figures as the Markdown of ``src/agentsearch/bench/results/filter_cost.md``."""
    rows = "".join(f"| {label} | {f['ms']:.1f} | {f['ratio']:.1f} | {f['hits']} | {f['restricted_hits']} | "
                   f"{f['rows_kept']:,} |\n" for label, f in results["groups"].items())
    return (
        "# The document-groups filter in a Milvus Lite search\n\n"
        f"{time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC, load average at the start "
        f"{load[0]:.2f}, {load[1]:.2f}, {load[2]:.2f}; {results['rows']:,} rows, "
        f"{results['restricted_share']:.0%} restricted to one of {len(GROUPS)} groups; top-100 dense search, median "
        "of the interleaved rounds; every hit checked against the filter (`MetadataFilter.matches`), and the rows "
        "Milvus counts with it against those the filter keeps.\n\n"
        f"Command: `{command}`\n\n"
        "| search | median ms | × no filter | hits | of restricted documents | rows the filter keeps |\n"
        "|---|---:|---:|---:|---:|---:|\n" + rows
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--restricted", type=float, default=0.2, help="Share of the rows restricted to a group.")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    load = os.getloadavg()
    results = measure(args.rows, args.repeat, args.restricted)
    print(table(results))
    command = " ".join([".venv/bin/python -m agentsearch.bench.filter_cost", *sys.argv[1:]])
    RESULTS.write_text(report(results, command, load))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
