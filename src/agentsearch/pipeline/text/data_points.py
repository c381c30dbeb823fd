"""Numbers in text with what they measure: money, percentages and energy quantities, each tied to its period
("Q4 2025", "third quarter of 2024", "full-year 2025") or, failing that, to the metric before it ("Adjusted
EBITDA"). Percentages after "up", "down", "rose", ... are changes, labelled "Q4 2025 vs Q4 2024".
``choose_series`` keeps the largest set that shares a unit, sorted in time when all are periods.

Usage::

    points = extract_data_points("Q4 2025 revenue reached $412 million, up 18% from Q4 2024 [1].")
    # [DataPoint(label="Q4 2025", value=412000000.0, unit="USD", ...),
    #  DataPoint(label="Q4 2025 vs Q4 2024", value=18.0, unit="% change", ...)]
    choose_series(points)      # the USD values, in time order
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from agentsearch.pipeline.text import STOPWORDS, split_sentences

_YEAR = r"((?:19|20)\d{2})"
_ORDINALS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "1st": 1, "2nd": 2, "3rd": 3, "4th": 4}
# Most specific first: a span claimed by an earlier pattern is not matched again by a later one ("Q4 2025" is not
# also the year "2025").
_PERIODS: list[tuple[re.Pattern[str], Callable[[re.Match[str]], str]]] = [
    (re.compile(rf"\bQ([1-4])\s*(?:FY\s*)?{_YEAR}\b", re.I), lambda m: f"Q{m[1]} {m[2]}"),
    (re.compile(rf"\b{_YEAR}\s*Q([1-4])\b", re.I), lambda m: f"Q{m[2]} {m[1]}"),
    (
        re.compile(rf"\b(first|second|third|fourth|1st|2nd|3rd|4th)[\s-]+quarter(?:\s+of)?\s+{_YEAR}\b", re.I),
        lambda m: f"Q{_ORDINALS[m[1].lower()]} {m[2]}",
    ),
    (re.compile(rf"\bH([12])\s*{_YEAR}\b"), lambda m: f"H{m[1]} {m[2]}"),
    (
        re.compile(rf"\b(first|second|1st|2nd)\s+half(?:\s+of)?\s+{_YEAR}\b", re.I),
        lambda m: f"H{_ORDINALS[m[1].lower()]} {m[2]}",
    ),
    # A full year is the year itself; a fiscal year may not be the calendar year, so it keeps its "FY".
    (re.compile(rf"\bfull[\s-]year\s+{_YEAR}\b", re.I), lambda m: m[1]),
    (re.compile(rf"\b(?:fiscal(?:\s+year)?|FY)\s*{_YEAR}\b", re.I), lambda m: f"FY {m[1]}"),
    (re.compile(rf"(?<![\d.,$€£])\b{_YEAR}\b(?![.,]?\d|\s*%)"), lambda m: m[1]),
]
_PERIOD_ORDER = {"Q1": 1.0, "Q2": 2.0, "H1": 2.5, "Q3": 3.0, "Q4": 4.0, "H2": 4.5, "FY": 5.0}
# A period right after one of these is what a value is compared with, not the value's own period.
_BASELINE_BEFORE = re.compile(r"\b(?:from|than|versus|vs\.?|compared\s+(?:with|to)|over|against)\s+(?:the\s+)?$", re.I)

_NUM = r"(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
_SCALE = r"(?:\s*(trillion|billion|million|thousand|bn|mn|tn|[mkb])\b)?"
_SCALES = {"thousand": 1e3, "k": 1e3, "million": 1e6, "mn": 1e6, "m": 1e6, "billion": 1e9, "bn": 1e9, "b": 1e9,
           "trillion": 1e12, "tn": 1e12}
_CURRENCIES = {"$": "USD", "us$": "USD", "€": "EUR", "£": "GBP", "usd": "USD", "eur": "EUR", "gbp": "GBP",
               "dollars": "USD", "euro": "EUR", "euros": "EUR", "pounds": "GBP"}
_MONEY_SYMBOL = re.compile(rf"(US\$|\$|€|£)\s?{_NUM}{_SCALE}", re.I)
_MONEY_CODE = re.compile(rf"\b(USD|EUR|GBP)\s?{_NUM}{_SCALE}")
_MONEY_WORDS = re.compile(rf"(?<![\w$€£.,]){_NUM}{_SCALE}\s*(dollars|euros?|pounds|USD|EUR|GBP)\b", re.I)
_PERCENT = re.compile(rf"(?<![\w.,]){_NUM}\s?(%|percent\b|per\s+cent\b)", re.I)
_ENERGY = re.compile(rf"(?<![\w.,]){_NUM}\s?(kWh|MWh|GWh|TWh|kW|MW|GW|TW)\b")
_PER = re.compile(r"^\s*(?:per|/)\s*([A-Za-z]+)")
_CHANGE_BEFORE = re.compile(
    r"\b(?:up|down|rose|rise|rising|fell|fall|falling|grew|grow|growth|gain(?:ed)?|increased?|decreased?|declined?"
    r"|jumped|dropped|drop|plus|minus|improved|climbed|slipped)(?:\s+(?:by|of))?\s*$",
    re.I,
)
_CHANGE_AFTER = re.compile(r"^\s*(?:higher|lower|more|less|increase|decrease|growth|rise|drop|up|down)\b", re.I)
CITATION = re.compile(r"\[(\d+)\]")
_CLAUSE_BREAK = re.compile(r"[,;:()]")
_TOKEN = re.compile(r"[^\W\d_][\w&'-]*", re.UNICODE)
# Words that never name a metric: verbs of reporting and change, hedges, and bare calendar words.
_NOT_METRIC = STOPWORDS | {
    "was", "were", "is", "are", "reached", "totaled", "totalled", "totalling", "grew", "rose", "fell", "stood",
    "came", "amounted", "reported", "posted", "generated", "recorded", "increased", "decreased", "declined", "ended",
    "hit", "climbed", "dropped", "achieved", "earned", "added", "saw", "had", "up", "down", "about", "around",
    "roughly", "approximately", "nearly", "almost", "some", "estimated", "expected", "reaching", "reach", "rising",
    "quarter", "year", "month", "half", "full-year", "fiscal", "an", "a",
    "increase", "decrease", "rise", "growth", "compared", "versus", "vs", "while", "whereas", "per", "usually",
    "typically", "passed", "exceeded", "below", "beyond", "including", "driven", "unchanged", "ending", "completing",
}


@dataclass(frozen=True)
class DataPoint:
    """One value found in text, in the unit's base (dollars, not millions) with the label it is charted under."""

    label: str
    value: float
    unit: str  # "USD", "EUR", "GBP", "USD per share", "%", "% change", "MW", ...
    text: str  # as written: "$412 million"
    period: str | None = None
    metric: str = ""
    source: int | None = None  # the n of the [n] citation the value came with


