"""DVC stage ``baselines_graph``: what any self-supervised encoder must beat on Cora (raw
features, SGC propagated features, an untrained GCN) through the same linear probe as the
trained variants (rows and sources: :mod:`contrastlab.evaluation.graph_baselines`). Writes
``reports/metrics/graph/baselines.json`` (mean, 95% CI, per-seed accuracies, validation
choices and ``val_acc``: the report names the baseline with the best ``val_acc`` the
strongest) and ``reports/data/graph/baselines_test_pred.csv`` (predicted class per test node).
"""

from _dvc import run

from contrastlab.cli import stage_parser
from contrastlab.evaluation.graph_baselines import run_baselines
from contrastlab.io import write_csv, write_json
from contrastlab.params import load_params


def main(argv: list[str] | None = None) -> int:
    ap = stage_parser(__doc__, "--data", "--metrics", "--report-data")
    args = ap.parse_args(argv)
    out, pred = run_baselines(load_params(args.params).graph, args.data)
    write_json(f"{args.metrics}/baselines.json", out)
    write_csv(f"{args.report_data}/baselines_test_pred.csv", pred)
    for k, v in out.items():
        print(f"baselines_graph {k}: {v['logreg_acc_mean']:.4f} "
              f"[{v['logreg_acc_ci_low']:.4f}, {v['logreg_acc_ci_high']:.4f}]", flush=True)
    return 0


if __name__ == "__main__":
    run(main)
