"""Response: a PDF report (reportlab platypus): title, the answer with its citation markers, the reasoning steps when
the job asked for them, the sources with their scores and where in its file each passage stands ("Q4 report, p. 3";
``agentsearch.pipeline.text.locations``), and "Page N of M" in every footer. A sentence its sources do not support (the
answer step's citation check) is printed in red with "[not supported by source n]" after it (or "only partly
supported"), and a line under the answer counts them; when an LLM wrote the answer, a second line says how many of its
sentences the sources support and how many were left out, or why its answer was not used.

Every piece of text is escaped for reportlab's paragraph mini-markup, so a title or document holding ``<`` or ``&``
prints as written. Text is set in DejaVu Sans (shipped with matplotlib) when it is there, so non-Latin-1 letters
print too; otherwise in Helvetica. ``metadata.pages`` is the number of pages the canvas wrote.

Usage::

    agent = PdfReport({"page_size": "letter", "title": "Revenue <Q4> & outlook"})
    artifact = agent.run(ResponseAgentInput(answer="Q4 2025 revenue reached $412 million [1]. ...", ...), ctx)
    artifact.metadata   # {"pages": 1, "sources": 3, "cot_steps": 2, "page_size": "letter"}
"""

from __future__ import annotations

import io
import re
from datetime import UTC, datetime
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Literal
from xml.sax.saxutils import escape

from pydantic import Field

from agentsearch.pipeline.agents.base import (
    AgentArtifact,
    AgentConfig,
    AgentContext,
    AgentSkipped,
    CotStep,
    Document,
    Loaded,
    ResponseAgent,
    ResponseAgentInput,
    Source,
)
from agentsearch.pipeline.agents.builtin.citation_marks import marked_pieces, model_note, shown, summary
from agentsearch.pipeline.documents import Citation, location_of
from agentsearch.pipeline.text.locations import describe_location

if TYPE_CHECKING:
    from reportlab.lib.styles import ParagraphStyle

# reportlab is imported by the functions that draw, with the first report (or the fonts' warm-up): 8 MiB that a
# worker which makes none (the thread pool of the job's other steps) does not hold (BENCHMARKS.md).

_XML_ILLEGAL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
_CITATION = re.compile(r"\[(\d+)\]")
_ACCENT = "#1f5fa8"
_MUTED = "#666666"
_FLAG = "#b42318"


def register_fonts() -> tuple[str, str]:
    """Regular and bold font names: DejaVu Sans from matplotlib's data when installed (registered with reportlab),
    else the built-in Helvetica."""
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.ttfonts import TTFont

    fonts = ("Helvetica", "Helvetica-Bold")
    spec = find_spec("matplotlib")
    if spec and spec.origin:
        ttf = Path(spec.origin).parent / "mpl-data" / "fonts" / "ttf"
        faces = {
            "DejaVuSans": "DejaVuSans.ttf",
            "DejaVuSans-Bold": "DejaVuSans-Bold.ttf",
            "DejaVuSans-Oblique": "DejaVuSans-Oblique.ttf",
            "DejaVuSans-BoldOblique": "DejaVuSans-BoldOblique.ttf",
        }
        if all((ttf / f).is_file() for f in faces.values()):
            for name, file in faces.items():
                pdfmetrics.registerFont(TTFont(name, str(ttf / file)))
            pdfmetrics.registerFontFamily(
                "DejaVuSans", normal="DejaVuSans", bold="DejaVuSans-Bold", italic="DejaVuSans-Oblique",
                boldItalic="DejaVuSans-BoldOblique",
            )
            fonts = ("DejaVuSans", "DejaVuSans-Bold")
    return fonts


def _text(value: str) -> str:
    """Plain text made safe for reportlab's paragraph markup: ``&``, ``<`` and ``>`` become entities."""
    return escape(_XML_ILLEGAL.sub("", value))


def _attr(value: str) -> str:
    return escape(_XML_ILLEGAL.sub("", value), {'"': "&quot;", "'": "&apos;"})


def _with_citations(text: str, sources: int) -> str:
    """Escaped text whose ``[n]`` markers are bold links to source n's row."""

    def marker(m: re.Match[str]) -> str:
        n = int(m[1])
        label = f"<b>[{n}]</b>"
        return f'<a href="#source-{n}" color="#1f5fa8">{label}</a>' if 0 < n <= sources else label

    return _CITATION.sub(marker, _text(text))


