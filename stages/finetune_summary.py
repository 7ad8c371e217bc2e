"""DVC stage ``finetune_summary``: the fine-tuning tables with clustered CIs, from per-query arrays.

Reads every row's per-query arrays (``reports/metrics/finetune/items/<row>.npz``, stage
``finetune_encoder``/``finetune_baseline``) and the tier arrays (``tier_items.npz``, stage
``finetune_evaluate``) and builds, per split (a: unseen submissions of seen problems; b:
unseen problems) and metric, the table of :func:`contrastlab.finetune.evaluate.table`: means
over seeds and queries, bias-corrected 95 % intervals from a bootstrap that resamples
problems (clusters) and seeds (``n - 1`` of ``n``), the Model Confidence Set of the best,
Holm-corrected tests against the strongest baseline (the baseline row with the best
validation kNN problem x tier purity), and the within-problem tier tables
(:func:`contrastlab.finetune.evaluate.summary`). No embeddings needed: a change of the
statistics reruns this stage alone.

Output: ``reports/metrics/finetune/summary.json``. The GPU table (made outside the pipeline,
no tier arrays) is recomputed the same way under its preset, keeping its ``device`` record::

    python stages/finetune_summary.py --data data/finetune/humaneval/variants.parquet \\
        --metrics-dir reports/metrics/finetune_gpu --preset presets/finetune-gpu.yaml
"""

import json
from pathlib import Path

import pandas as pd

from _dvc import run

from contrastlab.cli import stage_parser
from contrastlab.finetune.evaluate import summary
from contrastlab.io import write_json
from contrastlab.params.presets import load_with_overrides
from contrastlab.tracking import variant_run


def main(argv: list[str] | None = None) -> int:
    ap = stage_parser(__doc__, "--data", "--metrics-dir")
    ap.add_argument("--preset", action="append", default=[], help="a preset merged over --params")
    args = ap.parse_args(argv)
    ft = load_with_overrides(args.params, args.preset).finetune
    out = summary(ft, pd.read_parquet(args.data), args.metrics_dir)
    path = Path(args.metrics_dir) / "summary.json"
    if path.exists() and "device" in (prev := json.loads(path.read_text(encoding="utf-8"))):
        out["device"] = prev["device"]  # where a table made outside the pipeline ran
    write_json(path, out)
    kmax, names = max(ft.eval.knn_k), out["variants"]
    a, b = (out["tables"][s][f"knn{kmax}_pxt"] for s in ("a", "b"))  # not a row name (metric)
    with variant_run("finetune", "evaluation", {"variants": names, "baseline": out["baseline"]},
                     stage="finetune_summary") as tracker:
        tracker.log_metrics({f"a_knn{kmax}_pxt_{v}": a[v]["mean"] for v in names})
        if "tier" in out:
            tracker.log_metrics({f"{s}_wp_auc_{v}": out["tier"]["tables"][s]["wp_auc"][v]["mean"]
                                 for s in ("a", "b") for v in out["tier"]["rows"]})
    if "tier" in out:
        ta, tb = (out["tier"]["tables"][s]["wp_auc"] for s in ("a", "b"))
        for v in out["tier"]["rows"]:
            print(f"{v:>10}: within-problem same-tier AUC  a {ta[v]['mean']:.3f} "
                  f"[{ta[v]['ci_low']:.3f}, {ta[v]['ci_high']:.3f}]  b {tb[v]['mean']:.3f} "
                  f"[{tb[v]['ci_low']:.3f}, {tb[v]['ci_high']:.3f}]")
    for v in names:
        print(f"{v:>10}: kNN@{kmax} problem x tier  a {a[v]['mean']:.3f} [{a[v]['ci_low']:.3f}, "
              f"{a[v]['ci_high']:.3f}]  b {b[v]['mean']:.3f} [{b[v]['ci_low']:.3f}, {b[v]['ci_high']:.3f}]")
    return 0


if __name__ == "__main__":
    run(main)
