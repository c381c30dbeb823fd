"""The side-by-side sessions benchmark: its medians and its report, from recorded rounds."""

from __future__ import annotations

from agentsearch.bench import embedding_sessions


def rounds() -> dict:
    def run(chunks_s: float, sentences_s: float, load: float) -> dict:
        return {"chunks_s": chunks_s, "chunks_cpu_s": chunks_s * 2, "sentences_s": sentences_s,
                "sentences_cpu_s": sentences_s * 2, "load": load}

    return {"docs": 300, "chunks": 607, "sentences": 2834, "rounds": 3, "cores": 2,
            "runs": {"one session, every core": [run(40, 30, 1.0), run(44, 28, 1.2), run(90, 70, 3.0)],
                     "sessions of one thread side by side": [run(30, 20, 1.1), run(32, 21, 1.0), run(31, 19, 2.0)]}}


def test_the_medians_resist_one_slow_round_and_the_report_gives_the_ratio():
    rows = embedding_sessions.medians(rounds())
    assert rows["one session, every core"]["chunks_s"] == 44 and rows["one session, every core"]["sentences_s"] == 30
    assert rows["sessions of one thread side by side"]["sentences_s"] == 20
    text = embedding_sessions.report(rounds(), "cmd")
    assert "| sessions of one thread side by side | 31.0 | 62.0 | 20.0 | 40.0 | 1.10 |" in text
    assert f"**{74 / 51:.2f}×** as fast" in text and "607 chunks" in text
