"""Schema of the ``report`` section of ``params.yaml``."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ReportParams(BaseModel):
    """``report:`` section. Unknown keys are rejected."""

    model_config = ConfigDict(extra="forbid")

    title: str = Field("contrastlab: loss comparison", min_length=1,
                       description="Heading of comparison.md and index.html.")
    digits: int = Field(3, ge=1, le=6, description="Decimals shown for metrics in tables.")
