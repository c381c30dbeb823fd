"""Artifact storage: each artifact's bytes are stored once, in the database, and travel by reference.

Usage::

    store = ArtifactStore(db, max_bytes=20 * 1024 * 1024)
    store = ArtifactStore.of(services)           # the process's database, AGENTSEARCH_ARTIFACT_MAX_BYTES
    ref = store.save(job_id, artifact)           # ArtifactRef, the claim check the canvas carries
    row = store.get(job_id, "summary.txt")       # bytes and content type for the download endpoint

A job that was cancelled (or has ended) stores nothing more: ``save`` raises ``JobEnded``, decided in the insert's
own transaction (see ``save``), so a cancel that lands while an agent renders wins.
"""

from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from agentsearch.pipeline.agents.base import AgentArtifact
from agentsearch.pipeline.job.job_store import TERMINAL
from agentsearch.pipeline.platform.db import Database
from agentsearch.pipeline.platform.tables.jobs import ArtifactRow, JobRow
from agentsearch.pipeline.records.agent_runs import ArtifactRef
from agentsearch.pipeline.services import Services


class ArtifactTooLarge(ValueError):
    pass


class JobEnded(RuntimeError):
    """The job was cancelled or has ended: an artifact made for it now is refused."""


class ArtifactStore:
    def __init__(self, db: Database, max_bytes: int) -> None:
        self.db = db
        self.max_bytes = max_bytes

    @classmethod
    def of(cls, services: Services) -> ArtifactStore:
        """The store in the services' database, holding each artifact to ``artifact_max_bytes``. The job's, not the
        services': the artifacts are a job's, and the services stand below the job."""
        return cls(services.db, services.settings.artifact_max_bytes)

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
                        select(ArtifactRow).where(ArtifactRow.job_id == job_uuid,
                                                  ArtifactRow.filename == artifact.filename)
                    )
                    if row is None:
                        row = ArtifactRow(job_id=job_uuid, **values)
                        s.add(row)
                    else:
                        for key, value in values.items():
                            setattr(row, key, value)
                    s.flush()
                    self._refuse_if_ended(s, job_uuid, artifact.filename)
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

    @staticmethod
    def _refuse_if_ended(s, job_uuid: uuid.UUID, filename: str) -> None:
        """Raise ``JobEnded`` (rolling the write back) if the job has ended; else hold it from ending until commit.

        Read after the artifact's row is written, in the same transaction, the job row held: on PostgreSQL with a
        share lock, which a cancel's update waits for (``JobStore.cancel`` then removes the committed artifact);
        on SQLite the write already holds the database's one write lock, so no cancel commits in between. Either
        the cancel is seen here, or it comes after this commit and takes the artifact with it: a cancelled job
        never keeps an artifact, whatever the timing. Checked at the agent's start only, a cancel landing during
        the rendering left its artifact stored.
        """
        status = s.scalar(select(JobRow.status).where(JobRow.id == job_uuid).with_for_update(read=True))
        if status in TERMINAL:
            raise JobEnded(f"job {status}: artifact {filename!r} not stored")

    def get(self, job_id: str, filename: str) -> ArtifactRow | None:
        with self.db.session() as s:
            return s.scalar(
                select(ArtifactRow).where(ArtifactRow.job_id == uuid.UUID(job_id), ArtifactRow.filename == filename)
            )

    def for_job(self, job_id: str) -> dict[str, ArtifactRow]:
        with self.db.session() as s:
            rows = s.scalars(select(ArtifactRow).where(ArtifactRow.job_id == uuid.UUID(job_id))).all()
            return {str(r.id): r for r in rows}
