"""Schema of the ``report`` section of ``params.yaml``."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class ReportParams(BaseModel):
    """``report:`` section. Unknown keys are rejected."""

    model_config = ConfigDict(extra="forbid")
