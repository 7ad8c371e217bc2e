"""DVC stage ``tune_graph@<variant>``: an equal-budget Optuna study on the validation nodes.

Searches ``graph.variants.<variant>.search`` with ``graph.tune.trials`` finished trials (the
same for every variant; Musgrave et al., ECCV 2020) under the tuning protocol of
:mod:`contrastlab.tuning` (protocol 2): trial 0 is the variant's declared (default)
configuration, the TPE sampler seed is derived per variant, and the pruner
(``graph.tune.pruner``, Hyperband by default; Li et al., JMLR 2018) may stop a trial early.
Each trial trains the GCN with the trial's configuration for the seeds of ``graph.tune.seeds``
(>= 3, disjoint from the final seeds) one after another, scores each frozen encoder by the
linear probe's accuracy on the 500 validation nodes of the public split (the test nodes are
never read), reports the running mean after each seed (step = seeds done) to the pruner and
returns ``(mean, standard error)`` over the seeds. Writes:

- ``reports/tune/graph/<variant>/journal.log``: the study (Optuna journal; DVC keeps it with
  ``persist: true``, so a rerun after an interruption continues where it stopped);
- ``reports/tuned/graph/<variant>.json``: the chosen hyperparameters, read by ``train_graph``;
- ``reports/plots/tune/graph/<variant>.csv``: the trial history (value, best so far, params).

MLflow: one parent run ``tune_graph@<variant>`` with a nested run per trial.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import torch

from contrastlab.cli import run_stage
from contrastlab.data.planetoid import load_planetoid
from contrastlab.io import write_csv
from contrastlab.params import load_params
from contrastlab.tracking import stage_run
from contrastlab.training.graph import default_choices, fit_and_probe, graph_run_config
from contrastlab.tuning import run_study, study_history, tune_kwargs, write_tuned


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--variant", required=True)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--data", default="data/graph/planetoid")
    ap.add_argument("--study-dir", default="reports/tune/graph")
    ap.add_argument("--tuned", default="reports/tuned/graph")
    ap.add_argument("--plots", default="reports/plots/tune/graph")
    args = ap.parse_args(argv)
    g = load_params(args.params).graph
    base = graph_run_config(g, args.variant)
    space = g.variants[args.variant].search
    torch.set_num_threads(g.threads)
    data, _ = load_planetoid(args.data, g.dataset)
    tune = g.tune
    fixed = {"config": base.flat(), "probe": g.probe.model_dump(), "seeds": tune.seeds,
             "objective": "val_acc"}

    def objective(choices: dict, report=None):
        cfg = base.with_choices(choices)
        accs = []
        for k, s in enumerate(tune.seeds, start=1):
            accs.append(fit_and_probe(data, cfg, s, g.probe)["val_acc"])
            if report is not None and k < len(tune.seeds):
                report(k, float(np.mean(accs)))  # may raise optuna.TrialPruned
        se = float(np.std(accs, ddof=1) / np.sqrt(len(accs))) if len(accs) > 1 else 0.0
        return float(np.mean(accs)), se

    out_dir = f"{args.study_dir}/{args.variant}"
    logged = {"variant": args.variant, "tune": tune.model_dump(), "base": base.flat(),
              "search": {k: v.model_dump(exclude_none=True) for k, v in space.items()}}
    with stage_run("graph", f"tune_graph@{args.variant}", logged) as tracker:
        if space:
            res = run_study(track="graph", variant=args.variant, space=space,
                            objective=objective, out_dir=out_dir, fixed=fixed,
                            tracker=tracker, default=default_choices(base, space),
                            **tune_kwargs(tune))
        else:  # nothing to search: the declared configuration, scored once, is the choice
            from contrastlab.tuning import TuneResult

            res = TuneResult(study_name="none", best_params={}, best_value=objective({})[0],
                             best_trial=0, n_complete=1, n_failed=0, direction="maximize")
        tracker.log_metrics({"best_val_acc": res.best_value, "n_complete": res.n_complete,
                             "n_failed": res.n_failed})
        tracker.log_params({f"chosen.{k}": v for k, v in res.best_params.items()})
    write_tuned(f"{args.tuned}/{args.variant}.json", res, track="graph", variant=args.variant,
                objective="linear-probe accuracy on the 500 validation nodes",
                space=space, n_trials=tune.trials)
    if space:
        hist = study_history(track="graph", variant=args.variant, space=space, out_dir=out_dir,
                             storage=tune.storage, fixed=fixed)
        write_csv(f"{args.plots}/{args.variant}.csv", hist)
    else:
        import pandas as pd

        write_csv(f"{args.plots}/{args.variant}.csv",
                  pd.DataFrame({"trial": [0], "state": ["COMPLETE"], "value": [res.best_value],
                                "best_so_far": [res.best_value]}))
    print(f"tune_graph@{args.variant}: best val acc {res.best_value:.4f} "
          f"(trial {res.best_trial}, {res.n_complete} complete, {res.n_failed} failed): "
          f"{res.best_params}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(run_stage(main))
