"""The email draft, called directly (no runner, no Redis)."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest

from agentsearch.pipeline.agents.base import AgentContext, AgentSkipped, Document, ResponseAgentInput, Source, Stage
from agentsearch.pipeline.agents.builtin.email_draft import EmailDraft

RESPONSE = AgentContext(pipeline_stage=Stage.RESPONSE)


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

