"""Schema of the ``graph`` section of ``params.yaml``."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class GraphParams(BaseModel):
    """``graph:`` section. Unknown keys are rejected."""

    model_config = ConfigDict(extra="forbid")
