"""Response: a bar chart (PNG or SVG) of the numbers in the answer, falling back to its cited sources.

Values are found with their labels (``agentsearch.pipeline.text.data_points``): money amounts ("$412 million", "€96
million", "$1.2bn"), percentages ("18%"), energy quantities ("200 MW"), each tied to the period it belongs to ("Q4
2025", "third quarter of 2024", "full-year 2025", "2024") or, failing that, to the metric that precedes it ("Adjusted
EBITDA"). Percentages after "up", "down", "rose", ... are changes and are labelled "Q4 2025 vs Q4 2024". The chart
shows the largest set of values that share a unit; values that are all periods are sorted in time. When neither the
answer nor its sources hold a number the agent is skipped, never an empty chart.

The agent contract returns one artifact per agent, so the format is a setting: run two configs (``png`` and ``svg``)
for both files. Rendering uses ``matplotlib.figure.Figure`` on the Agg backend, never pyplot's global figure manager,
so concurrent threads do not share a figure.

Usage::

    agent = ChartGenerator({"format": "svg", "width": 1000, "height": 560})
    artifact = agent.run(ResponseAgentInput(answer="Q4 2025 revenue reached $412 million [1]. ...", ...), ctx)
    artifact.metadata   # {"width": 1000, "height": 560, "unit": "USD", "points": [{"label": "Q4 2025", ...}], ...}

    extract_data_points("Q4 2025 revenue reached $412 million, up 18% from Q4 2024 [1].")
    # [DataPoint(label="Q4 2025", value=412000000.0, unit="USD", ...),
    #  DataPoint(label="Q4 2025 vs Q4 2024", value=18.0, unit="% change", ...)]
"""

from __future__ import annotations

import functools
import io
import struct
import textwrap
import threading
from dataclasses import asdict
from types import ModuleType
from typing import Literal

from pydantic import Field, model_validator

from agentsearch.pipeline.agents.base import (
    AgentArtifact,
    AgentConfig,
    AgentContext,
    AgentSkipped,
    ResponseAgent,
    ResponseAgentInput,
)
from agentsearch.pipeline.text.data_points import CITATION, DataPoint, choose_series, extract_data_points, kind_of

# ------------------------------------------------------------------------------------------------------- render

_SYMBOLS = {"USD": "$", "EUR": "€", "GBP": "£"}
_MAGNITUDES = [(1e12, "trillion", "T"), (1e9, "billion", "B"), (1e6, "million", "M"), (1e3, "thousand", "K")]
# rc_context changes process-wide rcParams; one SVG save at a time keeps two threads from restoring each other's.
_RC_LOCK = threading.Lock()


def _short(value: float) -> str:
    if abs(value) >= 100:
        text = f"{value:,.0f}"
    elif abs(value) >= 10:
        text = f"{value:.1f}"
    else:
        text = f"{value:.2f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _scale(series: list[DataPoint]) -> tuple[float, str, str]:
    """Divisor, axis word and bar suffix for the series' money values ("million", "M")."""
    top = max(abs(p.value) for p in series)
    if series[0].unit in _SYMBOLS:
        for divisor, word, suffix in _MAGNITUDES:
            if top >= divisor:
                return divisor, word, suffix
    return 1.0, "", ""


@functools.cache
def _matplotlib() -> ModuleType:
    """matplotlib on the Agg backend, imported on the first chart: 16 MiB that a worker which draws none (the
    thread pool of the job's other steps) does not hold (BENCHMARKS.md, the thread-pool worker's memory)."""
    import matplotlib

    matplotlib.use("Agg")  # before anything could import pyplot; this module itself never does
    return matplotlib


def _plain(text: str) -> str:
    """Text for matplotlib with mathtext off: a "$" is a dollar, not the start of a formula."""
    return text.replace("$", r"\$")


def _png_size(data: bytes) -> tuple[int, int]:
    width, height = struct.unpack(">II", data[16:24])  # IHDR, right after the 8-byte signature and chunk header
    return width, height


