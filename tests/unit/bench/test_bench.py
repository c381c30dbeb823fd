"""The benchmarks' pure parts: hop arithmetic, the `bench hop` JSON, the bench agents, the report's goals, the
chunks `bench ingest` gives the plain model and its figures."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from agentsearch.bench import common, hop, ingest, scifact, suite
from agentsearch.bench.agents import NOOP_AGENTS, noop_agent_ids
from agentsearch.pipeline.agents.base import AgentContext, PreSearchInput, Stage
from agentsearch.pipeline.agents.registry import AgentRegistry


def test_a_hop_is_the_difference_of_medians_per_added_step():
    figures = hop.hop_figures(
        4,
        pipeline_with=[150.0, 140.0, 900.0], pipeline_without=[100.0, 102.0, 98.0],
        raw_with=[60.0, 59.0, 61.0], raw_without=[20.0, 21.0, 19.0],
    )
    assert figures == {"pipeline_hop_ms": 12.5, "raw_celery_hop_ms": 10.0, "ratio": 1.25}  # the outlier 900 is ignored
    with pytest.raises(ValueError):
        hop.hop_figures(0, [1.0], [1.0], [1.0], [1.0])


def test_bench_hop_writes_the_three_figures(tmp_path, monkeypatch):
    from agentsearch.cli import main

    calls = []

    def fake_run(agents, jobs, attach):
        calls.append((agents, jobs, attach))
        return {"pipeline_hop_ms": 6.0, "raw_celery_hop_ms": 5.0, "ratio": 1.2, "agents": agents, "jobs": jobs,
                "wall_ms": {}}

    monkeypatch.setattr(hop, "run_standalone", fake_run)
    out = tmp_path / "hop.json"
    result = CliRunner().invoke(main, ["bench", "hop", "--agents", "7", "--jobs", "3", "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert calls == [(7, 3, False)]
    assert json.loads(out.read_text()) == {"pipeline_hop_ms": 6.0, "raw_celery_hop_ms": 5.0, "ratio": 1.2}


def test_bench_default_job_writes_p50_and_p95_with_and_without_artifacts(tmp_path, monkeypatch):
    from agentsearch.cli import main

    calls = []

    def fake_run(docs, queries, attach):
        calls.append((docs, queries, attach))
        return {"docs": docs, "queries": queries, "ingest_through_stack": {},
                "job_ms": {"with_artifacts": {"p50": 240.0, "p95": 310.04, "min": 200.0, "max": 400.0, "n": 3},
                           "without_artifacts": {"p50": 180.0, "p95": 260.0, "min": 150.0, "max": 300.0, "n": 3}},
                "stage_p50_ms": {"without_artifacts": {"answer": 20.0}}, "agent_statuses": {"reranker:ok": 6}}

    monkeypatch.setattr(scifact, "run_standalone", fake_run)
    out = tmp_path / "job.json"
    result = CliRunner().invoke(main, ["bench", "default-job", "--queries", "3", "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert calls == [(1000, 3, False)]
    figures = json.loads(out.read_text())
    assert {k: figures[k] for k in ("p50_ms_without_artifacts", "p50_ms_with_artifacts", "p95_ms_without_artifacts",
                                    "p95_ms_with_artifacts")} == {
        "p50_ms_without_artifacts": 180.0, "p50_ms_with_artifacts": 240.0, "p95_ms_without_artifacts": 260.0,
        "p95_ms_with_artifacts": 310.0}
    assert figures["queries"] == 3 and figures["stage_p50_ms"] == {"without_artifacts": {"answer": 20.0}}
    assert json.loads(result.output) == figures


def test_the_bench_agents_register_and_stand_still():
    registry = AgentRegistry.discover(["agentsearch.bench.agents"])
    ids = noop_agent_ids(NOOP_AGENTS)
    assert all(agent_id in registry for agent_id in [*ids, "bench_skip_search", "bench_sleep_pre", "bench_sleep_post"])
    ctx = AgentContext(pipeline_stage=Stage.PRE_SEARCH)
    out = registry.build(ids[-1]).run(PreSearchInput(query="solar"), ctx)
    assert (out.query, out.skip_search) == ("solar", False)
    assert registry.build("bench_skip_search").run(PreSearchInput(query="solar"), ctx).skip_search
    with pytest.raises(ValueError):
        noop_agent_ids(NOOP_AGENTS + 1)


def fake_result(hop_ratio: float, hit_p50: float, throughput_ratio: float) -> dict:
    load = [1.0, 1.5, 2.0]
    spread = {"p50": 10.0, "p95": 12.0, "min": 9.0, "max": 13.0, "n": 3}
    return {
        "started": "2026-01-01T10:00:00+00:00", "finished": "2026-01-01T10:15:00+00:00",
        "machine": {"nproc": "2", "memory": "4.0 GiB", "CPU model": "cpu", "Python": "3.11.7", "OS": "Linux"},
        "load_at_start": load, "loads": dict.fromkeys(("ingest", "hop", "cache_hit", "scifact", "throughput"), load),
        "hop": {"pipeline_hop_ms": 5 * hop_ratio, "raw_celery_hop_ms": 5.0, "ratio": hop_ratio, "agents": 20,
                "jobs": 30, "wall_ms": dict.fromkeys(hop.KINDS, spread)},
        "cache_hit": {"requests": 300, "cache_hit_ms": {"p50": hit_p50, "p95": 9.0},
                      "collection_read_ms": {"p50": 3.0, "p95": 5.0}, "ratio_p50": hit_p50 / 3},
        "scifact": {"docs": 1000, "queries": 20, "job_ms": {"with_artifacts": spread, "without_artifacts": spread},
                    "agent_statuses": {"reranker:ok": 40},
                    "ingest_through_stack": {"documents": 1000, "chunks": 2000, "seconds": 100.0, "chunks_per_s": 20.0},
                    "worker_memory": [{"pid": 1, "vm_hwm_mib": 900.0, "vm_rss_mib": 850.0}]},
        "throughput": {"sleep_s_per_agent": 1.0, "ratio": throughput_ratio, **{
            kind: {"ratio": throughput_ratio,
                   "one_process": {"jobs": 12, "seconds": 24.0, "jobs_per_s": 0.5, "job_ms": spread},
                   "two_processes": {"jobs": 12, "seconds": 12.0, "jobs_per_s": 1.0, "job_ms": spread}}
            for kind in ("waiting", "with_search")}},
        "ingest": ingest.public(fake_ingest(baseline=False)),
    }


def fake_ingest(baseline: bool = True) -> dict:
    """What ``agentsearch.bench.ingest.measure`` gives for 600 chunks: the plain model 60 s a round, one process 30 s,
    two 15 s (every core each: 20 s), the baseline with two 120 s."""
    sides = [("plain", 0, None, None, [60.0, 50.0, 70.0]), ("this", 1, 0, "share", [30.0, 31.0, 29.0]),
             ("this", 2, 1, "share", [15.0, 14.0, 16.0]), ("this", 2, 0, "0", [20.0, 20.0, 20.0])]
    if baseline:
        sides.append(("baseline", 2, None, None, [120.0, 100.0, 140.0]))
    return {"docs": 300, "chunks": 600, "chunk_chars": 1000, "overlap_chars": 200, "rounds": 3, "cores": 2,
            "runtime": "onnx-int8", "baseline_tree": "/tmp/before" if baseline else None,
            "load_at_start": [1.0, 1.5, 2.0], "load_at_end": [2.0, 1.5, 1.0], "setup_s": 90.0,
            "plain_model": {"model": "all-MiniLM-L6-v2", "batch_size": 32, "torch_threads": 2},
            "sides": [{"key": f"{tree}:{w}:{t}", "tree": tree, "workers": w, "threads": t, "setting": setting,
                       "seconds": seconds, "loads": [1.0] * 3, "chunks_counted": 600 if tree == "this" else None}
                      for tree, w, t, setting, seconds in sides]}


def test_the_report_says_which_goals_were_missed_and_by_how_much():
    text = suite.render(fake_result(hop_ratio=1.5, hit_p50=4.0, throughput_ratio=1.62), "cmd")
    assert "**missed** by 20% (1.50, goal ≤ 1.25)" in text
    assert "met (4.00 ≤ 5)" in text
    assert "**missed** by 10% (1.62, goal ≥ 1.8)" in text
    assert "Command: `cmd`" in text and "| load average at start (1, 5, 15 min) | 1.00, 1.50, 2.00 |" in text


def test_the_report_replaces_only_its_own_block(tmp_path):
    out = tmp_path / "BENCHMARKS.md"
    suite.write_report(suite.BEGIN + "\nold\n" + suite.END, out)
    out.write_text("# Benchmarks\n\nintro\n\n" + out.read_text().split("\n\n", 1)[1] + "\n\n## Notes\n\nkept\n")
    suite.write_report(suite.BEGIN + "\nnew\n" + suite.END, out)
    text = out.read_text()
    assert "intro" in text and "## Notes\n\nkept" in text and "new" in text and "old" not in text


def test_the_hop_profile_nests_frames_under_the_anchor_with_their_shares(tmp_path):
    from agentsearch.bench import profile_hop

    raw = tmp_path / "stacks.txt"
    tasks, job = "src/agentsearch/worker/job_tasks.py", "src/agentsearch/pipeline/job"
    raw.write_text(
        f"main (w.py:1);run_step ({tasks}:9);JobStore.progress ({job}/job_store.py:3) 6\n"
        f"main (w.py:1);run_step ({tasks}:9);StepLedger.put ({job}/ledger.py:5) 3\n"
        f"main (w.py:1);run_step ({tasks}:12);JobStore.progress ({job}/job_store.py:4) 1\n"
        "main (w.py:1);idle (w.py:2) 90\n")
    assert profile_hop.tree(raw, "run_step", depth=1, min_share=5) == [
        f" 70.0%  JobStore.progress ({job}/job_store.py)", f" 30.0%  StepLedger.put ({job}/ledger.py)"]
    assert profile_hop.breakdown(raw, "run_step")[0] == (60.0, f"JobStore.progress ({job}/job_store.py:3)")


def test_the_hop_profile_splits_an_agent_step_into_its_parts_and_celerys_own(tmp_path):
    from agentsearch.bench import profile_hop

    task = "fast_trace_task (celery/app/trace.py:1);trace_task (celery/app/trace.py:2)"
    job = "src/agentsearch/pipeline/job"
    step = (f"{task};__protected_call__ (celery/app/trace.py:3);pre_search_agent (agentsearch/worker/job_tasks.py:4);"
            "run_step (w:5)")
    raw = tmp_path / "stacks.txt"
    raw.write_text(f"{step};JobStore.progress ({job}/job_store.py:6) 50\n"
                   f"{step};x ({job}/agent_call.py:7);AgentRunner.run (r:8);call_with_deadline (d:9) 25\n"
                   f"{task};Backend.store_result (celery/backends/base.py:10) 40\n")
    parts = dict(profile_hop.costs(raw, jobs=1, agents=1, rate=100))  # 2 agent steps, 5 tasks
    assert parts["progress report (PostgreSQL)"] == 250.0 and parts["agent deadline thread (start, wait)"] == 125.0
    assert parts[profile_hop.CELERY] == 80.0 and parts["step ledger (Redis)"] == 0.0


def test_the_plain_model_embeds_exactly_the_chunks_the_stack_embeds():
    from agentsearch.pipeline.ingestion.chunking import ChunkingConfig
    from agentsearch.pipeline.ingestion.indexing import index_documents
    from agentsearch.pipeline.retrieval.analyzer import KeywordAnalyzer

    long = " ".join(f"Sentence number {i} says something about solar panels and their output." for i in range(30))
    documents = [{"id": "a", "title": "Solar output", "text": long},
                 {"id": "b", "title": "", "text": "No title here. Just two sentences."},
                 {"id": "c", "title": "Wind", "text": "Turbines turn. They make power."}]
    chunking = ChunkingConfig(max_chars=300, overlap_chars=80, sentence_vectors=False)
    embedded: list[str] = []

    def embed(texts):
        embedded.extend(texts)
        return [[1.0, 0.0] for _ in texts]

    chunks = index_documents([(d["id"], d["title"], d["text"], {}) for d in documents], embed, KeywordAnalyzer(),
                             chunking)
    texts = ingest.chunk_texts(documents, chunking)
    assert texts == embedded and len(texts) == len(chunks) > len(documents)
    assert texts[0].startswith("Solar output. Sentence number 0") and "No title here. Just two sentences." in texts


def test_bench_ingest_sides_resolve_threads_and_are_measured_once():
    keys = [s.key for s in ingest.sides_of((1, 2), ("share", "0"), baseline=True, available=2)]
    # One process with its share of two cores is every core: "share" and "0" are one stack.
    assert keys == ["plain", "this:1:0", "this:2:1", "this:2:0", "baseline:1", "baseline:2"]
    assert ingest.parse_counts("2, 1,2") == (2, 1) and ingest.parse_threads("share,1") == ("share", "1")
    for bad in ("0", "", "a"):
        with pytest.raises(ValueError):
            ingest.parse_counts(bad)
    with pytest.raises(ValueError):
        ingest.parse_threads("many")


def test_bench_ingest_figures_compare_medians_in_one_run():
    figures = ingest.public(fake_ingest())
    # Headline: two processes at the first thread setting (share: 1 thread each), 600 / 15 s over 600 / 60 s.
    assert {k: figures[k] for k in ("workers", "threads", "stack_chunks_per_s", "plain_model_chunks_per_s", "ratio")} \
        == {"workers": 2, "threads": 1, "stack_chunks_per_s": 40.0, "plain_model_chunks_per_s": 10.0, "ratio": 4.0}
    assert figures["scaling"] == {"workers": [1, 2], "chunks_per_s": [20.0, 40.0], "ratio": 2.0}
    assert figures["before_after"] == [{"workers": 2, "threads": 1, "seconds_before": 120.0, "seconds_after": 15.0,
                                        "speedup": 8.0}]
    every_core = next(s for s in figures["sides"] if s["key"] == "this:2:0")
    assert every_core["chunks_per_s"] == 30.0 and every_core["rounds_seconds"] == [20.0] * 3
    assert json.loads(json.dumps(figures)) == figures
    text = "\n".join(ingest.report_lines(figures))
    assert "÷ the plain model: **4.00**, goal ≥ 1.5: met." in text and "2 ingest processes ÷ 1: **2.00**." in text
    assert "before / after: 120 s / 15 s, **8.00 times** as fast" in text
    # Before and after alone (the suite's second step): no plain model, no headline ratio.
    alone = fake_ingest()
    alone["sides"] = [s for s in alone["sides"] if s["key"] in ("this:2:1", "baseline:2:None")]
    del alone["plain_model"]
    figures = ingest.public(alone)
    assert figures["ratio"] is None and figures["before_after"][0]["speedup"] == 8.0
    assert "goal" not in "\n".join(ingest.report_lines(figures))


def test_bench_ingest_writes_the_json_and_the_table(tmp_path, monkeypatch):
    from agentsearch.cli import main

    calls = []

    def fake_measure(docs, workers, rounds, threads, baseline, plain):
        calls.append((docs, workers, rounds, threads, baseline, plain))
        return fake_ingest()

    monkeypatch.setattr(ingest, "measure", fake_measure)
    monkeypatch.setattr(common, "REPO", tmp_path)  # src/agentsearch/bench/results/ingest.md goes there
    out = tmp_path / "ingest.json"
    result = CliRunner().invoke(main, ["bench", "ingest", "--docs", "50", "--workers", "1,2", "--rounds", "1",
                                       "--threads", "share,0", "--baseline", str(tmp_path), "--no-embedded",
                                       "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert calls == [(50, (1, 2), 1, ("share", "0"), tmp_path, True)]
    figures = json.loads(out.read_text())
    assert {"stack_chunks_per_s", "plain_model_chunks_per_s", "ratio", "workers", "scaling", "before_after"} <= set(
        figures)
    assert "| stack, before (`/tmp/before`) | 2 | its own |" in result.output
    assert (tmp_path / "src" / "agentsearch" / "bench" / "results" / "ingest.md").read_text() in result.output + "\n"
    refused = CliRunner().invoke(main, ["bench", "ingest", "--workers", "0"])
    assert refused.exit_code == 2 and "at least 1" in refused.output


def test_the_suite_reports_ingestion_with_its_goal_and_before_and_after():
    result = fake_result(hop_ratio=1.0, hit_p50=4.0, throughput_ratio=2.0)
    result["ingest_before_after"] = ingest.public(fake_ingest())
    result["loads"]["ingest_before_after"] = [1.0, 1.0, 1.0]
    text = suite.render(result, "cmd")
    assert "## 5. Ingestion through the stack beside the plain model" in text
    assert "| 5. ingestion through the stack ÷ the plain model | ≥ 1.5 | met (4.00 ≥ 1.5) |" in text
    assert "Before and after: the first 300 abstracts" in text and "**8.00 times** as fast" in text


def test_the_groups_filters_keep_what_a_searcher_finds_and_every_hit_passes_them():
    from agentsearch.bench import filter_cost

    rows, _ = filter_cost.make_rows(400, 0.2)
    restricted = [m for _, m, _ in rows if filter_cost.ACCESS_KEY in m]
    assert 40 < len(restricted) < 120  # about a fifth, each to one group of the team
    assert all(len(m[filter_cost.ACCESS_KEY]) == 1 for m in restricted)
    plain, _ = filter_cost.make_rows(400, 0.0)
    # The groups come from their own generator: the other metadata and the vectors stay those of earlier runs.
    assert [(i, {k: v for k, v in m.items() if k != filter_cost.ACCESS_KEY}, v) for i, m, v in rows] == plain
    cases = filter_cost.groups_cases()
    finance = {"_access_groups": [f"{filter_cost.TEAM}:finance"]}
    assert [rule.matches(finance) for rule in cases.values()] == [False, True, True, True, False]
    assert cases["groups: one group and eq (user filter)"].matches({**finance, "region": "emea"})
    assert all(rule.matches({"region": "emea"}) for rule in cases.values())

    results = filter_cost.measure(300, repeat=1)  # asserts every hit and Milvus's count against the filters
    groups = results["groups"]
    assert list(groups) == ["no filter", *cases] and groups["no filter"]["ratio"] == 1.0
    assert groups["groups: in no group"]["restricted_hits"] == 0
    assert groups["groups: in three groups"]["rows_kept"] > groups["groups: in one group"]["rows_kept"]
    assert results["no filter"]["json_field"] > 0 and "| groups: in no group |" in filter_cost.report(
        results, "cmd", (1.0, 2.0, 3.0))


def test_the_team_cache_bench_expects_one_miss_per_set_of_groups_and_reports_both_rounds():
    from datetime import UTC, datetime

    from agentsearch.bench import team_cache

    groups = team_cache.viewer_groups(10)
    assert groups == ["finance"] * 4 + ["hr"] * 3 + [None] * 3
    assert team_cache.expected_hit_rate([None] * 10) == pytest.approx(0.9)
    assert team_cache.expected_hit_rate(groups) == pytest.approx(0.7)
    documents = [{"id": "nw-2025-q4", "text": "revenue"}, {"id": "nw-hr-flexible-work", "text": "leave"},
                 {"id": "solar", "text": "panels"}]
    assert [d.get("access") for d in team_cache.restricted_documents(documents)] == [
        {"groups": ["finance"]}, {"groups": ["hr"]}, None]

    def asks(cached: list[bool]) -> list[dict]:
        return [{"viewer": f"v{i}", "question": "q", "cached": c, "ms": 10.0 if c else 900.0, "floor_ms": 4.0}
                for i, c in enumerate(cached)]

    first, second = team_cache.round_figures(asks([False] + [True] * 9)), team_cache.round_figures(
        asks([False, True, True, True, False, True, True, False, True, True]))
    assert (first["hits"], first["hit_rate"], first["hit_ms"]["p50"], first["miss_ms"]["p50"]) == (9, 0.9, 10.0, 900.0)
    assert second["hit_rate"] == pytest.approx(0.7) and second["floor_ms"]["p50"] == 4.0
    load = (1.0, 2.0, 3.0)
    result = {"viewers": 10, "questions": 1, "agents": team_cache.AGENTS,
              "no_groups": {**first, "expected_hit_rate": 0.9, "load": load},
              "groups": {**second, "expected_hit_rate": 0.7, "load": load,
                         "viewers_per_group": {"finance": 4, "hr": 3, "none": 3}, "restricted": team_cache.RESTRICTED,
                         "asks_citing_restricted": {"finance": 2, "hr": 1, "none": 0}}}
    text = team_cache.report(result, "cmd", datetime(2026, 1, 1, tzinfo=UTC), {"nproc": "2", "Python": "3.11"})
    assert "| (a) no groups | 10 | 9 | **90%** | 90% | 10.0 | 10.0 | 900.0 | 900.0 | 4.0 | 2.50 | 1.00 |" in text
    assert "| (b) groups | 10 | 7 | **70%** | 70% |" in text and "4 finance, 3 hr, 3 none" in text
    assert "8 documents restricted to finance and 1 document restricted to hr" in text and "Command: `cmd`" in text
    assert "per group of the asker: finance 2, hr 1, none 0." in text


def test_bench_embedded_sides_name_the_wake_or_kombus_sleep_and_refuse_what_is_not_a_positive_interval():
    from agentsearch.bench import embedded_job
    from agentsearch.cli import main

    assert embedded_job.parse_polls(None) == ["timer:1", "1"]  # kombu's old sleep beside the default wake
    assert embedded_job.parse_polls("timer:0.010, 0.5,1.0") == ["timer:0.01", "0.5", "1"]
    assert [embedded_job.side_poll_s(side) for side in ("timer:0.01", "0.5")] == [0.01, 0.5]
    for bad in ("timer:", "timer:x", "0", "-1", "sleep:1"):
        with pytest.raises(ValueError, match="--polls"):
            embedded_job.parse_polls(bad)
    result = CliRunner().invoke(main, ["bench", "embedded", "--polls", "timer:zero"])
    assert result.exit_code != 0 and "--polls" in result.output
