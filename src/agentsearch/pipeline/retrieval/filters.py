"""Metadata filters: a small JSON language over a document's metadata, checked when built and compiled to a Milvus
boolean expression over the collection's ``metadata`` JSON field.

Each node of a filter holds exactly one operator: ``eq``, ``ne`` (``{"key", "value"}``), ``in``
(``{"key", "values"}``), ``range`` (``{"key", "gt"|"gte"|"lt"|"lte"}``: numbers, or dates as ``YYYY-MM-DD``),
``exists`` (``{"key"}``), ``and``/``or`` (a list of nodes) and ``not`` (a node). The key ``published`` is the
document's publication date as recency scoring reads it: ``published``, else ``published_date``, else ``date``.

Values never become expression text as they were sent: ``compile`` gives a template with ``{p0}``-style
placeholders and the parameters apart (the shape of pymilvus's ``filter`` + ``filter_params``), and ``expression``
writes each parameter as a Milvus literal (strings quoted, with every character the expression grammar treats
specially escaped), because Milvus Lite parses no templates. Keys match a strict pattern and are written as they
are, never escaped. The tree's depth, its number of nodes and each ``in`` list are bounded.

Usage::

    spec = MetadataFilter.model_validate({"and": [
        {"eq": {"key": "region", "value": "emea"}},
        {"range": {"key": "published", "gte": "2024-01-01"}},
    ]})
    spec.compile().template   # '(metadata["region"] == {p0} and (... metadata["published"] >= {p1} ...))'
    spec.expression()         # the same with the literals written in: what VectorStore hands Milvus
    spec.matches({"region": "emea", "published": "2024-05-02"})      # True: the same rule, in Python
    filter_problems({"range": {"key": "n"}})   # [(("range",), "a range needs at least one of gt, gte, ...", ...)]
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from datetime import date, timedelta
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainValidator,
    StrictStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)

from agentsearch.pipeline.retrieval import metadata_index
from agentsearch.pipeline.retrieval.access_field import ACCESS_FIELD, ACCESS_KEY, access_clause
from agentsearch.pipeline.retrieval.milvus_expressions import CompiledFilter

MAX_DEPTH = 8  # nodes from the root to the deepest leaf
MAX_NODES = 64  # operators in the whole filter
MAX_IN_VALUES = 100
MAX_VALUE_CHARS = 1000
MAX_KEY_CHARS = 64
# Integers beyond 2**53 do not survive JSON's doubles: a bound there would not mean what was sent.
MAX_SAFE_INT = 2**53
KEY_PATTERN = re.compile(rf"[A-Za-z_][A-Za-z0-9_-]{{0,{MAX_KEY_CHARS - 1}}}")
DATE_PATTERN = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")  # ASCII digits only: \d takes any script's digits
OPERATORS = ("eq", "ne", "in", "range", "exists", "and", "or", "not")
METADATA_FIELD = "metadata"
PUBLISHED_KEYS = metadata_index.PUBLISHED_KEYS


def _checked_key(key: str) -> str:
    if not KEY_PATTERN.fullmatch(key):
        raise ValueError(
            f"a key is 1-{MAX_KEY_CHARS} letters, digits, '_' or '-', starting with a letter or '_'"
        )
    return key


def _scalar(value: Any) -> str | bool | int | float:
    """A value compared with: a JSON string, boolean or finite number, taken as it is (never coerced)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        if abs(value) > MAX_SAFE_INT:
            raise ValueError(f"an integer value must be within ±{MAX_SAFE_INT}")
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError("a number must be finite")
        return value
    if isinstance(value, str):
        if len(value) > MAX_VALUE_CHARS:
            raise ValueError(f"a value may be at most {MAX_VALUE_CHARS} characters")
        if "\x00" in value:
            raise ValueError("a value may not contain a NUL character")
        return value
    raise ValueError("a value is a string, a number or a boolean")


