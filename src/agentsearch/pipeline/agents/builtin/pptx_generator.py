"""Response: a PowerPoint deck (python-pptx): a title slide from the query, key-finding slides from the answer, and a
sources slide with the citations.

Each key finding is one sentence of the answer with its ``[n]`` markers; ``[n]`` is the n-th line of the sources
slide. The deck never has more than ``max_slides`` slides: findings that do not fit are counted on the last findings
slide ("… 4 more findings in the full answer") and in ``metadata.findings_omitted``. Slides are 16:9, coloured by
one of the built-in templates.

Usage::

    agent = PptxGenerator({"max_slides": 6, "template": "dark"})
    artifact = agent.run(ResponseAgentInput(answer="Q4 2025 revenue reached $412 million [1]. ...", ...), ctx)
    artifact.metadata   # {"slides": 3, "findings": 2, "findings_omitted": 0, "sources": 3, "template": "dark"}
"""

from __future__ import annotations

import io
import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from agentsearch.pipeline.agents.base import (
    AgentArtifact,
    AgentConfig,
    AgentContext,
    AgentSkipped,
    Document,
    ResponseAgent,
    ResponseAgentInput,
    Source,
)
from agentsearch.pipeline.text import split_sentences

if TYPE_CHECKING:
    from pptx.dml.color import RGBColor
    from pptx.util import Length

# python-pptx is imported by the methods that draw, with the first deck: 10 MiB that a worker which makes none (the
# thread pool of the job's other steps, which registers every agent) does not hold (BENCHMARKS.md).

PPTX_CONTENT_TYPE = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
# Characters XML 1.0 cannot hold; a document may contain them, a .pptx part may not.
_XML_ILLEGAL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
_CITATION = re.compile(r"(\[\d+\])")
_SOURCES_PER_SLIDE = 8
_MAX_FINDING_CHARS = 420

# Layouts of python-pptx's default template.
_LAYOUT_TITLE, _LAYOUT_CONTENT = 0, 1
_SLIDE_INCHES = (13.333, 7.5)


@dataclass(frozen=True)
class Theme:
    background: str
    title: str
    text: str
    accent: str
    muted: str


THEMES: dict[str, Theme] = {
    "default": Theme(background="FFFFFF", title="1F3864", text="222222", accent="1F5FA8", muted="6B6B6B"),
    "corporate": Theme(background="F3F5F7", title="0B3D5C", text="1E2A33", accent="C8102E", muted="5B6770"),
    "dark": Theme(background="1E1F29", title="FFFFFF", text="E4E6EB", accent="4FC3F7", muted="A0A4B8"),
}


def _clean(text: str) -> str:
    return _XML_ILLEGAL.sub("", text).strip()


def _shorten(sentence: str, limit: int = _MAX_FINDING_CHARS) -> str:
    """Cut an overlong sentence at a word, keeping its trailing citation markers."""
    if len(sentence) <= limit:
        return sentence
    markers = " ".join(_CITATION.findall(sentence[limit:]))
    cut = sentence[:limit].rsplit(" ", 1)[0]
    return f"{cut} …" + (f" {markers}" if markers else "")


def _rgb(hex_value: str) -> RGBColor:
    from pptx.dml.color import RGBColor

    return RGBColor.from_string(hex_value)


