"""Web pages, Markdown, plain text and e-mail are read into parts by heading path, through the parsing child process
(``agentsearch.pipeline.parsing.read_file``) as the worker reads them, and told apart by their bytes (``sniff``)."""

from __future__ import annotations

from email.message import EmailMessage
from pathlib import Path

import pytest

from agentsearch.pipeline.parsing import ParseLimits, ParseRefused, read_file, sniff
from tests.support.zips import word_file

DOCS_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>Configuring replicas — Searchly 4.2 documentation</title>
<meta property="og:title" content="Configuring replicas">
<style>body { font-family: sans-serif; }</style>
<script>window.dataLayer = window.dataLayer || []; dataLayer.push({page: "replicas"});</script>
</head><body>
<a class="skip-link" href="#content">Skip to main content</a>
<div id="cookie-consent" class="cookie-banner"><p>We use cookies to measure traffic.</p>
  <button>Accept all</button></div>
<header class="site-header"><a href="/">Searchly Docs</a>
  <nav aria-label="Main"><ul><li><a href="/guide">User guide</a></li>
    <li><a href="/api">API reference</a></li></ul></nav>
</header>
<div class="layout">
<aside class="sidebar"><h3>On this page</h3><ul><li><a href="#how">How replicas work</a></li></ul></aside>
<main id="content">
<nav class="breadcrumb"><a href="/">Home</a> › Replicas</nav>
<h1>Configuring replicas</h1>
<p>A replica is a full copy of a shard that serves reads and takes over when the primary fails.</p>
<h2 id="how">How replicas work</h2>
<p>Writes go to the primary shard first, which forwards each operation to its replicas.</p>
<h3>Failover</h3>
<p>When a node leaves the cluster, an in-sync replica of each lost primary is promoted within seconds.</p>
<h2>Setting the count</h2>
<pre><code>PUT /orders/_settings
  {"index": {"number_of_replicas": 2}}</code></pre>
<ul><li>Zero replicas speeds up a bulk load.</li><li>Each replica costs as much disk as its primary.</li></ul>
</main></div>
<footer class="site-footer"><p>© 2024 Searchly Inc. All rights reserved.</p>
  <a href="/terms">Terms of service</a></footer>
<script src="/static/analytics.js"></script>
</body></html>
"""

NEWS_PAGE = """<!doctype html>
<html><head><meta http-equiv="Content-Type" content="text/html; charset=windows-1252">
<title>Harbour bridge reopens | The Coastal Gazette</title></head>
<body>
<div class="site-header"><div class="masthead"><a href="/">The Coastal Gazette</a></div>
  <div class="menu"><a href="/news">News</a> | <a href="/sport">Sport</a> | <a href="/business">Business</a></div></div>
<div class="main-column"><div class="article">
  <h1 class="headline">Harbour bridge reopens after two-year repair</h1>
  <div class="share-buttons"><a href="#">Share on Facebook</a> <a href="#">Email this story</a></div>
  <p>The Harbour Bridge reopened on Thursday. The work cost €212 million, 30 per cent over the estimate.</p>
  <div class="ad-slot">Advertisement: Win a cruise for two</div>
  <h2>Commuters relieved</h2>
  <p>“It is like getting an hour of my life back every day,” said a nurse who crosses it daily.</p>
  <div class="related-stories"><h3>Related stories</h3><ul><li><a href="/a1">Council approves cycle lanes</a></li>
    <li><a href="/a2">Ferry operator posts record numbers</a></li></ul></div>
</div></div>
<div class="right-rail"><h3>Most read</h3><ol><li><a href="/m1">Storm warning</a></li><li><a href="/m2">Bakery
  wins award</a></li></ol></div>
<div class="site-footer">Registered in England No. 123456</div>
</body></html>
"""

TABLE_PAGE = """<!DOCTYPE html><html><head><title>Quarterly results 2023</title></head><body>
<main><h1>Quarterly results 2023</h1><p>Revenue grew in every quarter.</p>
<h2>Revenue by quarter</h2>
<table><thead><tr><th>Quarter</th><th>Revenue</th><th>Margin</th></tr></thead>
<tbody><tr><td>Q1</td><td>412.5</td><td>11.2%</td></tr><tr><td>Q2</td><td>438.0</td><td>12.0%</td></tr></tbody></table>
</main></body></html>
"""

MARKDOWN = """---
title: Front matter is left out
tags: [deploy]
---
Read this before anything else.

