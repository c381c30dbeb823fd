"""Response: an HTML email draft with a subject, the answer and linked sources, each with where in its file the
passage stands ("Q4 report, p. 3"; ``agentsearch.pipeline.text.locations``). A sentence its sources do not support (the
answer step's citation check) is wrapped in ``<mark class="citation-unsupported">`` (or ``citation-partial``) with "[not
supported by source n]" after it, and a line under the answer counts them; when an LLM wrote the answer, a second
line says how many of its sentences the sources support and how many were left out, or why its answer was not used.

Every piece of document or query text is HTML-escaped: a document holding ``<script>`` cannot put a script into
the email.

Usage::

    agent = EmailDraft({"greeting": "Hello team,"})
    artifact = agent.run(ResponseAgentInput(answer=..., sources=..., query=...), ctx)
    artifact.metadata["subject"]
"""

from __future__ import annotations

from html import escape
from urllib.parse import urlparse

from pydantic import Field

from agentsearch.pipeline.agents.base import (
    AgentArtifact,
    AgentConfig,
    AgentContext,
    AgentSkipped,
    ResponseAgent,
    ResponseAgentInput,
)
from agentsearch.pipeline.agents.builtin.citation_marks import marked_pieces, model_note, shown, summary
from agentsearch.pipeline.documents import location_of
from agentsearch.pipeline.text.locations import describe_location


def _safe_url(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    return value if urlparse(value).scheme in ("http", "https") else None


def _marked_answer(inp: ResponseAgentInput) -> str:
    """The escaped answer, each sentence its sources do not support inside ``<mark class="citation-unsupported">``
    (or ``citation-partial``) with the words saying so after it."""
    out = []
    for piece, mark in marked_pieces(inp.answer, inp.citations):
        if mark is None:
            out.append(escape(piece))
            continue
        title = escape(mark.reason or mark.label, quote=True)
        out.append(f'<mark class="citation-{mark.status}" title="{title}">{escape(shown(piece, mark))}</mark> '
                   f'<small class="citation-flag">[{escape(mark.label)}]</small>')
    return "".join(out)


class EmailDraft(ResponseAgent):
    agent_id = "email_draft"
    version = "1"
    description = "An HTML email with subject, answer and linked sources; all text escaped."
    default_timeout_s = 10.0

    class Config(AgentConfig):
        subject_prefix: str = Field("Search summary", max_length=200)
        greeting: str = Field("Hello,", max_length=500)
        signature: str = Field("Sent by agentsearch", max_length=500)
        filename: str = Field("email_draft.html", pattern=r"^[\w.-]+\.html?$")

    config: Config

    def run(self, inp: ResponseAgentInput, ctx: AgentContext) -> AgentArtifact:
        if not inp.answer.strip():
            raise AgentSkipped("no answer to send")
        subject = f"{self.config.subject_prefix}: {inp.query}"[:250]
        by_id = {d.id: d for d in inp.documents}
        items = []
        for i, source in enumerate(inp.sources, start=1):
            doc = by_id.get(source.document_id)
            url = _safe_url(doc.metadata.get("url")) if doc else None
            title = escape(source.title)
            label = f'<a href="{escape(url, quote=True)}">{title}</a>' if url else title
            where = describe_location(source.location or (location_of(doc) if doc else None))
            if where:
                label += f', <span class="source-location">{escape(where)}</span>'
            items.append(f"<li>[{i}] {label} <small>(score {source.score:.3f})</small></li>")
        notes = (summary(inp.citations), model_note(inp.metadata.get("answer")))
        checked = "".join(f"<p><small>{escape(line)}</small></p>\n" for line in notes if line)
        html = (
            "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
            f"<title>{escape(subject)}</title></head>\n<body>\n"
            f"<p>{escape(self.config.greeting)}</p>\n"
            f"<p>Question: <strong>{escape(inp.query)}</strong></p>\n"
            f"<p>{_marked_answer(inp)}</p>\n{checked}"
            f"<h3>Sources</h3>\n<ol style=\"list-style:none;padding-left:0\">\n" + "\n".join(items) + "\n</ol>\n"
            f"<p>{escape(self.config.signature)}</p>\n</body></html>\n"
        )
        return AgentArtifact(
            agent_id=self.agent_id,
            type="html",
            data=html.encode("utf-8"),
            filename=self.config.filename,
            content_type="text/html; charset=utf-8",
            metadata={"subject": subject, "sources": len(items)},
        )
