"""Schema of the ``report`` section of ``params.yaml``."""

from __future__ import annotations

from pydantic import Field

from ..tuning.space import Strict


class ReportParams(Strict):
    """``report:`` section. Unknown keys are rejected."""

    title: str = Field("contrastlab: loss comparison", min_length=1,
                       description="Heading of comparison.md and index.html.")
    digits: int = Field(3, ge=1, le=6, description="Decimals shown for metrics in tables.")
    headline: dict[str, list[str]] = Field(
        default_factory=lambda: {"graph": ["logreg_acc_mean"], "code": ["rank_at_10", "mrr"],
                                 "multilabel": ["macro_f1"]},
        description="Per track, the metrics of each variant's JSON copied to "
                    "reports/summary.json, the pipeline's only declared DVC metrics file "
                    "(what `dvc exp show` lists); a track not named here is left out.")
