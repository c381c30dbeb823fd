"""Artifact storage: each artifact's bytes are stored once, in the database, and travel by reference.

Usage::

    store = ArtifactStore(db, max_bytes=20 * 1024 * 1024)
    ref = store.save(job_id, artifact)           # ArtifactRef, the claim check the canvas carries
    row = store.get(job_id, "summary.txt")       # bytes and content type for the download endpoint
"""

from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from pipeline.agents.base import AgentArtifact
from pipeline.db import ArtifactRow, Database
from pipeline.state import ArtifactRef


class ArtifactTooLarge(ValueError):
    pass


class ArtifactStore:
    def __init__(self, db: Database, max_bytes: int) -> None:
        self.db = db
        self.max_bytes = max_bytes

    def save(self, job_id: str, artifact: AgentArtifact) -> ArtifactRef:
        size = len(artifact.data)
        if size > self.max_bytes:
            raise ArtifactTooLarge(
                f"artifact {artifact.filename!r} is {size} bytes, over the limit of {self.max_bytes} bytes"
            )
        values = dict(
            agent_id=artifact.agent_id,
            type=artifact.type,
            filename=artifact.filename,
            content_type=artifact.content_type,
            size=size,
            data=artifact.data,
            metadata_=artifact.metadata,
        )
        job_uuid = uuid.UUID(job_id)
        # A task that runs twice (at-least-once delivery) replaces its artifact rather than adding one.
        for _ in range(2):
            try:
                with self.db.session() as s:
                    row = s.scalar(
                        select(ArtifactRow).where(ArtifactRow.job_id == job_uuid, ArtifactRow.filename == artifact.filename)
                    )
                    if row is None:
                        row = ArtifactRow(job_id=job_uuid, **values)
                        s.add(row)
                    else:
                        for key, value in values.items():
                            setattr(row, key, value)
                    s.flush()
                    return ArtifactRef(
                        id=str(row.id),
                        agent_id=artifact.agent_id,
                        type=artifact.type,
                        filename=artifact.filename,
                        content_type=artifact.content_type,
                        size=size,
                        metadata=artifact.metadata,
                    )
            except IntegrityError:
                continue  # the twin run inserted first; the second pass updates its row
        raise RuntimeError(f"could not store artifact {artifact.filename!r}")

    def get(self, job_id: str, filename: str) -> ArtifactRow | None:
        with self.db.session() as s:
            return s.scalar(
                select(ArtifactRow).where(ArtifactRow.job_id == uuid.UUID(job_id), ArtifactRow.filename == filename)
            )

    def for_job(self, job_id: str) -> dict[str, ArtifactRow]:
        with self.db.session() as s:
            rows = s.scalars(select(ArtifactRow).where(ArtifactRow.job_id == uuid.UUID(job_id))).all()
            return {str(r.id): r for r in rows}