# Deployment guide

Deploy with the [command line](https://example.com/cli) ![a diagram of the cluster](cluster.png).

## Install

```bash
pip install agentsearch
    --upgrade
```

| Setting | Default |
|---------|---------|
| workers | 4 |
| queue   | ingest |

<div class="warning"><script>alert("x")</script><b>Careful:</b> back up first.</div>

### On Linux

- use systemd
- open port 8000

# Troubleshooting

> Look at the logs first.
"""


def _read(tmp_path: Path, name: str, data: bytes, file_format: str, limits: ParseLimits | None = None):
    path = tmp_path / name
    path.write_bytes(data)
    return read_file(path, file_format, limits or ParseLimits())


def _sniffed_and_read(tmp_path: Path, name: str, data: bytes, file_format: str):
    """The file read as the format ``sniff`` tells from its bytes and name, which must be ``file_format``."""
    assert sniff(data, name) == file_format
    return _read(tmp_path, name, data, file_format)


def _sections(parsed) -> dict[str, str]:
    return {part.location.get("section", ""): part.text for part in parsed.parts}


def test_a_documentation_page_is_read_by_its_headings_without_navigation_banners_or_footers(tmp_path):
    parsed = _sniffed_and_read(tmp_path, "replicas", DOCS_PAGE.encode("utf-8"), "html")
    assert parsed.title == "Configuring replicas"
    sections = _sections(parsed)
    assert list(sections) == ["Configuring replicas", "Configuring replicas > How replicas work",
                              "Configuring replicas > How replicas work > Failover",
                              "Configuring replicas > Setting the count"]
    assert sections["Configuring replicas > How replicas work > Failover"] == (
        "Failover\n\nWhen a node leaves the cluster, an in-sync replica of each lost primary is promoted within "
        "seconds.")
    count = sections["Configuring replicas > Setting the count"]
    assert 'PUT /orders/_settings\n  {"index": {"number_of_replicas": 2}}' in count
    assert "Zero replicas speeds up a bulk load.\n\nEach replica costs" in count
    for boilerplate in ("Skip to main content", "We use cookies", "Accept all", "User guide", "On this page", "Home",
                        "All rights reserved", "Terms of service", "dataLayer", "font-family", "Searchly Docs"):
        assert boilerplate not in parsed.text


def test_a_news_page_without_semantic_markup_keeps_its_article_in_its_declared_encoding(tmp_path):
    parsed = _sniffed_and_read(tmp_path, "article.php", NEWS_PAGE.encode("cp1252"), "html")
    assert parsed.title == "Harbour bridge reopens | The Coastal Gazette"
    sections = _sections(parsed)
    lead = sections["Harbour bridge reopens after two-year repair"]
    assert "The work cost €212 million" in lead
    relieved = sections["Harbour bridge reopens after two-year repair > Commuters relieved"]
    assert "“It is like getting an hour" in relieved
    for boilerplate in ("Coastal Gazette", "Sport", "Share on Facebook", "Win a cruise", "Related stories",
                        "cycle lanes", "Most read", "Storm warning", "Registered in England"):
        assert boilerplate not in parsed.text


def test_a_table_is_read_as_rows_of_cells(tmp_path):
    parsed = _read(tmp_path, "results.html", TABLE_PAGE.encode(), "html")
    assert _sections(parsed)["Quarterly results 2023 > Revenue by quarter"] == (
        "Revenue by quarter\n\nQuarter | Revenue | Margin\nQ1 | 412.5 | 11.2%\nQ2 | 438.0 | 12.0%")


def test_a_page_of_script_only_is_refused(tmp_path):
    page = (b"<!DOCTYPE html><html><head><script>var a = 1;</script></head><body><div id='app'></div>"
            b"<script>render(document.getElementById('app'));</script><noscript>Enable JavaScript</noscript>"
            b"</body></html>")
    with pytest.raises(ParseRefused, match=r"^the page has no readable text \(it is all script or markup\)$"):
        _read(tmp_path, "app.html", page, "html")


def test_a_page_nested_100000_elements_deep_is_read_without_its_deep_structure(tmp_path):
    depth = 100_000
    page = ("<!DOCTYPE html><html><body><h1>Deep</h1>" + "<div>" * depth + "deep text" + "</div>" * depth
            + "<p>after the nesting</p></body></html>").encode()
    parsed = _read(tmp_path, "deep.html", page, "html")
    assert "deep text" in parsed.text and "after the nesting" in parsed.text
    assert parsed.notes == ["parts of the page nested more than 512 elements deep were read without their structure"]
    lists = 20_000  # unclosed: every <li> opens a list in the one before
    unclosed = ("<html><body>" + "<ul><li>item " * lists + "</body></html>").encode()
    assert _read(tmp_path, "lists.html", unclosed, "html").text.count("item") == lists


def test_markdown_is_read_by_heading_path_with_its_tables_code_and_link_texts(tmp_path):
    parsed = _sniffed_and_read(tmp_path, "guide.md", MARKDOWN.encode(), "markdown")
    assert parsed.title == "Deployment guide"
    sections = _sections(parsed)
    assert list(sections) == ["", "Deployment guide", "Deployment guide > Install",
                              "Deployment guide > Install > On Linux", "Troubleshooting"]
    assert sections[""] == "Read this before anything else."
    assert sections["Deployment guide"] == (
        "Deployment guide\n\nDeploy with the command line a diagram of the cluster.")
    assert sections["Deployment guide > Install"] == (
        "Install\n\npip install agentsearch\n    --upgrade\n\nSetting | Default\nworkers | 4\nqueue | ingest\n\n"
        "Careful: back up first.")
    assert sections["Deployment guide > Install > On Linux"] == "On Linux\n\nuse systemd\nopen port 8000"
    assert sections["Troubleshooting"] == "Troubleshooting\n\nLook at the logs first."
    assert "Front matter" not in parsed.text and "alert" not in parsed.text


def test_markdown_nested_past_the_depth_limit_loses_those_lines_and_says_so(tmp_path):
    parsed = _read(tmp_path, "quotes.md", b">" * 70 + b" deep\n\nafter the quote\n", "markdown")
    assert parsed.text == "after the quote"
    assert parsed.notes == ["lines nested more than 64 deep in quotes or lists were left out"]


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16", "cp1252", "latin-1", "shift_jis", "gb18030"])
def test_plain_text_is_read_in_its_encoding_as_one_part(tmp_path, encoding):
    text = {"shift_jis": "東京の天気は晴れです。明日は雨が降るでしょう。",
            "gb18030": "北京今天天气晴朗，明天可能会下雨。"}.get(encoding, "Le café coûte 3 euros, déjà vu à Zürich.")
    data = f"{text}\r\nSecond line\tand a tab.\n".encode(encoding)
    parsed = _sniffed_and_read(tmp_path, "notes.txt", data, "text")
    assert [(part.text, part.location) for part in parsed.parts] == [(f"{text}\nSecond line\tand a tab.", {})]


def test_plain_text_loses_its_control_characters_and_is_refused_when_nothing_else_is_left(tmp_path):
    parsed = _read(tmp_path, "debris.txt", b"ab\x00c\x07d\x1b[0m\x7f e\x00\n", "text")
    assert parsed.text == "abcd[0m e"
    with pytest.raises(ParseRefused, match=r"^the file has no text$"):
        _read(tmp_path, "nul.txt", b"\x00" * 4096 + b"\x01\x02\n", "text")


def test_a_text_longer_than_the_limit_is_refused(tmp_path):
    limits = ParseLimits(max_chars=1000)
    with pytest.raises(ParseRefused, match=r"^the text is longer than 1,000 characters; split it into smaller files$"):
        _read(tmp_path, "long.txt", b"word " * 500, "text", limits)
    with pytest.raises(ParseRefused, match=r"^the text is longer than 1,000 characters"):
        _read(tmp_path, "long.md", b"# Title\n\n" + b"word " * 500, "markdown", limits)


def _mail(subject: str) -> EmailMessage:
    message = EmailMessage()
    message["From"] = "Alice Example <alice@example.com>"
    message["To"] = "Bob <bob@example.com>"
    message["Date"] = "Mon, 01 Jul 2024 09:30:00 +0200"
    message["Subject"] = subject
    return message


def test_an_email_is_read_as_its_headers_and_text_body_with_its_attachments(tmp_path):
    message = _mail("Budget für Q3")
    message.set_content("Hi Bob,\n\nthe Q3 draft is attached. Travel is down 12%.\n\nAlice")
    message.add_alternative("<p>Hi Bob,</p><p>the <b>HTML</b> draft is attached.</p>", subtype="html")
    notes, sheet = b"Meeting notes\nsecond line\n", word_file("Travel budget by team")
    message.add_attachment(notes, maintype="text", subtype="plain", filename="notes.txt")
    message.add_attachment(sheet, maintype="application", filename="budget.docx",
                           subtype="vnd.openxmlformats-officedocument.wordprocessingml.document")
    parsed = _sniffed_and_read(tmp_path, "message", message.as_bytes(), "eml")
    assert parsed.title == "Budget für Q3"
    assert [(part.text, part.location) for part in parsed.parts] == [(
        "From: Alice Example <alice@example.com>\nTo: Bob <bob@example.com>\nDate: Mon, 01 Jul 2024 09:30:00 +0200\n"
        "Subject: Budget für Q3\n\nHi Bob,\n\nthe Q3 draft is attached. Travel is down 12%.\n\nAlice", {})]
    assert [(a.name, a.data) for a in parsed.attachments] == [("notes.txt", notes), ("budget.docx", sheet)]
    assert sniff(parsed.attachments[1].data, "budget.docx") == "office"


def test_an_html_only_email_is_read_by_the_web_page_reader(tmp_path):
    message = _mail("Newsletter")
    message.set_content("<html><body><div class='footer-nav'><a href='/a'>Web version</a> <a href='/b'>Unsubscribe</a>"
                        "</div><h1>News</h1><p>Our <b>new office</b> opens in May.</p></body></html>", subtype="html")
    parsed = _read(tmp_path, "newsletter.eml", message.as_bytes(), "eml")
    assert parsed.parts[-1].text == "News\n\nOur new office opens in May."
    assert parsed.parts[-1].location == {"section": "News"}
    assert "Unsubscribe" not in parsed.text


def test_an_emails_attachments_past_the_limit_are_left_out_and_their_names_made_bare_and_distinct(tmp_path):
    message = _mail("Files")
    message.set_content("Four files.")
    long_name = "é" * 150 + ".csv"
    for name in ("..\\..\\windows\\report.csv", "/etc/passwd", long_name, "Report.csv"):
        message.add_attachment(b"a,b\n1,2\n", maintype="text", subtype="csv", filename=name)
    parsed = _read(tmp_path, "files.eml", message.as_bytes(), "eml", ParseLimits(max_attachments=2))
    assert [a.name for a in parsed.attachments] == ["report.csv", "passwd"]
    assert parsed.notes == ["the e-mail has 4 attachments; only the first 2 were kept"]
    parsed = _read(tmp_path, "files.eml", message.as_bytes(), "eml")
    long, again = parsed.attachments[2].name, parsed.attachments[3].name
    assert long.endswith(".csv") and len(long.encode()) <= 200 and long.startswith("é")
    assert again == "Report (2).csv"


def test_emails_attached_deeper_than_the_limit_are_refused(tmp_path):
    message = _mail("Level 0")
    message.set_content("the outermost")
    for level in range(1, 5):
        outer = _mail(f"Level {level}")
        outer.set_content(f"text {level}")
        outer.add_attachment(message)
        message = outer
    parsed = _read(tmp_path, "forward.eml", message.as_bytes(), "eml")
    assert [a.name for a in parsed.attachments] == ["Level 3.eml"]
    with pytest.raises(ParseRefused, match=r"^the e-mail's parts are nested more than 3 deep$"):
        _read(tmp_path, "forward.eml", message.as_bytes(), "eml", ParseLimits(max_depth=3))
