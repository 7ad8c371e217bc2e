"""DVC stage ``finetune_evaluate``: the comparison table with clustered CIs, and the index.

Reads every variant's per-query arrays (``reports/metrics/finetune/items/<variant>.npz``)
and builds, per split (a: unseen submissions of seen problems; b: unseen problems) and
metric, the table of :func:`contrastlab.finetune.evaluate.table`: means over seeds and
queries, bias-corrected 95 % intervals from a bootstrap that resamples problems (clusters)
and seeds (``n - 1`` of ``n``), the Model Confidence Set of the best, Holm-corrected tests
against the strongest baseline (the baseline row with the best validation kNN problem x tier
purity). The within-problem tier comparison (:func:`contrastlab.finetune.evaluate.tier_tables`:
same-tier AUC, nearest same-problem neighbour's tier, one-token mutants of another tier, with
the tier-blind reference and the ceiling as rows; the headline) is computed from every row's
stored embeddings (``data/finetune/runs/<row>/``). Then writes the FAISS index of ``finetune.index_variant`` (first seed) with its
encoder and logs both to MLflow (``mlflow.pytorch`` model + ``index/`` artifacts).

Outputs: ``reports/metrics/finetune/summary.json`` and ``reports/metrics/finetune/tier_items.npz``
(per-query tier metrics, ``<row>/<split>/<metric>`` ``[S, Q]``; committed) and
``data/finetune/index/``.
"""

import io
from pathlib import Path

import numpy as np
import pandas as pd

from _dvc import run

from contrastlab.cli import stage_parser
from contrastlab.finetune.evaluate import summarize_variants, tier_tables
from contrastlab.finetune.index import log_to_mlflow, write_variant_index
from contrastlab.io import atomic_path, write_json
from contrastlab.params import load_params
from contrastlab.tracking import variant_run


def main(argv: list[str] | None = None) -> int:
    ap = stage_parser(__doc__, "--data", "--metrics-dir", "--runs-dir", "--index")
    args = ap.parse_args(argv)
    ft = load_params(args.params).finetune
    df = pd.read_parquet(args.data)
    out = summarize_variants(ft, df, args.metrics_dir)
    out["tier"], tier_items = tier_tables(ft, df, args.runs_dir, args.metrics_dir)
    with atomic_path(Path(args.metrics_dir) / "tier_items.npz") as tmp:
        buf = io.BytesIO()
        np.savez_compressed(buf, **tier_items)
        Path(tmp).write_bytes(buf.getvalue())
    write_json(Path(args.metrics_dir) / "summary.json", out)
    write_variant_index(ft, df, args.runs_dir, args.index)
    kmax, names = max(ft.eval.knn_k), out["variants"]
    a, b = (out["tables"][s][f"knn{kmax}_pxt"] for s in ("a", "b"))  # not a row name (metric)
    with variant_run("finetune", "evaluation", {"variants": names, "baseline": out["baseline"]},
                     stage="finetune_evaluate") as tracker:
        tracker.log_metrics({f"a_knn{kmax}_pxt_{v}": a[v]["mean"] for v in names})
        tracker.log_metrics({f"{s}_wp_auc_{v}": out["tier"]["tables"][s]["wp_auc"][v]["mean"]
                             for s in ("a", "b") for v in out["tier"]["rows"]})
        if tracker.active:
            print(f"finetune_evaluate: MLflow model {log_to_mlflow(args.index)}")
    ta, tb = (out["tier"]["tables"][s]["wp_auc"] for s in ("a", "b"))
    for v in out["tier"]["rows"]:
        print(f"{v:>10}: within-problem same-tier AUC  a {ta[v]['mean']:.3f} [{ta[v]['ci_low']:.3f}, "
              f"{ta[v]['ci_high']:.3f}]  b {tb[v]['mean']:.3f} [{tb[v]['ci_low']:.3f}, {tb[v]['ci_high']:.3f}]")
    for v in names:
        print(f"{v:>10}: kNN@{kmax} problem x tier  a {a[v]['mean']:.3f} [{a[v]['ci_low']:.3f}, "
              f"{a[v]['ci_high']:.3f}]  b {b[v]['mean']:.3f} [{b[v]['ci_low']:.3f}, {b[v]['ci_high']:.3f}]")
    return 0


if __name__ == "__main__":
    run(main)