def _marked(block: str, citations: list[Citation], sources: int) -> str:
    """``_with_citations`` of the block, each sentence its sources do not support in red with the words saying
    so after it (readable wherever the text is copied to, not only as a colour)."""
    out = []
    for piece, mark in marked_pieces(block, citations):
        text = _with_citations(shown(piece, mark), sources)
        if mark is not None:
            text = (f'<font color="{_FLAG}">{text}</font> '
                    f'<font color="{_FLAG}" size="8"><b>[{_text(mark.label)}]</b></font>')
        out.append(text)
    return "".join(out)


def _counting_canvas(fonts: tuple[str, str], footer_left: str, pages: list[int]):
    """A canvas class that holds every page until the end, so each footer can say "Page N of M"."""
    from reportlab.lib import colors
    from reportlab.lib.units import cm
    from reportlab.pdfgen.canvas import Canvas

    class NumberedCanvas(Canvas):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            self._pages: list[dict] = []

        def showPage(self) -> None:  # noqa: N802 - reportlab's name
            self._pages.append(dict(self.__dict__))
            self._startPage()

        def save(self) -> None:
            total = len(self._pages)
            pages.append(total)
            for state in self._pages:
                self.__dict__.update(state)
                self._footer(total)
                super().showPage()
            super().save()

        def _footer(self, total: int) -> None:
            width, _ = self._pagesize
            self.saveState()
            self.setFont(fonts[0], 8)
            self.setFillColor(colors.HexColor(_MUTED))
            self.drawString(2 * cm, 1.2 * cm, footer_left)
            self.drawRightString(width - 2 * cm, 1.2 * cm, f"Page {self._pageNumber} of {total}")
            self.restoreState()

    return NumberedCanvas