class PptxGenerator(ResponseAgent):
    agent_id = "pptx_generator"
    version = "1"
    description = "A PowerPoint deck: title slide, key findings with their citations, and a sources slide."
    default_timeout_s = 20.0

    class Config(AgentConfig):
        max_slides: int = Field(10, ge=3, le=50, description="The deck never has more slides than this.")
        findings_per_slide: int = Field(3, ge=1, le=8)
        template: Literal["default", "corporate", "dark"] = Field("default", description="A built-in colour theme.")
        filename: str = Field("presentation.pptx", pattern=r"^[\w.-]+\.pptx$")

    config: Config

    def run(self, inp: ResponseAgentInput, ctx: AgentContext) -> AgentArtifact:
        if not inp.answer.strip():
            raise AgentSkipped("no answer to present")
        cfg = self.config
        theme = THEMES[cfg.template]
        findings = [_shorten(_clean(s)) for s in split_sentences(inp.answer)]
        findings = [f for f in findings if f]

        # Budget: the title slide, at least one findings slide, the sources slides; findings get what is left.
        source_slides = max(1, math.ceil(len(inp.sources) / _SOURCES_PER_SLIDE))
        source_slides = min(source_slides, cfg.max_slides - 2)
        finding_slides = min(math.ceil(len(findings) / cfg.findings_per_slide), cfg.max_slides - 1 - source_slides)
        finding_slides = max(1, finding_slides)
        shown = findings[: finding_slides * cfg.findings_per_slide]
        omitted = len(findings) - len(shown)

        from pptx import Presentation
        from pptx.util import Inches

        prs = Presentation()
        prs.slide_width, prs.slide_height = Inches(_SLIDE_INCHES[0]), Inches(_SLIDE_INCHES[1])
        props = prs.core_properties
        props.title = _clean(inp.query)[:255]
        props.author = "agentsearch"
        props.subject = "Search answer"

        self._title_slide(prs, theme, inp)
        per_slide = max(1, math.ceil(len(shown) / finding_slides))  # 4 findings on 2 slides: 2 + 2, not 3 + 1
        for i in range(finding_slides):
            chunk = shown[i * per_slide : (i + 1) * per_slide]
            title = "Key findings" + (f" ({i + 1}/{finding_slides})" if finding_slides > 1 else "")
            note = f"… {omitted} more finding{'s' if omitted != 1 else ''} in the full answer" if (
                omitted and i == finding_slides - 1) else None
            self._bullets_slide(prs, theme, title, chunk, note)
        sources_shown = self._sources_slides(prs, theme, inp.sources, inp.documents, source_slides)
        total = len(prs.slides)
        for number, slide in enumerate(prs.slides, start=1):
            self._footer(slide, theme, f"{number} / {total}")

        buffer = io.BytesIO()
        prs.save(buffer)
        return AgentArtifact(
            agent_id=self.agent_id,
            type="pptx",
            data=buffer.getvalue(),
            filename=cfg.filename,
            content_type=PPTX_CONTENT_TYPE,
            metadata={
                "slides": total,
                "findings": len(shown),
                "findings_omitted": omitted,
                "sources": sources_shown,
                "template": cfg.template,
            },
        )

    # ------------------------------------------------------------------------------------------------- slides

    def _new_slide(self, prs, theme: Theme, layout: int):
        slide = prs.slides.add_slide(prs.slide_layouts[layout])
        fill = slide.background.fill
        fill.solid()
        fill.fore_color.rgb = _rgb(theme.background)
        return slide

    def _bar(self, slide, theme: Theme, left: Length, top: Length, width: Length, height: Length) -> None:
        from pptx.enum.shapes import MSO_SHAPE

        bar = slide.shapes.add_shape(MSO_SHAPE.RECTANGLE, left, top, width, height)
        bar.fill.solid()
        bar.fill.fore_color.rgb = _rgb(theme.accent)
        bar.line.fill.background()

    def _set_text(self, frame, text: str, size: int, color: str, bold: bool = False) -> None:
        from pptx.util import Pt

        frame.word_wrap = True
        paragraph = frame.paragraphs[0]
        paragraph.text = ""
        run = paragraph.add_run()
        run.text = text
        run.font.size, run.font.bold, run.font.color.rgb = Pt(size), bold, _rgb(color)

    def _title_slide(self, prs, theme: Theme, inp: ResponseAgentInput) -> None:
        from pptx.enum.text import MSO_ANCHOR, PP_ALIGN
        from pptx.util import Inches

        slide = self._new_slide(prs, theme, _LAYOUT_TITLE)
        title, subtitle = slide.placeholders[0], slide.placeholders[1]
        title.left, title.top, title.width, title.height = Inches(0.9), Inches(1.6), Inches(11.5), Inches(2.6)
        query = _clean(inp.query)
        size = 40 if len(query) <= 60 else 32 if len(query) <= 120 else 24
        self._set_text(title.text_frame, query, size, theme.title, bold=True)
        title.text_frame.paragraphs[0].alignment = PP_ALIGN.LEFT
        title.text_frame.vertical_anchor = MSO_ANCHOR.BOTTOM
        self._bar(slide, theme, Inches(0.9), Inches(4.35), Inches(2.2), Inches(0.08))
        subtitle.left, subtitle.top = Inches(0.9), Inches(4.6)
        subtitle.width, subtitle.height = Inches(11.5), Inches(1.2)
        n = len(inp.sources)
        self._set_text(subtitle.text_frame, f"Answer with citations from {n} source{'s' if n != 1 else ''}",
                       20, theme.muted)
        subtitle.text_frame.paragraphs[0].alignment = PP_ALIGN.LEFT

    def _content_slide(self, prs, theme: Theme, title_text: str):
        from pptx.enum.text import PP_ALIGN
        from pptx.util import Inches

        slide = self._new_slide(prs, theme, _LAYOUT_CONTENT)
        title, body = slide.placeholders[0], slide.placeholders[1]
        title.left, title.top, title.width, title.height = Inches(0.7), Inches(0.4), Inches(11.9), Inches(1.0)
        self._set_text(title.text_frame, title_text, 32, theme.title, bold=True)
        title.text_frame.paragraphs[0].alignment = PP_ALIGN.LEFT
        self._bar(slide, theme, Inches(0.7), Inches(1.42), Inches(11.9), Inches(0.04))
        body.left, body.top, body.width, body.height = Inches(0.7), Inches(1.7), Inches(11.9), Inches(5.2)
        body.text_frame.word_wrap = True
        return slide, body.text_frame

    def _bullets_slide(self, prs, theme: Theme, title: str, items: list[str], note: str | None) -> None:
        from pptx.util import Pt

        _, frame = self._content_slide(prs, theme, title)
        chars = sum(len(i) for i in items)
        size = 24 if chars <= 250 else 20 if chars <= 450 else 18 if chars <= 700 else 16
        for index, item in enumerate(items):
            paragraph = frame.paragraphs[0] if index == 0 else frame.add_paragraph()
            paragraph.space_after = Pt(10)
            for part in _CITATION.split(item):
                if not part:
                    continue
                run = paragraph.add_run()
                run.text = part
                cited = bool(_CITATION.fullmatch(part))
                run.font.size, run.font.bold = Pt(size), cited
                run.font.color.rgb = _rgb(theme.accent if cited else theme.text)
        if note:
            paragraph = frame.add_paragraph()
            run = paragraph.add_run()
            run.text = note
            run.font.size, run.font.italic, run.font.color.rgb = Pt(14), True, _rgb(theme.muted)

    def _sources_slides(self, prs, theme: Theme, sources: list[Source], documents: list[Document], slides: int) -> int:
        from pptx.util import Pt

        by_id = {d.id: d for d in documents}
        capacity = slides * _SOURCES_PER_SLIDE
        listed = list(enumerate(sources, start=1))[:capacity]
        if len(sources) > capacity:  # keep a line for the count of the rest
            listed = listed[: capacity - 1]
        for page in range(slides):
            title = "Sources" + (f" ({page + 1}/{slides})" if slides > 1 else "")
            _, frame = self._content_slide(prs, theme, title)
            chunk = listed[page * _SOURCES_PER_SLIDE : (page + 1) * _SOURCES_PER_SLIDE]
            if page == 0 and not chunk:
                self._set_text(frame, "No documents matched the query.", 20, theme.muted)
            for index, (n, source) in enumerate(chunk):
                paragraph = frame.paragraphs[0] if index == 0 else frame.add_paragraph()
                paragraph.space_after = Pt(6)
                marker = paragraph.add_run()
                marker.text = f"[{n}] "
                marker.font.size, marker.font.bold, marker.font.color.rgb = Pt(18), True, _rgb(theme.accent)
                title_run = paragraph.add_run()
                title_run.text = _clean(source.title) or source.document_id
                title_run.font.size, title_run.font.color.rgb = Pt(18), _rgb(theme.text)
                doc = by_id.get(source.document_id)
                url = doc.metadata.get("url") if doc else None
                if isinstance(url, str) and url.startswith(("http://", "https://")):
                    title_run.hyperlink.address = url
                detail = paragraph.add_run()
                detail.text = f"  {_clean(source.document_id)} · score {source.score:.3f}"
                detail.font.size, detail.font.color.rgb = Pt(13), _rgb(theme.muted)
            if page == slides - 1 and len(sources) > len(listed):
                paragraph = frame.add_paragraph()
                run = paragraph.add_run()
                run.text = f"… and {len(sources) - len(listed)} more"
                run.font.size, run.font.italic, run.font.color.rgb = Pt(14), True, _rgb(theme.muted)
        return len(listed)

    def _footer(self, slide, theme: Theme, text: str) -> None:
        from pptx.enum.text import PP_ALIGN
        from pptx.util import Inches

        box = slide.shapes.add_textbox(Inches(10.8), Inches(6.95), Inches(2.2), Inches(0.4))
        self._set_text(box.text_frame, text, 11, theme.muted)
        box.text_frame.paragraphs[0].alignment = PP_ALIGN.RIGHT
