"""Schema of the ``code`` section of ``params.yaml``."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class CodeParams(BaseModel):
    """``code:`` section. Unknown keys are rejected."""

    model_config = ConfigDict(extra="forbid")
