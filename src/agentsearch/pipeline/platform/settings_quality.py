"""The settings of a collection's quality (``agentsearch.pipeline.eval``): the size of a question set, how far a
figure may fall under a staged change, and how long a staged change's run may take. ``Settings`` inherits them, read
from the same ``AGENTSEARCH_*`` variables.

Usage::

    settings.quality_tolerance       # 0.02: a staged change is refused when a figure falls by more
    settings.quality_gate_timeout_s  # a staged change whose run passes this is not applied, with the reason
"""

from __future__ import annotations

from pydantic import BaseModel, Field


class QualitySettings(BaseModel):
    eval_set_size: int = Field(50, ge=1, le=500, description="Questions a collection's set is made with by default.")
    quality_tolerance: float = Field(
        0.02, ge=0.0, le=1.0, description="How far (absolute) a figure of the set may fall under a staged change "
        "before it is refused, for a collection whose admin set none.")
    quality_gate_timeout_s: float = Field(
        300.0, gt=0, description="How long a staged change's two runs (current and staged settings) may take; past "
        "it the change is not applied.")
    eval_run_timeout_s: float = Field(600.0, gt=0, description="How long one run on a collection's set may take.")
