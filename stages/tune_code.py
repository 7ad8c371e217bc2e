"""DVC stage ``tune_code@<variant>``: learning rate (and InfoNCE's initial temperature)
chosen on the validation repositories with the shared protocol (``contrastlab.tuning``).

Every variant gets the same budget (``code.tune.trials`` finished trials, Hyperband pruning);
trial 0 is the variant's declared configuration. A trial trains one run per seed of
``code.tune.seeds`` (disjoint from the final seeds) of at most ``code.tune.epochs`` epochs; its
objective is the mean over seeds of the best validation Rank@10 (with its standard error),
reported to the pruner after each seed. A variant with an empty search space (the
from-scratch ablations) is not tuned: its declared configuration is scored once the same
way and is the choice. Test functions are never read. Writes
``reports/tuned/code/<V>.json`` (read by ``train_code@<V>``), the trial history
``reports/plots/tune/code/<V>.csv`` and the study journal
``reports/tune/code/<V>/journal.log`` (resumes after an interruption).
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import pandas as pd
from pathlib import Path

from contrastlab.cli import run_stage
from contrastlab.io import write_csv, write_json
from contrastlab.params import load_params
from contrastlab.tracking import stage_run
from contrastlab.training.code import prepare_targets, train_code
from contrastlab.tuning import TuneResult, run_study, study_history, tune_kwargs, write_tuned
from contrastlab.training.code_inputs import load_code_data



def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--variant", required=True)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--functions", default="data/code/functions.parquet")
    ap.add_argument("--splits", default="data/code/splits.parquet")
    ap.add_argument("--teacher", default="data/code/teacher")
    ap.add_argument("--tuned", default="reports/tuned/code")
    ap.add_argument("--history", default="reports/plots/tune/code")
    ap.add_argument("--journal", default="reports/tune/code")
    args = ap.parse_args(argv)
    code = load_params(args.params).code
    if args.variant not in code.variants:
        raise KeyError(f"{args.params}: code.variants has no {args.variant!r}")
    v = code.variants[args.variant]
    data, hidden = load_code_data(args.functions, args.splits, args.teacher)
    targets = prepare_targets(data, code.target.centre, code.target.whiten_eps)
    t = code.tune
    fixed = {"loss": v.loss, "residual": v.residual, "model": code.model.model_dump(),
             "train": code.train.model_dump(exclude={"seeds", "device", "threads", "workers"}),
             "target": code.target.model_dump(), "epochs": t.epochs, "seeds": t.seeds}
    declared = {"lr": v.lr or code.train.lr,
                "temperature": v.temperature or code.train.init_temperature}
    default = {k: declared[k] for k in v.search if k in declared}

    def objective(choices: dict, report=None):
        scores = []
        for k, seed in enumerate(t.seeds, start=1):
            s = train_code(data, hidden, v.loss, code.model, code.train, None, targets=targets,
                           seed=seed, lr=choices.get("lr"),
                           temperature=choices.get("temperature"), residual=v.residual,
                           epochs=t.epochs, progress=False)
            scores.append(float(s["best_val_rank_at_10"]))
            if report is not None and k < len(t.seeds):
                report(k, float(np.mean(scores)))  # may raise optuna.TrialPruned
        se = float(np.std(scores, ddof=1) / np.sqrt(len(scores))) if len(scores) > 1 else 0.0
        return float(np.mean(scores)), se

    out_dir = Path(args.journal) / args.variant
    with stage_run("code", f"tune_code@{args.variant}", {"variant": args.variant, **fixed}) as tr:
        if v.search:
            res = run_study(track="code", variant=args.variant, space=v.search,
                            objective=objective, out_dir=out_dir, fixed=fixed, tracker=tr,
                            default=default or None, **tune_kwargs(t))
        else:  # nothing to search: the declared configuration, scored once, is the choice
            write_json(out_dir / "study.json", {
                "study": None, "variant": args.variant,
                "note": "empty search space: the declared configuration, scored once"})
            mean, se = objective({})
            res = TuneResult(study_name="none", best_params={}, best_value=mean, best_trial=0,
                             n_complete=1, n_failed=0, direction="maximize", best_se=se)
    write_tuned(Path(args.tuned) / f"{args.variant}.json", res, track="code",
                variant=args.variant, objective="val_rank_at_10", space=v.search,
                n_trials=t.trials if v.search else 1)
    if v.search:
        hist = study_history(track="code", variant=args.variant, space=v.search,
                             out_dir=out_dir, storage=t.storage, fixed=fixed)
    else:
        hist = pd.DataFrame({"trial": [0], "state": ["COMPLETE"], "value": [res.best_value],
                             "best_so_far": [res.best_value], "se": [res.best_se]})
    write_csv(Path(args.history) / f"{args.variant}.csv", hist)
    print(f"tune_code@{args.variant}: best val R@10 {res.best_value:.2%} with {res.best_params}")
    return 0


if __name__ == "__main__":
    sys.exit(run_stage(main))