Key = Annotated[StrictStr, AfterValidator(_checked_key)]
# One validator for the whole union: an error names the value's own path, not pydantic's union members.
Scalar = Annotated[str | bool | int | float, PlainValidator(_scalar)]


def _bound(value: Any) -> int | float | date:
    """A range bound as sent: a JSON number, or a date written ``YYYY-MM-DD``; nothing else."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError("a range bound is a number or a date (YYYY-MM-DD)")
    if isinstance(value, str):
        if not DATE_PATTERN.fullmatch(value):
            raise ValueError("a range bound is a number or a date (YYYY-MM-DD)")
        try:
            day = date.fromisoformat(value)
        except ValueError:
            raise ValueError(f"{value} is not a calendar date") from None
        if day == date.max:
            raise ValueError("a date bound must be before 9999-12-31")
        return day
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError("a range bound must be a finite number")
    if isinstance(value, int) and abs(value) > MAX_SAFE_INT:
        raise ValueError(f"an integer bound must be within ±{MAX_SAFE_INT}")
    return value


Bound = Annotated[int | float | date, BeforeValidator(_bound)]


class Comparison(BaseModel):
    """``eq`` / ``ne``: the key's value equals (or differs from) ``value``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    key: Key
    value: Scalar


class Membership(BaseModel):
    """``in``: the key's value is one of ``values``, or is a list holding one of them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    key: Key
    values: list[Scalar] = Field(min_length=1, max_length=MAX_IN_VALUES)


class Presence(BaseModel):
    """``exists``: the document has the key, with a value other than null."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    key: Key


