"""DVC stage ``finetune_evaluate``: the comparison table with clustered CIs, and the index.

Reads every variant's per-query arrays (``reports/metrics/finetune/items/<variant>.npz``)
and builds, per split (a: unseen submissions of seen problems; b: unseen problems) and
metric, the table of :func:`contrastlab.finetune.evaluate.table`: means over seeds and
queries, bias-corrected 95 % intervals from a bootstrap that resamples problems (clusters)
and seeds (``n - 1`` of ``n``), the Model Confidence Set of the best, Holm-corrected tests
against the strongest baseline (the baseline row with the best validation kNN problem x tier
purity). Then writes the FAISS index of ``finetune.index_variant`` (first seed) with its
encoder and logs both to MLflow (``mlflow.pytorch`` model + ``index/`` artifacts).

Outputs: ``reports/metrics/finetune/summary.json`` (committed) and ``data/finetune/index/``.
"""

from pathlib import Path

import pandas as pd

from _dvc import run

from contrastlab.cli import stage_parser
from contrastlab.finetune.evaluate import summarize_variants
from contrastlab.finetune.index import log_to_mlflow, write_variant_index
from contrastlab.io import write_json
from contrastlab.params import load_params
from contrastlab.tracking import variant_run


def main(argv: list[str] | None = None) -> int:
    ap = stage_parser(__doc__, "--data", "--metrics-dir", "--runs-dir", "--index")
    args = ap.parse_args(argv)
    ft = load_params(args.params).finetune
    df = pd.read_parquet(args.data)
    out = summarize_variants(ft, df, args.metrics_dir)
    write_json(Path(args.metrics_dir) / "summary.json", out)
    write_variant_index(ft, df, args.runs_dir, args.index)
    kmax, names = max(ft.eval.knn_k), out["variants"]
    a, b = (out["tables"][s][f"knn{kmax}_pxt"] for s in ("a", "b"))
    with variant_run("finetune", "evaluation", {"variants": names, "baseline": out["baseline"]},
                     stage="finetune_evaluate") as tracker:
        tracker.log_metrics({f"a_knn{kmax}_pxt_{v}": a[v]["mean"] for v in names})
        if tracker.active:
            print(f"finetune_evaluate: MLflow model {log_to_mlflow(args.index)}")
    for v in names:
        print(f"{v:>10}: kNN@{kmax} problem x tier  a {a[v]['mean']:.3f} [{a[v]['ci_low']:.3f}, "
              f"{a[v]['ci_high']:.3f}]  b {b[v]['mean']:.3f} [{b[v]['ci_low']:.3f}, {b[v]['ci_high']:.3f}]")
    return 0


if __name__ == "__main__":
    run(main)
