"""DVC stage ``baselines_graph``: what any self-supervised encoder must beat on Cora.

Through the same linear probe as the trained variants (logistic regression on the 140
training nodes, ``C`` from the wide ``graph.probe.c_grid`` chosen on the 500 validation nodes
and interior to the grid, accuracy on the 1000 test nodes):

- ``raw_features``: the bag-of-words node features, row-normalised (Kipf & Welling, ICLR
  2017, Sec. 5.1), the probe's input normalisation (``graph.baselines.normalize``) chosen
  with ``C`` on validation (deterministic: one run);
- ``sgc``: Simplified Graph Convolution features ``S^K X`` (Wu et al., ICML 2019, Eq. 5-8;
  ``S = D~^{-1/2}(A+I)D~^{-1/2}``) of the row-normalised features, ``K`` in
  ``graph.baselines.sgc_k`` chosen on validation with ``C`` and the normalisation
  (deterministic: one run);
- ``random_gcn``: the GCN encoder at its random initialisation, never trained, for every
  seed of ``graph.final.seeds`` (a randomly initialised GCN is a strong baseline on
  citation graphs; Velickovic et al., "Deep Graph Infomax", ICLR 2019, Sec. 4.3).

Writes ``reports/metrics/graph/baselines.json`` (mean, 95% CI, per-seed accuracies, the
validation choices and validation accuracy ``val_acc``, mean over seeds for ``random_gcn``:
the report names the baseline with the best ``val_acc`` the strongest) and ``reports/data/graph/baselines_test_pred.csv`` (predicted class per
test node: ``raw_features``, ``sgc`` and ``random_gcn_seed_<k>`` columns).
"""

from __future__ import annotations

import argparse
import sys

from contrastlab.cli import run_stage
from contrastlab.evaluation.graph_baselines import run_baselines
from contrastlab.io import write_csv, write_json
from contrastlab.params import load_params


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--data", default="data/graph/planetoid")
    ap.add_argument("--metrics", default="reports/metrics/graph")
    ap.add_argument("--report-data", default="reports/data/graph")
    args = ap.parse_args(argv)
    out, pred = run_baselines(load_params(args.params).graph, args.data)
    write_json(f"{args.metrics}/baselines.json", out)
    write_csv(f"{args.report_data}/baselines_test_pred.csv", pred)
    for k, v in out.items():
        print(f"baselines_graph {k}: {v['logreg_acc_mean']:.4f} "
              f"[{v['logreg_acc_ci_low']:.4f}, {v['logreg_acc_ci_high']:.4f}]", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(run_stage(main))