class Range(BaseModel):
    """``range``: numbers compared as numbers; dates compared by day against ISO strings (``2024-03-01`` or
    ``2024-03-01T10:00:00Z``), so ``lte: 2024-03-01`` keeps that whole day."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    key: Key
    gt: Bound | None = None
    gte: Bound | None = None
    lt: Bound | None = None
    lte: Bound | None = None

    @field_validator("gte", "lt", "lte")
    @classmethod
    def _consistent(cls, value: int | float | date | None, info: ValidationInfo) -> int | float | date | None:
        # Checked field by field (in order), so the error names the bound at fault, not the whole range.
        if value is None:
            return value
        if info.field_name == "gte" and info.data.get("gt") is not None:
            raise ValueError("use gt or gte, not both")
        if info.field_name == "lte" and info.data.get("lt") is not None:
            raise ValueError("use lt or lte, not both")
        for name, other in info.data.items():
            if name != "key" and other is not None and isinstance(other, date) != isinstance(value, date):
                raise ValueError(f"a range compares numbers or dates, not both: {name} is "
                                 f"{'a date' if isinstance(other, date) else 'a number'}")
        return value

    @model_validator(mode="after")
    def _bounded(self) -> Range:
        if all(b is None for b in (self.gt, self.gte, self.lt, self.lte)):
            raise ValueError("a range needs at least one of gt, gte, lt, lte")
        return self

    @model_serializer(mode="wrap")
    def _bounds_set(self, handler) -> dict[str, Any]:
        return {k: v for k, v in handler(self).items() if v is not None}

    def bounds(self) -> list[tuple[str, int | float | date]]:
        return [(op, b) for op, b in (("gt", self.gt), ("gte", self.gte), ("lt", self.lt), ("lte", self.lte))
                if b is not None]


def _shape_problem(raw: Any) -> tuple[tuple[str | int, ...], str] | None:
    """Where a raw filter goes deeper than ``MAX_DEPTH`` or past ``MAX_NODES`` operators, looked at before the
    tree is validated (a huge tree is refused without being walked by pydantic); None when it is within bounds."""
    nodes = 0
    stack: list[tuple[Any, tuple[str | int, ...], int]] = [(raw, (), 1)]
    while stack:
        node, path, depth = stack.pop()
        if not isinstance(node, dict):
            continue
        if depth > MAX_DEPTH:
            return path, f"a filter may nest at most {MAX_DEPTH} levels deep"
        nodes += 1
        if nodes > MAX_NODES:
            return (), f"a filter may hold at most {MAX_NODES} operators"
        for op in ("and", "or"):
            children = node.get(op)
            if isinstance(children, list):
                if len(children) > MAX_NODES:
                    return (*path, op), f"a filter may hold at most {MAX_NODES} operators"
                stack.extend((child, (*path, op, i), depth + 1) for i, child in enumerate(children))
        if "not" in node:
            stack.append((node["not"], (*path, "not"), depth + 1))
    return None


def _field(key: str) -> str:
    # The key matched KEY_PATTERN: no quote or backslash can be in it.
    return f'{METADATA_FIELD}["{_checked_key(key)}"]'


class MetadataFilter(BaseModel):
    """One node of a filter: exactly one operator. Built from JSON with ``model_validate`` (aliases ``in``,
    ``and``, ``or``, ``not``); dumps back to the same JSON with only the operator that is set."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, serialize_by_alias=True)

    eq: Comparison | None = None
    ne: Comparison | None = None
    in_: Membership | None = Field(None, alias="in")
    range: Range | None = None
    exists: Presence | None = None
    and_: list[MetadataFilter] | None = Field(None, alias="and", min_length=1, max_length=MAX_NODES)
    or_: list[MetadataFilter] | None = Field(None, alias="or", min_length=1, max_length=MAX_NODES)
    not_: MetadataFilter | None = Field(None, alias="not")

    @model_validator(mode="before")
    @classmethod
    def _within_bounds(cls, raw: Any) -> Any:
        problem = _shape_problem(raw)
        if problem is not None:
            path, message = problem
            raise ValueError(f"{message} (at {'.'.join(map(str, path)) or 'the top'})")
        return raw

    @model_validator(mode="after")
    def _one_operator(self) -> MetadataFilter:
        present = [op for op in OPERATORS if self._operand(op) is not None]
        if len(present) != 1:
            raise ValueError(f"a filter node holds exactly one operator of {', '.join(OPERATORS)}"
                             + (f"; this one holds {', '.join(present)}" if present else ""))
        return self

    @model_serializer(mode="wrap")
    def _operator_only(self, handler) -> dict[str, Any]:
        return {k: v for k, v in handler(self).items() if v is not None}

    def _operand(self, op: str) -> Any:
        return getattr(self, f"{op}_" if op in ("in", "and", "or", "not") else op)

    @property
    def operator(self) -> str:
        return next(op for op in OPERATORS if self._operand(op) is not None)

    def as_json(self) -> dict[str, Any]:
        """The filter as the JSON it was built from, normalised (dates as ``YYYY-MM-DD``): a stable cache key."""
        return self.model_dump(mode="json")

    # -- Milvus ----------------------------------------------------------------------------------------------

    def compile(self, fields: frozenset[str] = frozenset()) -> CompiledFilter:
        """The template and its parameters. ``fields``: the collection's plain fields that stand for a metadata
        key (``access_field.ACCESS_FIELD`` for the document groups); a clause they can answer is written on the
        field, which Milvus evaluates over the column instead of parsing each row's JSON."""
        params: dict[str, Any] = {}

        def param(value: Any) -> str:
            name = f"p{len(params)}"
            params[name] = value
            return "{" + name + "}"

        return CompiledFilter(self._template(param, fields), params)

    def expression(self, fields: frozenset[str] = frozenset()) -> str:
        """The Milvus boolean expression (``compile(fields).expression()``)."""
        return self.compile(fields).expression()

    def scans(self, fields: frozenset[str] = frozenset()) -> bool:
        """Whether Milvus answers the filter by reading each row's metadata JSON (a clause on a key no field of
        ``fields`` stands for), rather than over plain columns alone."""
        return "metadata[" in self.compile(fields).template

    def _template(self, param: Callable[[Any], str], fields: frozenset[str] = frozenset(), positive: bool = True
                  ) -> str:
        op, operand = self.operator, self._operand(self.operator)
        if op in ("and", "or"):
            return "(" + f" {op} ".join(child._template(param, fields, positive) for child in operand) + ")"
        if op == "not":  # positive: an even number of `not` above (metadata_index writes its clauses for it)
            return f"not {operand._template(param, fields, not positive)}"
        if ACCESS_FIELD in fields and getattr(operand, "key", None) == ACCESS_KEY:
            # Digests of tokens, not values as sent: nothing of the caller's reaches the text unescaped.
            on_field = access_clause(op, getattr(operand, "values", None))
            if on_field is not None:
                return on_field
        indexed = _indexed(op, operand, fields, positive)
        if indexed is not None:
            return indexed
        if op == "exists":
            if operand.key == PUBLISHED_KEYS[0]:
                return "(" + " or ".join(f"exists {_field(k)}" for k in PUBLISHED_KEYS) + ")"
            return f"exists {_field(operand.key)}"
        if op in ("eq", "ne"):
            p = param(operand.value)
            symbol = "==" if op == "eq" else "!="
            return _on_key(operand.key, lambda f: f"{f} {symbol} {p}")
        if op == "in":
            values = list(operand.values)
            each = [param(v) for v in values]
            whole = param(values)
            # Milvus takes `in [...]` on a plain field only: on a JSON key it is a chain of ==. json_contains_any
            # is what matches a key that holds a list (tags) sharing a value with the list asked for.
            return _on_key(operand.key, lambda f: "(" + " or ".join(
                [f"{f} == {p}" for p in each] + [f"json_contains_any({f}, {whole})"]) + ")")
        parts = []
        for bound_op, bound in operand.bounds():
            symbol, value = _range_term(bound_op, bound)
            parts.append((symbol, param(value)))
        return _on_key(operand.key, lambda f: "(" + " and ".join(f"{f} {s} {p}" for s, p in parts) + ")")

    # -- the same rules in Python ------------------------------------------------------------------------------

    def matches(self, metadata: dict[str, Any]) -> bool:
        """Whether Milvus keeps a document with this metadata: the filter's rules in Python (tests check the
        service against it). A clause on a missing key is unknown, and ``not`` of unknown stays unknown."""
        return self._truth(metadata) is True

    def _truth(self, metadata: dict[str, Any]) -> bool | None:
        op, operand = self.operator, self._operand(self.operator)
        if op == "and":
            values = [child._truth(metadata) for child in operand]
            return False if False in values else (None if None in values else True)
        if op == "or":
            values = [child._truth(metadata) for child in operand]
            return True if True in values else (None if None in values else False)
        if op == "not":
            inner = operand._truth(metadata)
            return None if inner is None else not inner
        if op == "exists":
            keys = PUBLISHED_KEYS if operand.key == PUBLISHED_KEYS[0] else (operand.key,)
            return any(metadata.get(k) is not None for k in keys)
        value = _value_of(metadata, operand.key)
        if value is None:
            return None
        if op == "eq":
            return value == operand.value
        if op == "ne":
            return value != operand.value
        if op == "in":
            return value in operand.values or (isinstance(value, list) and any(v in operand.values for v in value))
        results = []
        for bound_op, bound in operand.bounds():
            symbol, limit = _range_term(bound_op, bound)
            if isinstance(limit, str) != isinstance(value, str) or isinstance(value, list | dict):
                return None  # Milvus orders a string against a number (or a list) as unknown; a boolean as 0 or 1
            results.append(_ORDER[symbol](value, limit))
        return all(results)


