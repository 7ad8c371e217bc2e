"""DVC stage ``train_graph@<variant>`` (and ``ablate_graph@<variant>``): final runs of a
variant's tuned configuration, each scored once on the test nodes.

Reads the chosen hyperparameters ``reports/tuned/graph/<variant>.json`` (from
``tune_graph@<variant>``) on top of ``graph.variants.<variant>`` / ``graph.train``, trains the
GCN for every seed of ``graph.final.seeds`` and evaluates each frozen encoder with the
standard linear probe (logistic regression, ``C`` chosen on the 500 validation nodes, accuracy
on the 1000 test nodes; Velickovic et al., ICLR 2019) and the notebook-style probe
(``nn.Linear``, Adam). With ``--ablation`` it reruns the same choices with
``graph.final.ablation_batch_nodes`` (default: all nodes in every loss batch) for
``graph.final.ablation_seeds`` and writes under ``.../ablation/``. With ``--default`` it runs
the variant's *untuned* configuration (``graph.variants.<variant>`` as declared; stage
``default_graph@<variant>``) on ``graph.final.default_seeds`` and writes under ``.../default/``: the
report's "default vs tuned" table.

Writes (all small, committed, ``cache: false``):

- ``reports/metrics/graph/<variant>.json``: per-seed accuracies, mean and 95% CI (bootstrap
  over seeds and test nodes, :mod:`contrastlab.evaluation.stats`), the chosen hyperparameters;
- ``reports/data/graph/<variant>_test_pred.csv``: the predicted class of every test node per
  seed (the report's paired tests use it);
- ``reports/plots/graph/<variant>.csv``: loss per epoch (mean and per seed);
- ``reports/data/graph/<variant>_pca.csv``: 2-D PCA of the first seed's embeddings.

MLflow: one run per variant (``variant_run``) with the whole configuration and the chosen
hyperparameters as params, the test metrics, the dataset (``log_input``), the history and
metrics files as artifacts, and a nested run per seed with its loss curve (step = epoch)
and accuracies. Wall times go to MLflow and the log only (they change on every run).
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import pandas as pd
import torch

from contrastlab.cli import run_stage
from contrastlab.data.planetoid import load_planetoid
from contrastlab.evaluation.stats import bootstrap_per_item, summarize
from contrastlab.io import write_csv, write_json
from contrastlab.params import load_params
from contrastlab.tracking import variant_run
from contrastlab.training.graph import fit_and_probe, graph_run_config
from contrastlab.tuning import read_tuned


def _digest(root: str, dataset: str) -> str:
    """SHA-256 prefix over the raw Planetoid files (the dataset's identity in MLflow)."""
    import hashlib
    from pathlib import Path

    h = hashlib.sha256()
    for f in sorted((Path(root) / dataset / "raw").glob("*")):
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def _cache_file(args, g, stage: str, cfg, seed: int):
    """Per-seed result file under ``--seed-cache``, keyed by the stage, the whole
    configuration, the probe and data paths (a changed configuration never reads a stale
    result), or ``None`` without a cache."""
    if not args.seed_cache:
        return None
    import hashlib
    import json
    from pathlib import Path

    key = json.dumps([stage, cfg.flat(), g.probe.model_dump(), str(args.data), seed],
                     sort_keys=True, default=str)
    h = hashlib.sha256(key.encode()).hexdigest()[:16]
    return Path(args.seed_cache) / f"{stage.replace('@', '_')}_seed{seed}_{h}.pt"


def _save_atomic(obj, path) -> None:
    import os

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    torch.save(obj, tmp)
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--variant", required=True)
    ap.add_argument("--ablation", action="store_true",
                    help="loss-batch ablation: graph.final.ablation_batch_nodes and ablation_seeds")
    ap.add_argument("--default", action="store_true",
                    help="the untuned (declared) configuration on graph.final.seeds")
    ap.add_argument("--seed-cache", default=None,
                    help="folder of per-seed results: a seed found there is not retrained, "
                    "a seed trained is saved there (runs of single seeds in parallel)")
    ap.add_argument("--only-seed", type=int, default=None,
                    help="train just this seed into --seed-cache and exit (no outputs)")
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--data", default="data/graph/planetoid")
    ap.add_argument("--tuned", default="reports/tuned/graph")
    ap.add_argument("--metrics", default="reports/metrics/graph")
    ap.add_argument("--report-data", default="reports/data/graph")
    ap.add_argument("--plots", default="reports/plots/graph")
    args = ap.parse_args(argv)
    g = load_params(args.params).graph
    base = graph_run_config(g, args.variant)
    if args.ablation and args.default:
        raise ValueError("--ablation and --default exclude each other")
    chosen = {} if args.default else read_tuned(f"{args.tuned}/{args.variant}.json")
    cfg = base.with_choices(chosen)
    seeds = g.final.seeds
    sub = "default/" if args.default else ""
    if args.default:
        seeds = g.final.default_seeds
        if not seeds:
            raise ValueError("graph.final.default_seeds is empty: the default runs are off")
    if args.ablation:
        cfg.train["batch_nodes"] = g.final.ablation_batch_nodes
        seeds, sub = g.final.ablation_seeds, "ablation/"
        if not seeds:
            raise ValueError("graph.final.ablation_seeds is empty: the ablation is off")
    torch.set_num_threads(g.threads)
    data, _ = load_planetoid(args.data, g.dataset)
    stage_name = f"{'ablate' if args.ablation else 'default' if args.default else 'train'}_graph@{args.variant}"
    if args.only_seed is not None:
        cached = _cache_file(args, g, stage_name, cfg, args.only_seed)
        if cached is None:
            raise ValueError("--only-seed needs --seed-cache")
        if args.only_seed not in seeds:
            raise ValueError(f"--only-seed {args.only_seed} is not among the seeds {seeds}")
        if not cached.exists():
            r = fit_and_probe(data, cfg, args.only_seed, g.probe, return_pred=True,
                              notebook=True, progress=True,
                              desc=f"{args.variant} seed {args.only_seed}")
            _save_atomic(r, cached)
        return 0
    stage = f"{'ablate' if args.ablation else 'default' if args.default else 'train'}_graph@{args.variant}"
    test_idx = torch.nonzero(data.test_mask).flatten().numpy()
    y_test = data.y[data.test_mask].numpy()
    preds, test_acc, val_acc, nb_acc, hist = {}, [], [], [], {"epoch": list(range(1, cfg.train["epochs"] + 1))}
    pca_emb = None
    cs: list[float] = []
    logged = {"variant": args.variant, "stage": stage, "seeds": seeds, **cfg.flat(),
              **{f"tuned.{k}": v for k, v in chosen.items()}}
    run_name = (f"{args.variant}-ablation" if args.ablation else
                f"{args.variant}-default" if args.default else args.variant)
    with variant_run("graph", run_name, logged, stage=stage) as tracker:
        tracker.log_dataset(g.dataset, digest=_digest(args.data, g.dataset),
                            source=str(args.data), context="training")
        for k, seed in enumerate(seeds):
            t0 = time.perf_counter()
            with tracker.seed_run(seed) as seed_tracker:
                cached = _cache_file(args, g, stage, cfg, seed)
                if cached is not None and cached.exists():
                    r = torch.load(cached, weights_only=False)
                    for ep, val in enumerate(r["losses"], start=1):
                        seed_tracker.log_metrics({"loss": val}, step=ep)
                else:
                    r = fit_and_probe(
                        data, cfg, seed, g.probe, return_pred=True, notebook=True,
                        progress=True, desc=f"{args.variant} seed {seed}",
                        on_epoch=lambda ep, val, t=seed_tracker: t.log_metrics(
                            {"loss": val}, step=ep))
                    if cached is not None:
                        _save_atomic(r, cached)
                seed_tracker.log_metrics({"logreg_acc": r["test_acc"],
                                          "logreg_val_acc": r["val_acc"],
                                          "time_s": time.perf_counter() - t0})
            preds[f"seed_{seed}"] = r["test_pred"]
            test_acc.append(r["test_acc"])
            val_acc.append(r["val_acc"])
            nb_acc.append(r["notebook_acc"])
            cs.append(r["C"])
            hist[f"loss_seed{seed}"] = r["losses"]
            if pca_emb is None:
                pca_emb = r["embeddings"]
            print(f"{stage} seed {seed}: val {r['val_acc']:.4f} test {r['test_acc']:.4f} "
                  f"({time.perf_counter() - t0:.1f} s)", flush=True)
        correct = np.stack([preds[f"seed_{s}"] == y_test for s in seeds]).astype(float)
        point, reps = bootstrap_per_item({args.variant: correct}, n_resamples=2000, seed=0)
        st = summarize(point, reps)[args.variant]
        metrics = {
            "variant": args.variant, "loss": cfg.loss, "n_seeds": len(seeds), "seeds": seeds,
            "n_test": int(len(y_test)), "epochs": cfg.train["epochs"],
            "batch_nodes": cfg.train["batch_nodes"],
            "logreg_acc_mean": st["mean"], "logreg_acc_ci_low": st["ci_low"],
            "logreg_acc_ci_high": st["ci_high"],
            "logreg_acc_std": float(np.std(test_acc, ddof=1)) if len(test_acc) > 1 else 0.0,
            "logreg_val_acc_mean": float(np.mean(val_acc)),
            "notebook_acc_mean": float(np.mean(nb_acc)),
            "probe_C": cs,
            "logreg_val_acc": val_acc,
            **{f"logreg_acc_seed{s}": a for s, a in zip(seeds, test_acc)},
            "tuned": chosen,
            "config": {k: v for k, v in cfg.flat().items()},
        }
        tracker.log_metrics({k: v for k, v in metrics.items()
                             if isinstance(v, float) and "seed" not in k})
        metrics = {k: round(v, 6) if isinstance(v, float) else v for k, v in metrics.items()}
        write_json(f"{args.metrics}/{sub}{args.variant}.json", metrics)
        write_csv(f"{args.report_data}/{sub}{args.variant}_test_pred.csv",
                  pd.DataFrame({"node": test_idx, "y": y_test, **preds}))
        df = pd.DataFrame(hist)
        df.insert(1, "loss", df[[c for c in df.columns if c.startswith("loss_seed")]].mean(axis=1))
        write_csv(f"{args.plots}/{sub}{args.variant}.csv", df.round(6))
        tracker.log_artifact(f"{args.plots}/{sub}{args.variant}.csv", "history")
        tracker.log_artifact(f"{args.metrics}/{sub}{args.variant}.json", "metrics")
    if not args.ablation and not args.default:
        from sklearn.decomposition import PCA

        xy = PCA(n_components=2, random_state=0).fit_transform(pca_emb.double().numpy())
        write_csv(f"{args.report_data}/{args.variant}_pca.csv",
                  pd.DataFrame({"pc1": xy[:, 0].round(5), "pc2": xy[:, 1].round(5),
                                "label": data.y.numpy(), "seed": seeds[0]}))
    print(f"{stage}: test acc {metrics['logreg_acc_mean']:.4f} "
          f"[{metrics['logreg_acc_ci_low']:.4f}, {metrics['logreg_acc_ci_high']:.4f}] "
          f"over {len(seeds)} seeds", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(run_stage(main))
