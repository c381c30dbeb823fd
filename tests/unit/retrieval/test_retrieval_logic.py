"""Pure parts of retrieval: fusion, adaptive choice, recency, stemming, document readers."""

from __future__ import annotations

from datetime import date

import pytest
from pydantic import ValidationError
from reportlab.lib.pagesizes import A4
from reportlab.pdfgen import canvas

from agentsearch.pipeline.ingestion.documents_in import IngestError
from agentsearch.pipeline.ingestion.files import read_documents
from agentsearch.pipeline.retrieval.analyzer import KeywordAnalyzer
from agentsearch.pipeline.retrieval.config import SearchConfig
from agentsearch.pipeline.retrieval.fusion import normalise, rrf_fuse, weighted_fuse
from agentsearch.pipeline.retrieval.retriever import _recency, choose_strategy


def test_rrf_rewards_documents_both_lists_rank_high():
    dense = {"a": 0.9, "b": 0.8, "c": 0.1}
    keyword = {"b": 12.0, "c": 11.0, "d": 3.0}
    fused = rrf_fuse([dense, keyword], k=60)
    assert max(fused, key=fused.get) == "b"
    assert fused["b"] == pytest.approx(1 / 62 + 1 / 61)
    # A keyword weight of zero leaves the dense order.
    only_dense = rrf_fuse([dense, keyword], weights=[1.0, 0.0])
    assert sorted(only_dense, key=only_dense.get, reverse=True)[:3] == ["a", "b", "c"]


def test_weighted_fusion_normalises_each_list_so_scales_do_not_matter():
    dense = {"a": 0.80, "b": 0.70}
    keyword = {"a": 1.0, "b": 40.0}  # BM25's scale would swamp cosine without normalisation
    fused = weighted_fuse([dense, keyword], [1.0, 1.0])
    assert fused == {"a": 0.5, "b": 0.5}
    fused = weighted_fuse([dense, keyword], [2.0, 1.0])
    assert fused["a"] > fused["b"]
    assert normalise({"x": 3.0, "y": 3.0}) == {"x": 1.0, "y": 1.0}


def test_adaptive_leans_on_keywords_for_codes_and_on_meaning_for_long_questions():
    assert choose_strategy("ISO-27001 SOC2")[2] > choose_strategy("ISO-27001 SOC2")[1]
    long = "how do maintenance crews decide when wind turbine gearboxes need inspection after storms"
    _, semantic, keyword = choose_strategy(long)
    assert semantic > keyword


def test_recency_halves_every_half_life():
    today = date(2026, 1, 1)
    assert _recency({"published": "2026-01-01"}, 365, today) == 1.0
    assert _recency({"published": "2025-01-01"}, 365, today) == pytest.approx(0.5)
    assert _recency({"published": "not a date"}, 365, today) == 0.0
    assert _recency({}, 365, today) == 0.0


def test_search_config_refuses_impossible_settings():
    with pytest.raises(ValidationError, match="cannot both be 0"):
        SearchConfig(strategy="hybrid", semantic_weight=0, keyword_weight=0)
    with pytest.raises(ValidationError, match="must not exceed 1"):
        SearchConfig(recency_weight=0.7, authority_weight=0.5)
    with pytest.raises(ValidationError):
        SearchConfig(strategy="fuzzy")


def test_stemming_makes_word_forms_meet():
    analyzer = KeywordAnalyzer()
    assert analyzer.analyze("Turbines needed maintaining") == analyzer.analyze("turbine needs maintained")
    assert "the" not in analyzer.terms("the turbine")
    with pytest.raises(ValueError, match="no stemmer"):
        KeywordAnalyzer("klingon")


def test_markdown_text_and_pdf_files_become_documents(tmp_path):
    md = tmp_path / "handbook.md"
    md.write_text("# Travel policy\n\nBook **economy** flights via [the portal](https://x.example).\n"
                  "- Trains: second class\n")
    (doc,) = read_documents(md)
    assert doc.title == "Travel policy" and doc.id == "handbook"
    assert "Book economy flights via the portal." in doc.text and "**" not in doc.text and "](" not in doc.text

    pdf = tmp_path / "report.pdf"
    c = canvas.Canvas(str(pdf), pagesize=A4)
    c.drawString(72, 750, "Q4 2025 revenue reached 412 million dollars.")
    c.showPage()
    c.drawString(72, 750, "Wind output rose in the second half.")
    c.save()
    (doc,) = read_documents(pdf)
    assert "412 million" in doc.text and "Wind output" in doc.text and doc.metadata["pages"] == 2

    (tmp_path / "empty.txt").write_text("   ")
    with pytest.raises(IngestError, match=r"^empty\.txt: "):
        read_documents(tmp_path / "empty.txt")
    (tmp_path / "tool.exe").write_bytes(b"MZ\x90\x00\x03\x00\x00\x00")
    with pytest.raises(IngestError, match=r"^tool\.exe: not a format agentsearch reads"):
        read_documents(tmp_path / "tool.exe")
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.4 not really")
    with pytest.raises(IngestError, match=r"broken\.pdf"):
        read_documents(tmp_path / "broken.pdf")