# What a search is filtered by: a filter the store compiles for the collection searched, or an expression as it is.
Filter = str | MetadataFilter

_ORDER: dict[str, Callable[[Any, Any], bool]] = {
    ">": lambda a, b: a > b, ">=": lambda a, b: a >= b, "<": lambda a, b: a < b, "<=": lambda a, b: a <= b,
}


def _range_term(op: str, bound: int | float | date) -> tuple[str, int | float | str]:
    """A bound as a comparison Milvus can make. A date becomes a string compared by day: a stored
    ``2024-03-01T10:00:00Z`` sorts after ``2024-03-01`` and before ``2024-03-02``, so "after the 1st" is ``>=`` the
    2nd and "up to the 1st" is ``<`` the 2nd."""
    if not isinstance(bound, date):
        return {"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}[op], bound
    if op == "gt":
        return ">=", (bound + timedelta(days=1)).isoformat()
    if op == "lte":
        return "<", (bound + timedelta(days=1)).isoformat()
    return (">=" if op == "gte" else "<"), bound.isoformat()


def _indexed(op: str, operand: Any, fields: frozenset[str], positive: bool) -> str | None:
    """The clause on the collection's indexed metadata fields (digests, numbers), None where they cannot say it."""
    if op == "range" and operand.key == PUBLISHED_KEYS[0] and metadata_index.DAY_FIELD in fields:
        return metadata_index.day_clause([_range_term(o, b) for o, b in operand.bounds()], positive)
    if op == "range" or metadata_index.TERMS_FIELD not in fields:
        return None
    values = list(operand.values) if op == "in" else [operand.value] if op in ("eq", "ne") else None
    return metadata_index.term_clause(op, operand.key, values, positive)


def _on_key(key: str, clause: Callable[[str], str]) -> str:
    """``clause`` on the key's field; for ``published``, on the first of the publication-date keys a document has."""
    if key != PUBLISHED_KEYS[0]:
        return clause(_field(key))
    alternatives = []
    for i, k in enumerate(PUBLISHED_KEYS):
        absent = [f"not exists {_field(earlier)}" for earlier in PUBLISHED_KEYS[:i]]
        # The last key goes unguarded: a document with no date at all leaves the clause unknown (as a missing
        # plain key does), not false, so `not` of it keeps it out too.
        present = [f"exists {_field(k)}"] if i < len(PUBLISHED_KEYS) - 1 else []
        alternatives.append("(" + " and ".join([*absent, *present, clause(_field(k))]) + ")")
    return "(" + " or ".join(alternatives) + ")"


def _value_of(metadata: dict[str, Any], key: str) -> Any:
    return metadata.get(key) if key != PUBLISHED_KEYS[0] else metadata_index.published_value(metadata)


def _message(error: Mapping[str, Any]) -> str:
    loc = error["loc"]
    if error["type"] == "extra_forbidden" and (len(loc) == 1 or isinstance(loc[-2], int) or loc[-2] == "not"):
        return f"unknown operator {loc[-1]!r}; a filter node holds one of {', '.join(OPERATORS)}"
    if error["type"] == "extra_forbidden":
        return f"unknown field {loc[-1]!r}"
    return error["msg"].removeprefix("Value error, ")


def filter_problems(raw: Any) -> list[tuple[tuple[str | int, ...], str, str]]:
    """What is wrong with a filter as sent, each as ``(path inside the filter, message, error type)``; empty when
    ``MetadataFilter.model_validate(raw)`` accepts it. Bounds are reported at the node that passes them."""
    problem = _shape_problem(raw)
    if problem is not None:
        return [(problem[0], problem[1], "value_error")]
    try:
        MetadataFilter.model_validate(raw)
    except ValidationError as exc:
        return [(tuple(e["loc"]), _message(e), e["type"]) for e in exc.errors()]
    return []


def parse_filter(raw: dict[str, Any] | MetadataFilter | None) -> MetadataFilter | None:
    """A filter from its JSON (None stays None); raises ``ValueError`` naming the first problem's path."""
    if raw is None or isinstance(raw, MetadataFilter):
        return raw
    problems = filter_problems(raw)
    if problems:
        path, message, _ = problems[0]
        raise ValueError(f"filter{''.join(f'[{p!r}]' for p in path)}: {message}")
    return MetadataFilter.model_validate(raw)
