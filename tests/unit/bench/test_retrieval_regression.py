"""The retrieval regression benchmark's comparison: a slowed or worse search is "regressed", the same one is not."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from agentsearch.bench import retrieval_regression as rr
from agentsearch.cli import main as cli

BASELINE = {"ndcg@10": 0.7400, "recall@100": 0.9600, "p50_ms": 230.0, "p95_ms": 300.0, "queries": 809}


def test_the_same_figures_and_changes_within_the_tolerances_pass():
    assert rr.compare(dict(BASELINE), BASELINE)["verdict"] == "ok"
    within = {"ndcg@10": 0.7351, "recall@100": 0.9551, "p50_ms": 275.0, "p95_ms": 359.0}
    comparison = rr.compare(within, BASELINE)
    assert comparison["verdict"] == "ok"
    assert [r["regressed"] for r in comparison["rows"]] == [False] * 4


@pytest.mark.parametrize(("figure", "value"), [("ndcg@10", 0.7349), ("recall@100", 0.9549), ("p50_ms", 277.0),
                                               ("p95_ms", 361.0)])
def test_each_figure_past_its_tolerance_regresses_alone(figure, value):
    comparison = rr.compare({**BASELINE, figure: value}, BASELINE)
    assert comparison["verdict"] == "regressed"
    assert [r["figure"] for r in comparison["rows"] if r["regressed"]] == [figure]


def test_the_last_rounds_slowdown_and_loss_would_have_been_caught():
    # 652e0c4 -> 8bf6491 as the issue measured them: 259 -> 670 ms p50, 0.7320 -> 0.7260 nDCG@10.
    comparison = rr.compare({"ndcg@10": 0.7260, "p50_ms": 670.0}, {"ndcg@10": 0.7320, "p50_ms": 259.0})
    rows = {r["figure"]: r for r in comparison["rows"]}
    assert rows["ndcg@10"]["regressed"] and rows["p50_ms"]["regressed"]
    assert rows["ndcg@10"]["change"] == pytest.approx(-0.006)
    assert rows["p50_ms"]["change"] == pytest.approx(670 / 259 - 1, abs=1e-4)


def test_better_figures_never_regress_and_a_figure_without_baseline_is_shown_only():
    comparison = rr.compare({"ndcg@10": 0.80, "recall@100": 0.99, "p50_ms": 50.0, "p95_ms": 60.0},
                            {"ndcg@10": 0.74, "p50_ms": 230.0})
    assert comparison["verdict"] == "ok"
    recall = next(r for r in comparison["rows"] if r["figure"] == "recall@100")
    assert recall["baseline"] is None and "change" not in recall


def test_a_slowed_searcher_adds_its_delay_to_every_search():
    calls = []

    class Searcher:
        def search(self, *args, **kwargs):
            calls.append((args, kwargs))
            return "result"

    import time

    slowed = rr.Slowed(Searcher(), 0.05)
    started = time.perf_counter()
    assert slowed.search("c", "q", model="m") == "result"
    assert time.perf_counter() - started >= 0.05
    assert calls == [(("c", "q"), {"model": "m"})]


def test_the_table_marks_the_regressed_rows():
    lines = rr.table(rr.compare({**BASELINE, "p50_ms": 400.0}, BASELINE))
    p50 = next(line for line in lines if line.startswith("| p50_ms"))
    assert "**regressed**" in p50 and "+73.9%" in p50
    assert "| ndcg@10 | 0.7400 | 0.7400 | +0.0000 |" in next(line for line in lines if "ndcg" in line)


def test_the_cli_exits_1_saying_regressed_on_a_slowed_search_and_0_on_the_normal_one(tmp_path, monkeypatch):
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps({"release": "r", "commit": "c", "measured": "d", "figures": BASELINE}))

    def measure(data_dir, limit, delay_ms, progress=None, docs=None):
        # The search's own time, as measured, plus the injected delay: what Slowed adds to every search.
        return {**BASELINE, "p50_ms": BASELINE["p50_ms"] + delay_ms, "p95_ms": BASELINE["p95_ms"] + delay_ms}

    monkeypatch.setattr(rr, "measure", measure)
    runner = CliRunner()
    normal = runner.invoke(cli, ["bench", "retrieval", "--baseline", str(baseline)])
    assert normal.exit_code == 0, normal.output
    assert "retrieval: ok" in normal.output
    slowed = runner.invoke(cli, ["bench", "retrieval", "--baseline", str(baseline), "--delay-ms", "100"])
    assert slowed.exit_code == 1
    assert "retrieval: regressed" in slowed.output and "**regressed**" in slowed.output


def test_a_run_of_fewer_claims_compares_latency_only(tmp_path, monkeypatch):
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps({"release": "r", "commit": "c", "measured": "d", "figures": BASELINE}))
    monkeypatch.setattr(rr, "measure", lambda *a, **k: {**BASELINE, "ndcg@10": 0.5, "queries": 20})
    result = rr.run(baseline_path=baseline)
    assert result["comparison"]["verdict"] == "ok"
    assert {r["figure"]: r["baseline"] for r in result["comparison"]["rows"]}["ndcg@10"] is None


def test_an_unreadable_baseline_is_refused_by_name(tmp_path):
    broken = tmp_path / "b.json"
    broken.write_text("{")
    with pytest.raises(ValueError, match=r"b\.json"):
        rr.load_baseline(broken)
    result = CliRunner().invoke(cli, ["bench", "retrieval", "--baseline", str(broken)])
    assert result.exit_code != 0 and "b.json" in result.output


def test_a_baseline_of_another_corpus_size_is_refused_and_its_own_size_is_used(tmp_path, monkeypatch):
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps({"release": "r", "commit": "c", "measured": "d",
                                    "figures": {**BASELINE, "docs": 400}}))
    with pytest.raises(ValueError, match="400 abstracts"):
        rr.run(baseline_path=baseline, docs=1000)
    asked = []
    monkeypatch.setattr(rr, "measure", lambda *a, docs=None, **k: asked.append(docs) or {**BASELINE, "docs": docs})
    assert rr.run(baseline_path=baseline)["comparison"]["verdict"] == "ok"
    assert asked == [400]
