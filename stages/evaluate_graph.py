"""DVC stage ``evaluate_graph@<variant>``: linear probes on the frozen encoder's embeddings.

For every seed's embeddings (from ``train_graph@<variant>``): the standard probe
(logistic regression, C chosen on the 500 validation nodes) and the notebook's probe
(``nn.Linear``, 200 Adam steps), both scored on the 1000 test nodes of the public split.
Writes ``reports/metrics/graph/<variant>.json`` (flat: per-seed accuracies, mean, sample
std over seeds, ``time_s`` = training wall seconds per run) and a 2-D PCA of the first
seed's embeddings with class labels, ``reports/data/graph/<variant>_pca.csv``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from contrastlab.cli import run_stage
from contrastlab.data.cora import load_cora
from contrastlab.evaluation.probe import logreg_probe, notebook_probe
from contrastlab.io import write_csv, write_json
from contrastlab.params import load_params
from contrastlab.tracking import stage_run


def _mean_std(xs: list[float]) -> tuple[float, float]:
    a = np.asarray(xs, dtype=float)
    return float(a.mean()), float(a.std(ddof=1)) if len(a) > 1 else 0.0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--variant", required=True)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--data", default="data/graph/planetoid")
    ap.add_argument("--train", default="data/graph/train")
    ap.add_argument("--metrics", default="reports/metrics/graph")
    ap.add_argument("--report-data", default="reports/data/graph")
    args = ap.parse_args(argv)
    g = load_params(args.params).graph
    torch.set_num_threads(g.threads)
    data, _ = load_cora(args.data)
    tdir = Path(args.train) / args.variant
    emb_path = tdir / "embeddings.safetensors"
    if not emb_path.exists():
        raise FileNotFoundError(f"{emb_path}: missing (run `dvc repro train_graph@{args.variant}`)")
    from safetensors.torch import load_file

    embs = load_file(str(emb_path))["embeddings"]
    info = json.loads((tdir / "info.json").read_text())
    seeds, times = info["seeds"], info["time_s_per_seed"]
    metrics: dict[str, float] = {}
    lr_acc, nb_acc = [], []
    with stage_run("graph", f"evaluate_graph@{args.variant}", g.probe) as tracker:
        for k, (seed, e) in enumerate(zip(seeds, embs)):
            a = logreg_probe(e, data.y, data.train_mask, data.val_mask, data.test_mask,
                             c_grid=g.probe.c_grid, normalize=g.probe.normalize)
            b = notebook_probe(e, data.y, data.train_mask, data.test_mask,
                               steps=g.probe.notebook_steps, lr=g.probe.notebook_lr, seed=seed)
            lr_acc.append(a["test_acc"])
            nb_acc.append(b["test_acc"])
            metrics[f"logreg_acc_seed{seed}"] = a["test_acc"]
            metrics[f"logreg_val_acc_seed{seed}"] = a["val_acc"]
            metrics[f"notebook_acc_seed{seed}"] = b["test_acc"]
            tracker.log_metrics({"logreg_acc": a["test_acc"], "notebook_acc": b["test_acc"]},
                                step=k)
        metrics["logreg_acc_mean"], metrics["logreg_acc_std"] = _mean_std(lr_acc)
        metrics["notebook_acc_mean"], metrics["notebook_acc_std"] = _mean_std(nb_acc)
        metrics["time_s"], metrics["time_s_std"] = _mean_std(times)
        metrics["n_seeds"] = len(seeds)
        metrics["epochs"] = info["epochs"]
        tracker.log_metrics({k: v for k, v in metrics.items() if "seed" not in k})
    metrics = {k: round(v, 6) if isinstance(v, float) else v for k, v in metrics.items()}
    write_json(f"{args.metrics}/{args.variant}.json", metrics)

    from sklearn.decomposition import PCA

    xy = PCA(n_components=2, random_state=0).fit_transform(embs[0].double().numpy())
    write_csv(f"{args.report_data}/{args.variant}_pca.csv",
              pd.DataFrame({"pc1": xy[:, 0].round(5), "pc2": xy[:, 1].round(5),
                            "label": data.y.numpy(), "seed": seeds[0]}))
    print(f"{args.variant}: logreg {metrics['logreg_acc_mean']:.4f} ± {metrics['logreg_acc_std']:.4f}"
          f", notebook {metrics['notebook_acc_mean']:.4f} ± {metrics['notebook_acc_std']:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(run_stage(main))
