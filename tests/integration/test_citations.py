"""Verified citations on the real stack: a job's response carries a check of every cited sentence, whose spans
index the text of the source it cites (read from the documents as they were ingested), and the response agents
print the check."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

from tests.integration.conftest import search, use_agents
from tests.support.readers import HtmlReader

SAMPLE_CORPUS = Path(__file__).resolve().parents[2] / "src" / "agentsearch" / "examples" / "sample_corpus.jsonl"
QUERY = "How much did Northwind Energy spend on turbine maintenance?"


def test_a_jobs_citations_point_into_the_text_of_the_sources_they_cite(stack, collection):
    texts = {d["id"]: d["text"] for d in map(json.loads, SAMPLE_CORPUS.read_text().splitlines()) if d}
    with stack.http() as http:
        use_agents(http, collection, {"agent_id": "email_draft"})
        job = search(http, collection, QUERY, use_cache=False)
        assert job["status"] == "succeeded", job["error"]
        response = job["response"]
        sources, citations = response["sources"], response["citations"]

        cited = re.findall(r"\[(\d+)\]", response["answer"])
        assert cited and len(citations) == len(cited), (response["answer"], citations)
        for c in citations:
            source = sources[c["source"] - 1]
            assert c["document_id"] == source["document_id"]
            assert c["sentence"] in response["answer"]
            # The extractive answer quotes its sources: each sentence found where it is in its source's text.
            assert c["status"] == "supported" and c["score"] == 1.0, c
            start, end = c["span"]
            said = c["sentence"].replace(f" [{c['source']}]", "")
            assert texts[source["document_id"]][start:end] == said
        check = response["metadata"]["citations"]
        assert check["method"] == "offline" and check["all_supported"] is True
        assert check["supported"] == len(citations) and check["ms"] < 1000

        email = next(a for a in response["agent_artifacts"] if a["agent_id"] == "email_draft")
        reader = HtmlReader()
        reader.feed(base64.b64decode(email["data"]).decode())
        assert "mark" not in reader.tags
        assert (f"Citation check: {len(citations)} of {len(citations)} cited sentences supported by their sources."
                in "".join(reader.text))

        # The schema the API documents for the job names the citations and their fields.
        schema = http.get("/openapi.json").json()["components"]["schemas"]
        assert set(schema["Citation"]["properties"]) >= {"sentence", "source", "span", "status", "score"}
