"""The README's ingestion timed whole (``agentsearch bench ingest --embedded``): what each run is given, and the
figures and table made of the rounds' seconds."""

from __future__ import annotations

import json

from click.testing import CliRunner

from agentsearch.bench import common, ingest, ingest_command


def fake_rounds(baseline: bool = True) -> dict:
    """Three rounds: the plain model 120 s, this tree's command 60 s, the baseline's 180 s (one noisy round each)."""
    sides = {"plain": {"seconds": [120.0, 118.0, 200.0], "cpu_s": [200.0, 210.0, 230.0], "loads": [1.0, 1.1, 4.0]},
             "embedded": {"seconds": [60.0, 62.0, 90.0], "cpu_s": [100.0, 105.0, 99.0], "loads": [1.0, 1.2, 3.0]}}
    sides["embedded-spin"] = {"seconds": [50.0, 70.0, 80.0], "cpu_s": [120.0, 130.0, 125.0], "loads": [1.0, 1.0, 3.0]}
    if baseline:
        sides["embedded-baseline"] = {"seconds": [180.0, 170.0, 300.0], "cpu_s": [250.0, 260.0, 270.0],
                                      "loads": [1.0, 1.3, 4.5]}
    return {"docs": 1000, "chunks": 2019, "rounds": 3, "baseline_tree": "/tmp/before" if baseline else "",
            "sides": sides, "late_chunking": False, "runtime": "onnx-int8"}


def test_the_figures_are_medians_and_ratios_over_the_plain_model():
    figures = ingest_command.figures(fake_rounds())
    assert figures["sides"]["embedded"]["median_s"] == 62.0
    assert figures["embedded_over_plain"] == round(120.0 / 62.0, 3)
    assert figures["embedded-baseline_over_plain"] == round(120.0 / 180.0, 3)
    assert figures["speedup"] == round(180.0 / 62.0, 3)
    assert figures["embedded-spin_over_plain"] == round(120.0 / 70.0, 3)
    # CPU seconds, the load-robust figure: medians and the same ratio over them.
    assert figures["sides"]["embedded"]["median_cpu_s"] == 100.0
    assert figures["embedded_over_plain_cpu"] == round(210.0 / 100.0, 3)
    # Each round's own ratio: both sides ran under that round's load.
    assert figures["embedded_over_plain_rounds"] == [2.0, round(118 / 62, 3), round(200 / 90, 3)]
    alone = ingest_command.figures(fake_rounds(baseline=False))
    assert "speedup" not in alone and "embedded-baseline_over_plain" not in alone
    # A result saved before CPU seconds were kept still gives its wall-time figures.
    old = fake_rounds(baseline=False)
    for row in old["sides"].values():
        del row["cpu_s"]
    older = ingest_command.figures(old)
    assert older["embedded_over_plain"] == round(120.0 / 62.0, 3) and older["embedded_over_plain_cpu"] is None
    assert "| 62.0 | 60.0, 62.0, 90.0 |  |  |" in "\n".join(ingest_command.report_lines(older))


def test_the_table_names_each_side_with_its_ratio():
    text = "\n".join(ingest_command.report_lines(ingest_command.figures(fake_rounds())))
    assert ("| `agentsearch ingest docs.jsonl --collection NAME`, embedded mode, this tree | 62.0 | 60.0, 62.0, 90.0 "
            "| 100.0 | 100.0, 105.0, 99.0 |") in text
    assert "**1.94** | 2.10 |" in text and "before (`/tmp/before`)" in text
    assert "**2.90 times** as fast" in text
    assert "idle threads spinning (`AGENTSEARCH_EMBEDDING_SPIN=true`) | 70.0 |" in text