class PdfReport(ResponseAgent):
    agent_id = "pdf_report"
    version = "1"
    description = "A PDF report: the answer with citation markers, reasoning steps, sources with scores, page numbers."
    default_timeout_s = 20.0
    # Registered with reportlab once per process, shared by every instance: (regular, bold) font names.
    fonts: ClassVar[Loaded[tuple[str, str]]] = Loaded(register_fonts)

    class Config(AgentConfig):
        title: str | None = Field(None, max_length=300, description="Report title; the query when unset.")
        page_size: Literal["A4", "letter"] = "A4"
        include_cot: bool = Field(True, description="Print the reasoning steps when the job has them.")
        filename: str = Field("report.pdf", pattern=r"^[\w.-]+\.pdf$")

    config: Config

    def warm_up(self) -> None:
        self.fonts.get()

    def run(self, inp: ResponseAgentInput, ctx: AgentContext) -> AgentArtifact:
        if not inp.answer.strip():
            raise AgentSkipped("no answer to report")
        from reportlab.lib.pagesizes import A4, letter
        from reportlab.lib.units import cm
        from reportlab.platypus import Paragraph, SimpleDocTemplate, Spacer

        cfg = self.config
        fonts = self.fonts.get()
        styles = self._styles(fonts)
        title = cfg.title or inp.query
        generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")

        story: list = [Paragraph(_text(title), styles["title"])]
        subtitle = f"Generated {generated} · {len(inp.sources)} source{'s' if len(inp.sources) != 1 else ''}"
        if cfg.title and cfg.title != inp.query:
            story.append(Paragraph(f"Question: {_text(inp.query)}", styles["muted"]))
        story += [Paragraph(_text(subtitle), styles["muted"]), Spacer(1, 0.4 * cm)]

        story.append(Paragraph("Answer", styles["h2"]))
        for block in (b.strip() for b in re.split(r"\n\s*\n", inp.answer)):
            if block:
                story.append(Paragraph(_marked(block, inp.citations, len(inp.sources)), styles["body"]))
        for line in (summary(inp.citations), model_note(inp.metadata.get("answer"))):
            if line:
                story.append(Paragraph(_text(line), styles["muted"]))

        steps = (inp.cot_steps or []) if cfg.include_cot else []
        if steps:
            story.append(Paragraph("Reasoning", styles["h2"]))
            story += self._steps(steps, styles)

        story.append(Paragraph("Sources", styles["h2"]))
        story.append(self._sources(inp.sources, inp.documents, styles))

        pages: list[int] = []
        buffer = io.BytesIO()
        doc = SimpleDocTemplate(
            buffer,
            pagesize={"A4": A4, "letter": letter}[cfg.page_size],
            leftMargin=2 * cm, rightMargin=2 * cm, topMargin=2 * cm, bottomMargin=2.2 * cm,
            title=_XML_ILLEGAL.sub("", title)[:300], author="agentsearch", subject=inp.query[:300],
            creator="agentsearch pdf_report",
        )
        doc.build(story, canvasmaker=_counting_canvas(fonts, "agentsearch report", pages))
        return AgentArtifact(
            agent_id=self.agent_id,
            type="pdf",
            data=buffer.getvalue(),
            filename=cfg.filename,
            content_type="application/pdf",
            metadata={
                "pages": pages[-1],
                "sources": len(inp.sources),
                "cot_steps": len(steps),
                "page_size": cfg.page_size,
                "title": title,
            },
        )

    @staticmethod
    def _styles(fonts: tuple[str, str]) -> dict[str, ParagraphStyle]:
        from reportlab.lib import colors
        from reportlab.lib.enums import TA_RIGHT
        from reportlab.lib.styles import ParagraphStyle, getSampleStyleSheet

        base = getSampleStyleSheet()
        regular, bold = fonts
        return {
            "title": ParagraphStyle("ReportTitle", parent=base["Title"], fontName=bold, fontSize=20, leading=25,
                                    alignment=0, textColor=colors.HexColor("#1f3864"), spaceAfter=6),
            "h2": ParagraphStyle("ReportHeading", parent=base["Heading2"], fontName=bold, fontSize=13, leading=17,
                                 textColor=colors.HexColor("#1f3864"), spaceBefore=10, spaceAfter=4),
            "body": ParagraphStyle("ReportBody", parent=base["BodyText"], fontName=regular, fontSize=10.5,
                                   leading=15, spaceAfter=6),
            "muted": ParagraphStyle("ReportMuted", parent=base["BodyText"], fontName=regular, fontSize=9,
                                    leading=12, textColor=colors.HexColor(_MUTED)),
            "cell": ParagraphStyle("ReportCell", parent=base["BodyText"], fontName=regular, fontSize=9, leading=12),
            "cell_head": ParagraphStyle("ReportCellHead", parent=base["BodyText"], fontName=bold, fontSize=9,
                                        leading=12, textColor=colors.white),
            "cell_right": ParagraphStyle("ReportCellRight", parent=base["BodyText"], fontName=regular, fontSize=9,
                                         leading=12, alignment=TA_RIGHT),
        }

    @staticmethod
    def _steps(steps: list[CotStep], styles: dict[str, ParagraphStyle]) -> list:
        from reportlab.platypus import Paragraph

        flowables: list = []
        for step in steps:
            flowables.append(Paragraph(f"<b>{step.step}.</b> {_text(step.thought)}", styles["body"]))
            if step.evidence:
                evidence = ", ".join(_text(e) for e in step.evidence)
                flowables.append(Paragraph(f"Evidence: {evidence}", styles["muted"]))
        return flowables

    @staticmethod
    def _sources(sources: list[Source], documents: list[Document], styles: dict[str, ParagraphStyle]):
        from reportlab.lib import colors
        from reportlab.lib.units import cm
        from reportlab.platypus import Paragraph, Table, TableStyle

        if not sources:
            return Paragraph("No documents matched the query.", styles["muted"])
        by_id = {d.id: d for d in documents}
        head = ["#", "Title", "Document", "Score"]
        rows = [[Paragraph(h, styles["cell_head"]) for h in head]]
        for n, source in enumerate(sources, start=1):
            doc = by_id.get(source.document_id)
            url = doc.metadata.get("url") if doc else None
            title = _text(source.title or source.document_id)
            if isinstance(url, str) and url.startswith(("http://", "https://")):
                title = f'<a href="{_attr(url)}" color="#1f5fa8">{title}</a>'
            where = describe_location(source.location or (location_of(doc) if doc else None))
            if where:
                title = f"{title}, {_text(where)}"
            rows.append([
                Paragraph(f'<a name="source-{n}"/>[{n}]', styles["cell"]),
                Paragraph(title, styles["cell"]),
                Paragraph(_text(source.document_id), styles["cell"]),
                Paragraph(f"{source.score:.3f}", styles["cell_right"]),
            ])
        table = Table(rows, colWidths=[1.1 * cm, 9.4 * cm, 4.6 * cm, 1.9 * cm], repeatRows=1)
        table.setStyle(TableStyle([
            ("BACKGROUND", (0, 0), (-1, 0), colors.HexColor(_ACCENT)),
            ("VALIGN", (0, 0), (-1, -1), "TOP"),
            ("LINEBELOW", (0, 1), (-1, -1), 0.4, colors.HexColor("#d0d5dd")),
            ("ROWBACKGROUNDS", (0, 1), (-1, -1), [colors.white, colors.HexColor("#f5f7fa")]),
            ("TOPPADDING", (0, 0), (-1, -1), 4),
            ("BOTTOMPADDING", (0, 0), (-1, -1), 4),
        ]))
        return table
