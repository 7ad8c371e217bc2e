"""DVC stage ``train_multilabel@<dataset>-<variant>``: final runs of one tuned variant.

For every seed in ``multilabel.seeds`` (in ``multilabel.train.workers`` worker processes):
train with the tuned hyperparameters (``reports/tuned/multilabel/<variant>.json``, chosen on
validation by ``tune_multilabel@<variant>``), early stopping and thresholds on the validation
split, then score the test split once. See ``contrastlab.training.multilabel``.

Outputs (all ``cache: false``, committed):
``reports/metrics/multilabel/<dataset>_<variant>.json`` (mean, ``_std`` and ``_seed<s>`` of
every metric, the tuned choices, steps), ``reports/metrics/multilabel/reps/<dataset>_<variant>.npz``
(bootstrap replicates of micro/macro-F1 at 0.5 and at the validation threshold and of mAP on
the shared draws of ``contrastlab.evaluation.stats.resample_indices(seed=0)``: the report's
CIs and paired tests), ``reports/plots/multilabel/<dataset>_<variant>.csv`` (training loss and
validation mAP per check, per seed). Wall times go to stdout and MLflow only.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from contrastlab.errors import InputError, UnknownNameError
from contrastlab.cli import run_stage
from contrastlab.io import atomic_path, write_csv, write_json
from contrastlab.params import load_params
from contrastlab.tracking import stage_run
from contrastlab.training.multilabel import make_config, run_seeds, summarize

N_RESAMPLES = 1000


def tuned_choices(path: Path) -> dict:
    """Tuned params of a variant ({} when the variant has no search space)."""
    from contrastlab.tuning import read_tuned

    return read_tuned(path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--loss", required=True, help="the variant name (multilabel.losses)")
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--data-dir", default="data/multilabel")
    ap.add_argument("--tuned-dir", default="reports/tuned/multilabel")
    ap.add_argument("--metrics-dir", default="reports/metrics/multilabel")
    ap.add_argument("--plots-dir", default="reports/plots/multilabel")
    args = ap.parse_args(argv)
    p = load_params(args.params)
    ml = p.multilabel
    ds, variant = args.dataset, args.loss
    cfg = make_config(ml, ds, variant)  # validates the names and the loss keywords first
    if cfg.loss is not None:
        from contrastlab.training.multilabel import resolve_loss

        try:
            resolve_loss(cfg.loss, cfg.loss_kwargs)
        except ValueError as e:
            raise InputError(f"{args.params}: multilabel.variants.{variant}.kwargs: {e}") from None
    src = Path(args.data_dir) / ds
    meta_path = src / "meta.json"
    if not meta_path.exists():
        raise FileNotFoundError(f"{meta_path}: missing (run build_multilabel@{ds} first)")
    import json

    meta = json.loads(meta_path.read_text())
    from safetensors.numpy import load_file

    data = load_file(str(src / "data.safetensors"))
    choices = tuned_choices(Path(args.tuned_dir) / f"{variant}.json")
    cfg = make_config(ml, ds, variant, meta["encoder"], choices)
    stage = f"train_multilabel@{ds}-{variant}"
    logged = {"dataset": ds, "variant": variant, "seeds": ml.seeds, "train": ml.train,
              "data": ml.data[ds], "variant_params": ml.variants[variant], "tuned": choices}
    with stage_run("multilabel", stage, logged) as tracker:
        t0 = time.perf_counter()
        results = run_seeds(data, cfg, ml.seeds, workers=ml.train.workers,
                            progress=lambda r: print(
                                f"{stage} seed {r.seed}: map={r.metrics['map']:.4f} micro_f1={r.metrics['micro_f1']:.4f} "
                                f"macro_f1_val_t={r.metrics['macro_f1_val_t']:.4f} {r.chosen} ({r.time_s:.1f}s)", flush=True))
        wall = time.perf_counter() - t0
        out = summarize(results)
        out["tuned"] = choices
        out["config"] = {"temperature": cfg.temperature if cfg.loss else None, "lr": cfg.lr,
                         "mask_rate": cfg.mask_rate, "queue": cfg.queue, "loss_kwargs": cfg.loss_kwargs,
                         "batch_size": cfg.batch_size, "max_steps": cfg.max_steps}
        out["n_train"], out["n_val"], out["n_test"] = (int(len(data[k])) for k in ("x_train", "x_val", "x_test"))
        from contrastlab.evaluation.multilabel import bootstrap_metric_reps
        from contrastlab.evaluation.stats import resample_indices

        draws = resample_indices(len(results), len(data["y_test"]), n_resamples=N_RESAMPLES, seed=0)
        reps = bootstrap_metric_reps(data["y_test"], np.stack([r.scores for r in results]),
                                     np.array([r.thresholds["global"] for r in results]), draws, cfg.threshold)
        with atomic_path(Path(args.metrics_dir) / "reps" / f"{ds}_{variant}.npz") as tmp:
            with open(tmp, "wb") as fh:
                np.savez_compressed(fh, **{k: v.astype(np.float32) for k, v in reps.items()})
        import pandas as pd

        rows = []
        for r in results:
            keys = list(r.curve)
            for i in range(len(r.curve[keys[0]])):
                rows.append({"seed": r.seed, **{k: r.curve[k][i] for k in keys}})
        write_csv(Path(args.plots_dir) / f"{ds}_{variant}.csv", pd.DataFrame(rows))
        write_json(Path(args.metrics_dir) / f"{ds}_{variant}.json", out)
        tracker.log_metrics({k: v for k, v in out.items() if isinstance(v, (int, float))} | {"time_s": wall})
    print(f"{stage}: micro-F1 {out['micro_f1']:.4f}, macro-F1@val-t {out['macro_f1_val_t']:.4f}, "
          f"mAP {out['map']:.4f} ± {out['map_std']:.4f} ({wall:.1f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(run_stage(main))