def test_the_rounds_rotate_the_sides_and_only_the_spinning_side_spins(tmp_path, monkeypatch):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"_id": str(i), "title": f"T{i}", "text": "Body. " * 50}) + "\n"
                              for i in range(3)))
    monkeypatch.setenv("AGENTSEARCH_EMBEDDING_SPIN", "true")  # the caller's shell does not choose the sides' setting
    runs = []

    def fake_timed(argv, env):
        runs.append((argv, env))
        return 10.0 + len(runs), 5.0

    monkeypatch.setattr(ingest_command, "timed", fake_timed)
    result = ingest_command.measure(docs=2, rounds=2, baseline=tmp_path, corpus=corpus, spin=True)
    assert list(result["sides"]) == ["plain", "embedded", "embedded-spin", "embedded-baseline"]
    assert result["docs"] == 2 and all(len(r["seconds"]) == 2 and r["cpu_s"] == [5.0, 5.0]
                                       for r in result["sides"].values())
    # Round 2 starts one side later than round 1.
    assert result["sides"]["plain"]["seconds"] == [11.0, 18.0]
    spinning = [env.get("AGENTSEARCH_EMBEDDING_SPIN") for argv, env in runs if "ingest" in argv]
    assert spinning == [None, "true", None, None, "true", None]
    assert runs[3][1]["PYTHONPATH"] == str(tmp_path.resolve())
    # By default no side spins: the passages' sessions have one thread each, so nothing would.
    assert list(ingest_command.measure(docs=2, rounds=1, corpus=corpus)["sides"]) == ["plain", "embedded"]


def test_each_run_gets_the_readme_lines_a_new_data_dir_and_its_trees_code(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTSEARCH_API_URL", "http://elsewhere:8000")
    lines = ingest_command.readme_lines([{"id": "d1", "title": "T", "text": "Body.", "metadata": {}}])
    assert [json.loads(line) for line in lines.splitlines()] == [{"id": "d1", "title": "T", "text": "Body."}]
    (tmp_path / "src" / "agentsearch").mkdir(parents=True)
    env = ingest_command.command_env(tmp_path, tmp_path / "data")
    # The embedded mode: no API elsewhere, a data directory of its own, the baseline's package first on the path.
    assert "AGENTSEARCH_API_URL" not in env and env["AGENTSEARCH_DATA_DIR"] == str(tmp_path / "data")
    assert env["PYTHONPATH"] == str((tmp_path / "src").resolve())
    assert ingest_command.source_dir(tmp_path / "src") == tmp_path / "src"


def test_a_failed_run_says_what_it_wrote():
    import sys

    import pytest

    with pytest.raises(RuntimeError, match="no such collection"):
        ingest_command.timed([sys.executable, "-c", "import sys; sys.exit('no such collection')"], {})
    assert ingest_command.timed([sys.executable, "-c", "pass"], {})[0] > 0
    # The child's CPU seconds, not the caller's: a program that spins for about 0.3 s of CPU.
    wall, cpu = ingest_command.timed([sys.executable, "-c", "import time\nt = time.process_time()\n"
                                      "while time.process_time() - t < 0.3: pass"], {})
    assert 0.3 <= cpu <= wall + 1.0


def test_bench_ingest_without_the_stacks_reports_the_readme_command(tmp_path, monkeypatch):
    from agentsearch.cli import main

    calls = []

    def fake_measure(docs, rounds, baseline):
        calls.append((docs, rounds, baseline))
        return fake_rounds()

    def no_stacks(*args):
        raise AssertionError("--no-stack measures no stack")

    monkeypatch.setattr(ingest_command, "measure", fake_measure)
    monkeypatch.setattr(ingest, "measure", no_stacks)
    monkeypatch.setattr(common, "REPO", tmp_path)
    out = tmp_path / "ingest.json"
    result = CliRunner().invoke(main, ["bench", "ingest", "--no-stack", "--docs", "1000", "--rounds", "3",
                                       "--baseline", str(tmp_path), "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert calls == [(1000, 3, tmp_path)]
    assert json.loads(out.read_text())["embedded_command"]["speedup"] == round(180 / 62, 3)
    assert "## The README's command in the embedded mode (the README's figure)" in result.output
    assert "Through the distributed stack" not in result.output
    nothing = CliRunner().invoke(main, ["bench", "ingest", "--no-stack", "--no-embedded"])
    assert nothing.exit_code != 0 and "nothing to measure" in nothing.output
