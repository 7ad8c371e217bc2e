"""Schema of the ``multilabel`` section of ``params.yaml``."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class MultilabelParams(BaseModel):
    """``multilabel:`` section. Unknown keys are rejected."""

    model_config = ConfigDict(extra="forbid")
