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

The experiment itself is :func:`contrastlab.training.graph_final.run_final`.

MLflow: one run per variant (``variant_run``) with the whole configuration and the chosen
hyperparameters as params, the test metrics, the dataset (``log_input``), the history and
metrics files as artifacts, and a nested run per seed with its loss curve (step = epoch)
and accuracies. Wall times go to MLflow and the log only (they change on every run).
"""

from __future__ import annotations

import argparse
import sys

import torch

from contrastlab.cli import run_stage
from contrastlab.data.planetoid import load_planetoid
from contrastlab.io import write_csv, write_json
from contrastlab.params import load_params
from contrastlab.tracking import variant_run
from contrastlab.training.graph import graph_run_config
from contrastlab.training.graph_final import (dataset_digest, pca_frame, run_final,
                                              seed_cache_file, train_seed)
from contrastlab.tuning import read_tuned


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--variant", required=True)
    ap.add_argument("--ablation", action="store_true",
                    help="loss-batch ablation: graph.final.ablation_batch_nodes and ablation_seeds")
    ap.add_argument("--default", action="store_true",
                    help="the untuned (declared) configuration on graph.final.default_seeds")
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
    if args.ablation and args.default:
        raise ValueError("--ablation and --default exclude each other")
    chosen = {} if args.default else read_tuned(f"{args.tuned}/{args.variant}.json")
    cfg = graph_run_config(g, args.variant).with_choices(chosen)
    kind, seeds, sub, run_name = "train", g.final.seeds, "", args.variant
    if args.default:
        kind, seeds, sub, run_name = "default", g.final.default_seeds, "default/", f"{args.variant}-default"
    if args.ablation:
        cfg.train["batch_nodes"] = g.final.ablation_batch_nodes
        kind, seeds, sub, run_name = "ablate", g.final.ablation_seeds, "ablation/", f"{args.variant}-ablation"
    if not seeds:
        raise ValueError(f"graph.final.{'default_' if args.default else 'ablation_' if args.ablation else ''}"
                         "seeds is empty: these runs are off")
    torch.set_num_threads(g.threads)
    data, _ = load_planetoid(args.data, g.dataset)
    stage = f"{kind}_graph@{args.variant}"
    if args.only_seed is not None:  # one seed into the cache (seeds in parallel processes)
        cache = seed_cache_file(args.seed_cache, stage, cfg, g.probe, args.data, args.only_seed)
        if cache is None or args.only_seed not in seeds:
            raise ValueError(f"--only-seed needs --seed-cache and one of the seeds {seeds}")
        train_seed(data, cfg, args.only_seed, g.probe, cache=cache,
                   desc=f"{args.variant} seed {args.only_seed}")
        return 0
    logged = {"variant": args.variant, "stage": stage, "seeds": seeds, **cfg.flat(),
              **{f"tuned.{k}": v for k, v in chosen.items()}}
    with variant_run("graph", run_name, logged, stage=stage) as tracker:
        tracker.log_dataset(g.dataset, digest=dataset_digest(args.data, g.dataset),
                            source=str(args.data), context="training")
        res = run_final(data, cfg, seeds, g.probe, variant=args.variant, stage=stage,
                        chosen=chosen, tracker=tracker, cache_dir=args.seed_cache,
                        data_path=args.data)
        write_json(f"{args.metrics}/{sub}{args.variant}.json", res.metrics)
        write_csv(f"{args.report_data}/{sub}{args.variant}_test_pred.csv", res.test_pred)
        write_csv(f"{args.plots}/{sub}{args.variant}.csv", res.history)
        tracker.log_artifact(f"{args.plots}/{sub}{args.variant}.csv", "history")
        tracker.log_artifact(f"{args.metrics}/{sub}{args.variant}.json", "metrics")
    if kind == "train":
        write_csv(f"{args.report_data}/{args.variant}_pca.csv",
                  pca_frame(res.embeddings, data.y.numpy(), seeds[0]))
    m = res.metrics
    print(f"{stage}: test acc {m['logreg_acc_mean']:.4f} [{m['logreg_acc_ci_low']:.4f}, "
          f"{m['logreg_acc_ci_high']:.4f}] over {len(seeds)} seeds", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(run_stage(main))
