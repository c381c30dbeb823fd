"""The settings of sources (``agentsearch.pipeline.sources``): the credentials' key, and the limits every read of a
source's server is held to. ``Settings`` inherits them, read from the same ``AGENTSEARCH_*`` variables.

The key is the operator's: a Fernet key (``python -c "from cryptography.fernet import Fernet;
print(Fernet.generate_key().decode())"``). To rotate it, the new key goes in ``AGENTSEARCH_SOURCES_KEY``, the old one
in ``AGENTSEARCH_SOURCES_PREVIOUS_KEYS``, and ``agentsearch sources rotate-key`` encrypts every source's credentials
with the new one; the old key is then dropped. No source's server is read for it.

Usage::

    settings.sources_key                 # SecretStr | None: without it, a source with credentials is refused
    settings.sources_max_item_bytes      # a page, entry or file past this is a failed item, never read whole
"""

from __future__ import annotations

from pydantic import BaseModel, Field, SecretStr


class SourceSettings(BaseModel):
    sources_key: SecretStr | None = Field(
        None, description="Fernet key the sources' credentials are encrypted with at rest (unset: no credentials).")
    sources_previous_keys: list[SecretStr] = Field(
        default_factory=list, description="Keys credentials may still be encrypted with, until rotate-key ran.")
    sources_max_item_bytes: int = Field(20_000_000, gt=0, description="The largest page, entry or file read.")
    sources_fetch_timeout_s: float = Field(20.0, gt=0, description="One request to a source's server, at most.")
    sources_max_redirects: int = Field(5, ge=0, le=20, description="Redirects followed for one request.")
    sources_run_lease_s: float = Field(
        3600.0, gt=0, description="How long a run holds its source: another run waits until it ends or this passes.")
    sources_tick_interval_s: float = Field(60.0, gt=0, description="How often due sources are looked for.")
    sources_min_schedule_s: int = Field(300, gt=0, description="The shortest schedule a source may have.")