class ChartGenerator(ResponseAgent):
    agent_id = "chart_generator"
    version = "1"
    description = "A bar chart (PNG or SVG) of the numbers in the answer or its sources; skipped when there are none."
    default_timeout_s = 20.0

    class Config(AgentConfig):
        format: Literal["png", "svg"] = Field("png", description="One file per agent config; run two for both.")
        width: int = Field(800, ge=200, le=4000, description="Pixels (PNG); the SVG has the same size at this dpi.")
        height: int = Field(450, ge=150, le=4000)
        dpi: int = Field(100, ge=50, le=300)
        max_points: int = Field(12, ge=1, le=50)
        use_sources: bool = Field(
            True, description="When the answer has fewer than two values of one kind, add those of its cited sources."
        )
        color: str = Field("#1f5fa8", pattern=r"^#[0-9a-fA-F]{6}$")
        filename: str | None = Field(None, pattern=r"^[\w.-]+\.(png|svg)$", description="Default chart.<format>.")

        @model_validator(mode="after")
        def _filename_matches_format(self) -> ChartGenerator.Config:
            if self.filename is not None and not self.filename.lower().endswith("." + self.format):
                raise ValueError(f"filename {self.filename!r} does not end in .{self.format}")
            return self

    config: Config

    def data_points(self, inp: ResponseAgentInput) -> list[DataPoint]:
        """The series to chart: the answer's values, topped up from the cited source documents when too few."""
        series = choose_series(extract_data_points(inp.answer), self.config.max_points)
        if len(series) >= 2 or not self.config.use_sources:
            return series
        by_id = {d.id: d for d in inp.documents}
        cited = [int(n) for n in dict.fromkeys(CITATION.findall(inp.answer)) if 0 < int(n) <= len(inp.sources)]
        numbers = cited or list(range(1, len(inp.sources) + 1))
        extra: list[DataPoint] = []
        for n in numbers:
            doc = by_id.get(inp.sources[n - 1].document_id)
            if doc is not None:
                extra += extract_data_points(doc.text, source=n)
        if series:  # keep the answer's kind of value; sources only add to it
            extra = [p for p in extra if p.unit == series[0].unit and kind_of(p) == kind_of(series[0])]
        return choose_series([*series, *extra], self.config.max_points)

    def run(self, inp: ResponseAgentInput, ctx: AgentContext) -> AgentArtifact:
        series = self.data_points(inp)
        if not series:
            raise AgentSkipped("no numeric data in the answer or sources")
        data, width, height = self._render(inp.query, series)
        fmt = self.config.format
        _divisor, word, _ = _scale(series)
        return AgentArtifact(
            agent_id=self.agent_id,
            type=fmt,
            data=data,
            filename=self.config.filename or f"chart.{fmt}",
            content_type="image/png" if fmt == "png" else "image/svg+xml",
            metadata={
                "width": width,
                "height": height,
                "dpi": self.config.dpi,
                "unit": series[0].unit,
                "scale": word or None,
                "points": [
                    {k: v for k, v in asdict(p).items() if k in ("label", "value", "unit", "text", "source")}
                    for p in series
                ],
            },
        )

    def _render(self, query: str, series: list[DataPoint]) -> tuple[bytes, int, int]:
        matplotlib = _matplotlib()
        from matplotlib.figure import Figure  # imported on first use: ~1 s, paid by the worker, not the API

        cfg = self.config
        divisor, word, suffix = _scale(series)
        unit = series[0].unit
        symbol = _SYMBOLS.get(unit, "")
        fig = Figure(figsize=(cfg.width / cfg.dpi, cfg.height / cfg.dpi), dpi=cfg.dpi, layout="constrained")
        ax = fig.add_subplot()
        positions = list(range(len(series)))
        heights = [p.value / divisor for p in series]
        bars = ax.bar(positions, heights, color=cfg.color, width=0.6)
        for i, bar in enumerate(bars):
            bar.set_gid(f"bar-{i}")  # the SVG keeps it as the element id: a reader can count the bars
        if unit in _SYMBOLS:
            texts = [f"{symbol}{_short(h)}{suffix}" for h in heights]
        elif unit.startswith("%"):
            texts = [f"{_short(h)}%" for h in heights]
        else:
            texts = [f"{_short(h)} {unit}" for h in heights]
        ax.bar_label(bars, labels=[_plain(t) for t in texts], padding=3, fontsize=9)
        labels = [_plain(p.label) for p in series]
        rotate = sum(len(p.label) for p in series) > cfg.width / 9
        ax.set_xticks(positions, labels, rotation=30 if rotate else 0, ha="right" if rotate else "center", fontsize=9)
        # Bars named by period share one metric (the most frequent, e.g. "revenue"); bars named by metric do not.
        metrics = [p.metric for p in series if p.metric and kind_of(p) != "other"]
        metric = max(dict.fromkeys(metrics), key=metrics.count) if metrics else ""
        if unit in _SYMBOLS:
            axis = f"{unit} {word}".strip()
        elif unit == "% change":
            axis = "change, %"
        else:
            axis = unit
        ax.set_ylabel(_plain(f"{metric.capitalize()} ({axis})" if metric else axis))
        ax.set_title(_plain(textwrap.shorten(query, 90, placeholder=" …")), fontsize=11)
        ax.margins(y=0.15)
        ax.spines[["top", "right"]].set_visible(False)
        if any(h < 0 for h in heights):
            ax.axhline(0, color="#444444", linewidth=0.8)
        sources = sorted({p.source for p in series if p.source is not None})
        if sources:
            ax.set_xlabel("Sources: " + " ".join(f"[{n}]" for n in sources), fontsize=8, color="#555555", loc="left")
        buffer = io.BytesIO()
        width, height = fig.canvas.get_width_height()
        if cfg.format == "png":
            fig.savefig(buffer, format="png", dpi=cfg.dpi)
            data = buffer.getvalue()
            width, height = _png_size(data)
        else:
            # Text stays text (searchable, smaller); no date, so equal input gives equal bytes.
            with _RC_LOCK, matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "agentsearch"}):
                fig.savefig(buffer, format="svg", dpi=cfg.dpi, metadata={"Date": None})
            data = buffer.getvalue()
        return data, width, height
