"""Documents as a sender gives them: the model the API, the MCP server and a JSON Lines file check each one with,
and a JSON Lines file read whole before anything of it is sent.

Usage::

    docs = parse_jsonl(Path("corpus.jsonl").read_text())    # [DocumentIn, ...]; a bad line raises with its number
    DocumentIn(id="q4", title="Q4", text="Revenue grew ...", metadata={"year": 2024})
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, Field, ValidationError, field_validator

from agentsearch.pipeline.security.document_access import DocumentAccess, reserved_key_problem
from agentsearch.pipeline.security.storable import NotStorable, loads_checked

MAX_DOCUMENT_CHARS = 1_000_000


class DocumentIn(BaseModel):
    id: str = Field(min_length=1, max_length=400)
    title: str = Field("", max_length=2000)
    text: str = Field(min_length=1, max_length=MAX_DOCUMENT_CHARS)
    metadata: dict[str, Any] = Field(default_factory=dict)
    access: DocumentAccess | None = Field(None, description='Who finds it in a team collection: {"groups": [...]}, '
                                                            "members of any of them (none: every member).")

    @field_validator("id", mode="before")
    @classmethod
    def _id_as_text(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int) else value

    @field_validator("metadata")
    @classmethod
    def _no_reserved_key(cls, value: dict[str, Any]) -> dict[str, Any]:
        problem = reserved_key_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("text")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("text must not be blank")
        return value


class IngestError(ValueError):
    pass


def parse_jsonl(text: str) -> list[DocumentIn]:
    """Every line checked as the API checks a document, before anything is sent: a file with a bad line anywhere
    is refused whole (with that line's number), so nothing of it is ingested and the fixed file can be sent again."""
    docs: list[DocumentIn] = []
    first_line: dict[str, int] = {}
    # split("\n"), not splitlines(): JSON strings may hold U+2028 and friends, which splitlines() breaks on.
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.rstrip("\r")
        if not line.strip():
            continue
        try:
            doc = DocumentIn.model_validate(loads_checked(line))
        except json.JSONDecodeError as exc:
            raise IngestError(f"line {number}: not valid JSON ({exc.msg})") from None
        except NotStorable as exc:
            raise IngestError(f"line {number}: {exc}") from None
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "document"
            raise IngestError(f"line {number}: {where}: {first['msg']}") from None
        # One request refuses a repeated id; a file sent in several requests must not let the later copy win.
        if doc.id in first_line:
            raise IngestError(f"line {number}: id {doc.id!r} repeats line {first_line[doc.id]}")
        first_line[doc.id] = number
        docs.append(doc)
    if not docs:
        raise IngestError("no documents found")
    return docs
