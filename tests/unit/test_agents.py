"""The built-in agents, called directly (no runner, no Redis)."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest
from pydantic import ValidationError

from pipeline.agents.builtin.acronym_resolver import AcronymResolver
from pipeline.agents.base import (
    AgentContext,
    AgentSkipped,
    Document,
    PostSearchInput,
    PreSearchInput,
    ResponseAgentInput,
    Source,
    Stage,
)
from pipeline.agents.builtin.deduplicator import Deduplicator
from pipeline.agents.builtin.email_draft import EmailDraft
from pipeline.agents.builtin.executive_summary import ExecutiveSummary
from pipeline.agents.builtin.language_detector import LanguageDetector

PRE = AgentContext(pipeline_stage=Stage.PRE_SEARCH)
POST = AgentContext(pipeline_stage=Stage.POST_SEARCH)
RESPONSE = AgentContext(pipeline_stage=Stage.RESPONSE)


# --- language_detector ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "language"),
    [
        ("Wie hoch war der Umsatz im vierten Quartal des letzten Jahres?", "de"),
        ("¿Cuáles fueron los ingresos del cuarto trimestre del año pasado?", "es"),
        ("What was the revenue in the fourth quarter of last year?", "en"),
        ("Quel a été le chiffre d'affaires du quatrième trimestre de l'année dernière ?", "fr"),
    ],
)
def test_language_detector_names_the_language_of_a_full_sentence(query, language):
    out = LanguageDetector().run(PreSearchInput(query=query), PRE)
    assert out.metadata["language"] == language
    assert 0.5 <= out.metadata["language_confidence"] <= 1.0
    assert out.query == query  # detection never rewrites the query
    assert not out.skip_search


def test_language_detector_is_deterministic():
    query = "Umsatzentwicklung der Solarsparte im vierten Quartal"
    results = {tuple(LanguageDetector().run(PreSearchInput(query=query), PRE).metadata.items()) for _ in range(5)}
    assert len(results) == 1


def test_language_detector_falls_back_when_the_query_has_no_letters():
    out = LanguageDetector({"fallback_language": "de"}).run(PreSearchInput(query="2025 / 2026 — 42 %"), PRE)
    assert out.metadata == {"language": "de", "language_confidence": 0.0}


def test_language_detector_falls_back_below_min_confidence():
    agent = LanguageDetector({"min_confidence": 1.0, "fallback_language": "nl"})
    # A mixed English/German query cannot be detected with certainty.
    out = agent.run(PreSearchInput(query="revenue Umsatz quarter Quartal"), PRE)
    assert out.metadata["language"] == "nl"
    assert out.metadata["language_confidence"] <= 1.0


@pytest.mark.parametrize("config", [{"min_confidence": 1.5}, {"fallback_language": "e"}, {"language": "de"}])
def test_language_detector_refuses_bad_config(config):
    with pytest.raises(ValidationError):
        LanguageDetector(config)


# --- acronym_resolver -----------------------------------------------------------------------------------------

ACRONYMS = {"PPA": "power purchase agreement", "Q4": "fourth quarter", "EBITDA": "earnings before interest, taxes, depreciation and amortization"}


def test_acronym_resolver_keeps_the_acronym_and_adds_its_expansion():
    out = AcronymResolver({"acronyms": ACRONYMS}).run(PreSearchInput(query="PPA prices and EBITDA in Q4"), PRE)
    assert out.query == (
        "PPA (power purchase agreement) prices and "
        "EBITDA (earnings before interest, taxes, depreciation and amortization) in Q4 (fourth quarter)"
    )
    assert out.metadata["acronyms_resolved"] == ACRONYMS


def test_acronym_resolver_matches_whole_words_and_case_by_default():
    out = AcronymResolver({"acronyms": ACRONYMS}).run(PreSearchInput(query="ppa appendix and PPAs signed in Q45"), PRE)
    assert out.query == "ppa appendix and PPAs signed in Q45"
    assert out.metadata["acronyms_resolved"] == {}


def test_acronym_resolver_can_ignore_case():
    out = AcronymResolver({"acronyms": ACRONYMS, "case_sensitive": False}).run(PreSearchInput(query="ppa terms"), PRE)
    assert out.query == "ppa (power purchase agreement) terms"


def test_acronym_resolver_treats_acronyms_as_literal_text_not_patterns():
    agent = AcronymResolver({"acronyms": {"R.D": "research and development"}})
    assert agent.run(PreSearchInput(query="RXD budget"), PRE).query == "RXD budget"
    assert agent.run(PreSearchInput(query="R.D budget"), PRE).query == "R.D (research and development) budget"


def test_acronym_resolver_skips_when_the_dictionary_is_empty():
    with pytest.raises(AgentSkipped, match="no acronyms"):
        AcronymResolver().run(PreSearchInput(query="PPA prices"), PRE)


@pytest.mark.parametrize("acronyms", [{"PPA": ""}, {"PPA": "   "}, {"": "power purchase agreement"}])
def test_acronym_resolver_refuses_empty_names_or_expansions(acronyms):
    with pytest.raises(ValidationError, match="non-empty"):
        AcronymResolver({"acronyms": acronyms})


def test_acronym_resolver_prefers_the_longest_acronym():
    agent = AcronymResolver({"acronyms": {"EU": "European Union", "EU ETS": "EU Emissions Trading System"}})
    out = agent.run(PreSearchInput(query="EU ETS carbon prices"), PRE)
    assert out.query == "EU ETS (EU Emissions Trading System) carbon prices"


# --- deduplicator ---------------------------------------------------------------------------------------------

PRESS_RELEASE = (
    "Helios Energy reported fourth quarter 2025 revenue of $412 million, an increase of 18 percent compared with "
    "the same quarter of 2024. The growth was driven by new utility-scale solar installations in Texas and Arizona, "
    "which added 1.2 gigawatts of capacity. Chief executive Maria Lopez said the company expects to reach full-year "
    "2026 revenue between $1.7 billion and $1.8 billion."
)
REWORDED = (
    "Helios Energy has reported fourth quarter 2025 revenue of $412 million, an increase of 18 percent compared "
    "with the same quarter a year earlier. The growth was driven by new utility-scale solar installations in Texas "
    "and Arizona, which together added 1.2 gigawatts of capacity. Chief executive Maria Lopez said the company now "
    "expects to reach full-year 2026 revenue between $1.7 billion and $1.8 billion."
)
SAME_TOPIC = (
    "Helios Energy's fourth quarter 2025 results were shaped by falling module prices. Analysts at Northbridge "
    "Capital note that the company's solar revenue depends on utility contracts in Texas, and warn that "
    "interconnection delays could slow new capacity additions in 2026."
)


def docs(*items: tuple[str, str, float]) -> list[Document]:
    return [Document(id=i, title="Helios Energy Q4 2025", text=t, score=s) for i, t, s in items]


def test_deduplicator_drops_a_reworded_copy_and_keeps_a_different_document_on_the_topic():
    documents = docs(("wire", REWORDED, 0.81), ("press", PRESS_RELEASE, 0.86), ("analyst", SAME_TOPIC, 0.74))
    out = Deduplicator().run(PostSearchInput(documents=documents, query="Helios Q4 revenue"), POST)
    assert [d.id for d in out.documents] == ["press", "analyst"]
    assert out.metadata == {"duplicates_removed": 1, "duplicates": [{"document_id": "wire", "duplicate_of": "press"}]}


def test_deduplicator_keeps_the_higher_scored_copy_whatever_the_input_order():
    documents = docs(("press", PRESS_RELEASE, 0.52), ("wire", REWORDED, 0.91))
    out = Deduplicator().run(PostSearchInput(documents=documents, query="Helios Q4 revenue"), POST)
    assert [d.id for d in out.documents] == ["wire"]
    assert out.documents[0].score == 0.91


def test_deduplicator_threshold_decides_what_counts_as_a_duplicate():
    documents = docs(("press", PRESS_RELEASE, 0.86), ("wire", REWORDED, 0.81))
    strict = Deduplicator({"threshold": 0.95}).run(PostSearchInput(documents=documents, query="q"), POST)
    assert [d.id for d in strict.documents] == ["press", "wire"]


def test_deduplicator_leaves_distinct_documents_alone_and_handles_none():
    documents = docs(("press", PRESS_RELEASE, 0.86), ("analyst", SAME_TOPIC, 0.74))
    out = Deduplicator().run(PostSearchInput(documents=documents, query="q"), POST)
    assert out.documents == documents and out.metadata["duplicates_removed"] == 0
    assert Deduplicator().run(PostSearchInput(documents=[], query="q"), POST).documents == []


@pytest.mark.parametrize("config", [{"threshold": 0}, {"threshold": 1.5}, {"shingle_size": 0}])
def test_deduplicator_refuses_bad_config(config):
    with pytest.raises(ValidationError):
        Deduplicator(config)


# --- executive_summary ----------------------------------------------------------------------------------------

LONG_ANSWER = (
    "Q4 2025 revenue reached $412 million, up 18% from the prior year [1]. "
    "Growth came mainly from the solar segment, where new utility-scale installations in Texas and Arizona added "
    "1.2 gigawatts of capacity during the quarter while average selling prices held steady despite the pressure "
    "from imported modules [2]. "
    "Operating margin improved to 14.2% as component costs fell [1]. "
    "Management expects 2026 revenue between $1.7 and $1.8 billion [3]. "
    "The board approved a $150 million share buyback to be executed over the next eighteen months [1]. "
    "Headcount grew to 4,300 employees, mostly in installation crews [2]."
)
SOURCES = [
    Source(document_id="press", title="Fourth quarter 2025 results press release", score=0.86),
    Source(document_id="segment", title="Solar segment operating review for the fourth quarter", score=0.8),
    Source(document_id="outlook", title="Guidance and outlook for fiscal year 2026", score=0.71),
]
QUERY = "How did revenue develop in Q4 2025?"


def summary(answer: str, **config) -> str:
    artifact = ExecutiveSummary(config).run(ResponseAgentInput(answer=answer, sources=SOURCES, query=QUERY), RESPONSE)
    assert artifact.filename.endswith(".txt") and artifact.content_type.startswith("text/plain")
    return artifact.data.decode("utf-8")


def test_executive_summary_lists_key_points_and_sources_when_they_fit():
    text = summary(LONG_ANSWER, max_words=400, max_points=3)
    assert text.startswith(f"Executive summary: {QUERY}\n")
    points = [line for line in text.splitlines() if line.startswith("- ")]
    assert points == [
        "- Q4 2025 revenue reached $412 million, up 18% from the prior year [1].",
        "- Growth came mainly from the solar segment, where new utility-scale installations in Texas and Arizona "
        "added 1.2 gigawatts of capacity during the quarter while average selling prices held steady despite the "
        "pressure from imported modules [2].",
        "- Operating margin improved to 14.2% as component costs fell [1].",
    ]
    for i, source in enumerate(SOURCES, start=1):
        assert f"[{i}] {source.title}" in text
    assert len(text.split()) <= 400


@pytest.mark.parametrize("max_words", [20, 45, 60, 100])
def test_executive_summary_respects_max_words_for_a_long_answer(max_words):
    text = summary(LONG_ANSWER, max_words=max_words, max_points=10)
    assert len(text.split()) <= max_words


def test_executive_summary_within_the_limit_when_no_point_needs_cutting():
    short = "Q4 2025 revenue reached $412 million [1]. Operating margin improved to 14.2% [1]."
    text = summary(short, max_words=40)
    assert len(text.split()) <= 40
    assert "- Operating margin improved to 14.2% [1]." in text


@pytest.mark.parametrize("answer", ["", "   \n"])
def test_executive_summary_skips_an_empty_answer(answer):
    with pytest.raises(AgentSkipped):
        ExecutiveSummary().run(ResponseAgentInput(answer=answer, sources=SOURCES, query=QUERY), RESPONSE)


def test_executive_summary_refuses_a_filename_that_is_not_a_plain_txt_name():
    for filename in ("../summary.txt", "summary.exe", "sub/summary.txt"):
        with pytest.raises(ValidationError):
            ExecutiveSummary({"filename": filename})


# --- email_draft ----------------------------------------------------------------------------------------------

SCRIPT = "<script>alert(1)</script>"


class TagCollector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.starts: list[tuple[str, dict]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.starts.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def parse(html: str) -> TagCollector:
    parser = TagCollector()
    parser.feed(html)
    parser.close()
    return parser


def email(documents: list[Document], answer: str, query: str = "Q4 revenue", **config):
    sources = [Source(document_id=d.id, title=d.title, score=d.score) for d in documents]
    inp = ResponseAgentInput(answer=answer, sources=sources, query=query, documents=documents)
    return EmailDraft(config).run(inp, RESPONSE)


def test_email_draft_escapes_script_in_titles_answer_and_query():
    documents = [Document(id="d1", title=f"Q4 results {SCRIPT}", text="x", score=0.9)]
    artifact = email(documents, answer=f"Revenue grew 18% {SCRIPT} [1].", query=f"revenue {SCRIPT}",
                     greeting=f"Hi {SCRIPT}")
    html = artifact.data.decode("utf-8")
    parsed = parse(html)
    tags = [tag for tag, _ in parsed.starts]
    assert "script" not in tags
    assert "html" in tags and "li" in tags  # the parser did see the document's own markup
    # The text survives, as text.
    assert f"Revenue grew 18% {SCRIPT} [1]." in "".join(parsed.text)
    assert artifact.content_type.startswith("text/html")
    assert artifact.metadata["sources"] == 1


@pytest.mark.parametrize(
    "url",
    [
        "javascript:alert(document.cookie)",
        "JavaScript:alert(1)",
        " javascript:alert(1)",
        "java\tscript:alert(1)",
        "data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==",
        "vbscript:msgbox(1)",
    ],
)
def test_email_draft_does_not_link_unsafe_urls(url):
    documents = [Document(id="d1", title="Q4 results", text="x", score=0.9, metadata={"url": url})]
    parsed = parse(email(documents, answer="Revenue grew [1].").data.decode())
    assert [attrs for tag, attrs in parsed.starts if tag == "a"] == []
    assert "Q4 results" in "".join(parsed.text)


def test_email_draft_links_https_sources_with_the_url_intact():
    url = "https://investors.helios.example/q4-2025?lang=en&format=pdf"
    documents = [
        Document(id="d1", title="Q4 results", text="x", score=0.9, metadata={"url": url}),
        Document(id="d2", title="Analyst note", text="y", score=0.7, metadata={"url": "javascript:alert(1)"}),
        Document(id="d3", title="Memo", text="z", score=0.6),
    ]
    parsed = parse(email(documents, answer="Revenue grew [1].").data.decode())
    links = [attrs["href"] for tag, attrs in parsed.starts if tag == "a"]
    assert links == [url]  # the parser unescapes &amp; back to &


def test_email_draft_names_where_in_its_file_each_source_stands():
    url = "https://investors.helios.example/q4-2025"
    documents = [
        Document(id="d1", title="Q4 report", text="x", score=0.9, metadata={"url": url, "location": {"page": 3}}),
        Document(id="d2", title="Board deck", text="y", score=0.8, metadata={"location": {"slide": 2}}),
        Document(id="d3", title="Memo", text="z", score=0.7, metadata={"location": {"section": "Results <b>"}}),
        Document(id="d4", title="Notes", text="w", score=0.6),
    ]
    parsed = parse(email(documents, answer="Revenue grew [1].").data.decode())
    text = " ".join("".join(parsed.text).split())
    assert "[1] Q4 report, p. 3 (score 0.900)" in text
    assert "[2] Board deck, slide 2 (score 0.800)" in text
    assert "[3] Memo, Results <b> (score 0.700)" in text  # the heading's text, never markup
    assert "[4] Notes (score 0.600)" in text
    assert [tag for tag, _ in parsed.starts if tag == "b"] == []
    assert [attrs["href"] for tag, attrs in parsed.starts if tag == "a"] == [url]  # the title is still the link


def test_email_draft_subject_and_skip():
    documents = [Document(id="d1", title="Q4 results", text="x", score=0.9)]
    artifact = email(documents, answer="Revenue grew [1].", query="Q4 revenue", subject_prefix="Board briefing")
    assert artifact.metadata["subject"] == "Board briefing: Q4 revenue"
    with pytest.raises(AgentSkipped):
        email(documents, answer="  ")
