"""DVC stage ``tune_multilabel@<variant>``: equal-budget Optuna search for one model variant.

The objective is the mean validation mAP over ``multilabel.tune.datasets`` (one training run
per data set, seed ``multilabel.tune.run_seed``; the test split is never read). Every variant
gets ``multilabel.tune.trials`` finished trials over the search space declared beside it in
``params.yaml`` (``multilabel.variants.<variant>.search``: temperature, learning rate,
masking rate, queue size). A variant without a search space (``logreg``, whose C is picked on
validation inside every run) gets a JSON with no params and no study.

Outputs: ``reports/tuned/multilabel/<variant>.json`` (chosen params; committed, read by
``train_multilabel``), ``reports/plots/tune/multilabel/<variant>.csv`` (trial history),
``reports/tune/multilabel/<variant>/journal.log`` (the Optuna study; persist, committed so a
fresh clone does not retune and an interrupted run continues).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from contrastlab.errors import InputError, UnknownNameError
from contrastlab.cli import run_stage
from contrastlab.io import write_csv, write_json
from contrastlab.params import load_params
from contrastlab.tracking import stage_run


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--variant", required=True)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--data-dir", default="data/multilabel")
    ap.add_argument("--tuned-dir", default="reports/tuned/multilabel")
    ap.add_argument("--plots-dir", default="reports/plots/tune/multilabel")
    ap.add_argument("--study-dir", default="reports/tune/multilabel")
    args = ap.parse_args(argv)
    p = load_params(args.params)
    ml = p.multilabel
    variant = args.variant
    if variant not in ml.variants:
        raise UnknownNameError(f"{args.params}: multilabel.variants has no entry {variant!r}")
    from contrastlab.tuning import SearchDim, run_study, study_history, write_tuned

    space = {k: SearchDim(**v) for k, v in ml.variants[variant].search.items()}
    out_json = Path(args.tuned_dir) / f"{variant}.json"
    tune = ml.tune
    if not space:
        write_json(out_json, {"track": "multilabel", "variant": variant, "params": {},
                              "note": "no search space: nothing tuned here"})
        write_csv(Path(args.plots_dir) / f"{variant}.csv",
                  __import__("pandas").DataFrame({"trial": [], "value": [], "best_so_far": []}))
        (Path(args.study_dir) / variant).mkdir(parents=True, exist_ok=True)
        print(f"tune_multilabel@{variant}: no search space")
        return 0
    from safetensors.numpy import load_file

    from contrastlab.training.multilabel import make_config, run_seed

    data = {}
    for ds in tune.datasets:
        src = Path(args.data_dir) / ds
        if not (src / "meta.json").exists():
            raise FileNotFoundError(f"{src / 'meta.json'}: missing (run build_multilabel@{ds} first)")
        arrays = load_file(str(src / "data.safetensors"))
        arrays.pop("x_test"), arrays.pop("y_test")  # tuning never sees the test split
        arrays["x_test"], arrays["y_test"] = arrays["x_val"], arrays["y_val"]  # run_seed scores "test" = val
        data[ds] = (arrays, json.loads((src / "meta.json").read_text())["encoder"])
    fixed = {"datasets": list(tune.datasets), "run_seed": tune.run_seed,
             "train": ml.train.model_dump(), "variant": ml.variants[variant].model_dump(exclude={"search"})}

    def objective(choices: dict) -> float:
        vals = []
        for ds, (arrays, enc) in data.items():
            cfg = make_config(ml, ds, variant, enc, choices)
            vals.append(run_seed(arrays, cfg, tune.run_seed).metrics["val_map"])
        return float(sum(vals) / len(vals))

    t0 = time.perf_counter()
    with stage_run("multilabel", f"tune_multilabel@{variant}", {"space": ml.variants[variant].search,
                                                                 "tune": tune}) as tracker:
        res = run_study(track="multilabel", variant=variant, space=space, objective=objective,
                        n_trials=tune.trials, seed=tune.seed, out_dir=Path(args.study_dir) / variant,
                        storage=tune.storage, startup_trials=tune.startup_trials, fixed=fixed,
                        tracker=tracker, progress=False)
        write_tuned(out_json, res, track="multilabel", variant=variant,
                    objective=f"mean validation mAP over {list(tune.datasets)}", space=space,
                    n_trials=tune.trials)
        hist = study_history(track="multilabel", variant=variant, space=space,
                             out_dir=Path(args.study_dir) / variant, storage=tune.storage, fixed=fixed)
        write_csv(Path(args.plots_dir) / f"{variant}.csv", hist)
    print(f"tune_multilabel@{variant}: best val mAP {res.best_value:.4f} with {res.best_params} "
          f"({res.n_complete} complete, {res.n_failed} failed; {time.perf_counter() - t0:.0f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(run_stage(main))