@dataclass(frozen=True)
class _Span:
    start: int
    end: int
    label: str
    baseline: bool = False


def _number(raw: str) -> float:
    return float(raw.replace(",", ""))


def _periods(sentence: str) -> list[_Span]:
    taken: list[tuple[int, int]] = []
    found: list[_Span] = []
    for pattern, label in _PERIODS:
        for m in pattern.finditer(sentence):
            if any(m.start() < end and start < m.end() for start, end in taken):
                continue
            taken.append((m.start(), m.end()))
            found.append(_Span(m.start(), m.end(), label(m), bool(_BASELINE_BEFORE.search(sentence[: m.start()]))))
    return sorted(found, key=lambda s: s.start)


@dataclass(frozen=True)
class _Value:
    start: int
    end: int
    value: float
    unit: str
    text: str


def _values(sentence: str) -> list[_Value]:
    found: list[_Value] = []
    for m in _MONEY_SYMBOL.finditer(sentence):
        found.append(_Value(m.start(), m.end(), _number(m[2]) * _SCALES.get((m[3] or "").lower(), 1.0),
                            _CURRENCIES[m[1].lower()], m[0]))
    for m in _MONEY_CODE.finditer(sentence):
        found.append(_Value(m.start(), m.end(), _number(m[2]) * _SCALES.get((m[3] or "").lower(), 1.0),
                            _CURRENCIES[m[1].lower()], m[0]))
    for m in _MONEY_WORDS.finditer(sentence):
        found.append(_Value(m.start(), m.end(), _number(m[1]) * _SCALES.get((m[2] or "").lower(), 1.0),
                            _CURRENCIES[m[3].lower()], m[0]))
    for m in _PERCENT.finditer(sentence):
        found.append(_Value(m.start(), m.end(), _number(m[1]), "%", m[0]))
    for m in _ENERGY.finditer(sentence):
        found.append(_Value(m.start(), m.end(), _number(m[1]), m[2], m[0]))
    kept: list[_Value] = []
    for value in sorted(found, key=lambda v: (v.start, -(v.end - v.start))):
        if kept and value.start < kept[-1].end:
            continue  # overlapping forms of one amount ("US$5 million" also holds "$5 million")
        kept.append(value)
    result = []
    for value in kept:
        unit = value.unit
        per = _PER.match(sentence[value.end :])
        if unit in _CURRENCIES.values() and per:
            unit = f"{unit} per {per[1]}"
            value = _Value(value.start, value.end + per.end(), value.value, unit, value.text + per[0])
        elif unit == "%" and (_CHANGE_BEFORE.search(sentence[max(0, value.start - 24) : value.start])
                              or _CHANGE_AFTER.match(sentence[value.end :])):
            value = _Value(value.start, value.end, value.value, "% change", value.text)
        result.append(value)
    return result


