"""What a backup's ``manifest.json`` holds, checked whole before a restore reads a byte of the dump.

A manifest is written by ``agentsearch.pipeline.operations.backup.make_backup``; one edited by hand, cut short or
written by something else is refused with every field that is missing or of the wrong kind named, so a restore never
starts on a manifest it cannot finish with. Keys it does not name are kept (a later version may add some).

Usage::

    problems = manifest_problems(json.loads(text))   # [] or ["files: field required", "rows.users: ..."]
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

# A file of the backup is named by a plain file name: the restore reads it from the backup directory itself.
FileName = Annotated[str, Field(pattern=r"^[^/\\\x00]+$")]


class BackupFile(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow")

    bytes: int = Field(ge=0)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


class Manifest(BaseModel):
    # Strict: a count written as "12" or a size as true is a manifest something else wrote, not one to trust.
    model_config = ConfigDict(strict=True, extra="allow")

    format: int
    agentsearch: str
    alembic_revision: str | None
    # Written as ISO 8601 text; strict mode alone would take only a datetime object.
    created_at: Annotated[datetime, Field(strict=False)]
    database: Literal["postgresql", "sqlite"]
    files: dict[FileName, BackupFile] = Field(min_length=1)
    rows: dict[str, Annotated[int, Field(ge=0)]]


def manifest_problems(manifest: Any) -> list[str]:
    """Each field of ``manifest`` (as read from JSON) that is missing or not what a backup writes, as
    ``"field.path: what is wrong"``; empty when the manifest is whole."""
    if not isinstance(manifest, dict):
        return [f"not a JSON object but {type(manifest).__name__}"]
    try:
        Manifest.model_validate(manifest)
    except ValidationError as exc:
        return [f"{'.'.join(map(str, e['loc'])) or 'manifest'}: {_said(e)}" for e in exc.errors()]
    return []


def _said(error: Any) -> str:
    """Pydantic's message, with "Field required" said as a manifest's reader would."""
    return "missing" if error["type"] == "missing" else error["msg"]