def _metric(sentence: str, start: int, end: int, periods: list[_Span], after: str) -> str:
    """The few words naming what a value measures: the clause before it ("Adjusted EBITDA was"), else after it."""
    text = sentence[start:end]
    for span in periods:  # blank out periods inside the clause, keeping offsets
        lo, hi = max(span.start, start), min(span.end, end)
        if lo < hi:
            text = text[: lo - start] + " " * (hi - lo) + text[hi - start :]
    tokens = _TOKEN.findall(text)
    while tokens and tokens[-1].lower() in _NOT_METRIC:
        tokens.pop()
    picked: list[str] = []
    while tokens and tokens[-1].lower() not in _NOT_METRIC and len(picked) < 3:
        picked.insert(0, tokens.pop())
    if not picked:
        following = _TOKEN.findall(after[:40])
        if following and following[0].lower() not in _NOT_METRIC:
            picked = following[:1]
    return " ".join(picked)


def extract_data_points(text: str, source: int | None = None) -> list[DataPoint]:
    """Every labelled value in ``text``, sentence by sentence, in reading order.

    ``source`` is the citation number for values of a sentence without its own ``[n]`` marker (a source document).
    """
    points: list[DataPoint] = []
    for sentence in split_sentences(text):
        cited = CITATION.findall(sentence)
        sentence_source = int(cited[-1]) if cited else source
        clean = CITATION.sub(lambda m: " " * len(m[0]), sentence)  # keep offsets, drop the markers
        periods = _periods(clean)
        values = _values(clean)
        own: list[str | None] = []
        for i, value in enumerate(values):
            prev_end = values[i - 1].end if i > 0 else 0
            next_start = values[i + 1].start if i + 1 < len(values) else len(clean)
            # The nearest period with no other value in between: before it in the same sentence part ("In Q4 2025,
            # revenue was $412 million"), or after it in the same clause ("$318 million in Q3 2024"), where a
            # baseline ("up 18% from Q4 2024") is what the value is compared with, not its own period.
            candidates = [
                (value.start - p.end, p)
                for p in periods
                if prev_end <= p.start and p.end <= value.start and ";" not in clean[p.end : value.start]
            ]
            candidates += [
                (p.start - value.end, p)
                for p in periods
                if value.end <= p.start and p.end <= next_start and not p.baseline
                and not _CLAUSE_BREAK.search(clean, value.end, p.start)
            ]
            own.append(min(candidates, key=lambda c: c[0])[1].label if candidates else None)
        for i, value in enumerate(values):
            period = own[i]
            prev_end = values[i - 1].end if i > 0 else 0
            breaks = [m.end() for m in _CLAUSE_BREAK.finditer(clean, prev_end, value.start)]
            clause_start = max([prev_end, *breaks])
            metric = _metric(clean, clause_start, value.start, periods, clean[value.end :])
            if value.unit == "% change":
                # The change belongs to the period of the value before it and is measured against a later period.
                subject = own[i - 1] if i > 0 and own[i - 1] else period
                if subject is None:
                    before = [p for p in periods if p.end <= value.start and not p.baseline]
                    subject = before[-1].label if before else None
                after = [p for p in periods if p.start >= value.end and p.label != subject]
                baseline = after[0].label if after else None
                label = (f"{subject} vs {baseline}" if subject and baseline else
                         f"{subject or baseline} change" if subject or baseline else
                         f"{metric} change" if metric else "")
                period = subject
            else:
                label = period or (metric[:1].upper() + metric[1:] if metric else "")
            if not label:
                continue  # a number with nothing to name it would be a bar without meaning
            points.append(DataPoint(label=label, value=value.value, unit=value.unit, text=value.text.strip(),
                                    period=period, metric=metric.lower(), source=sentence_source))
    return points


_UNIT_PRIORITY = {"USD": 0, "EUR": 0, "GBP": 0, "%": 2, "% change": 3}
_KIND_PRIORITY = {"quarter": 0, "year": 1, "other": 2}


def kind_of(point: DataPoint) -> str:
    """Values comparable on one axis: quarters (and halves) with quarters, years with years, named metrics apart."""
    if point.unit == "% change" or not point.period or point.label != point.period:
        return "other"
    return "quarter" if point.period[0] in "QH" else "year"


def choose_series(points: Iterable[DataPoint], max_points: int = 12) -> list[DataPoint]:
    """The largest group of comparable values: one unit, and either all quarters, all years or all named metrics
    (money before energy before percentages on a tie). One value per label, in time order for periods."""
    groups: dict[tuple[str, str], list[DataPoint]] = {}
    for point in points:
        groups.setdefault((point.unit, kind_of(point)), []).append(point)
    if not groups:
        return []
    order = list(groups)
    best = min(
        order,
        key=lambda k: (-len({p.label for p in groups[k]}), _UNIT_PRIORITY.get(k[0], 1), _KIND_PRIORITY[k[1]],
                       order.index(k)),
    )
    seen: set[str] = set()
    series: list[DataPoint] = []
    for point in groups[best]:
        if point.label not in seen:
            seen.add(point.label)
            series.append(point)
    series = series[:max_points]
    if best[1] != "other":
        series.sort(key=_period_key)
    return series


def _period_key(point: DataPoint) -> tuple[int, float]:
    parts = (point.period or "").split()
    if len(parts) == 2:
        return int(parts[1]), _PERIOD_ORDER.get(parts[0], 5.0)
    return int(parts[0]), 5.0
