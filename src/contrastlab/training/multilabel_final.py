"""Final runs of one multi-label variant on one data set (``train_multilabel@<ds>-<v>`` and
``train_multilabel_hybrid@<ds>-<h>``), callable from a notebook: :func:`run_final` trains
every seed with the tuned choices, scores the test split once and writes the metrics JSON,
the bootstrap replicates and the per-seed curves; MLflow is a side channel
(:func:`contrastlab.tracking.variant_run`). The stage script only parses its arguments.

For every seed in ``multilabel.seeds`` (in ``multilabel.train.workers`` worker processes):
train with the tuned hyperparameters (``reports/tuned/multilabel/<variant>.json``, chosen on
validation by ``tune_multilabel@<variant>``: its ``datasets.<dataset>.params``, or the
variant's ``params.yaml`` values on a data set that was not tuned), early stopping and
thresholds on the validation split, then score the test split once. See
``contrastlab.training.multilabel``. ``knn`` is deterministic: it runs the first seed only
(its other seeds would repeat it; for the bootstrap its output stands for every seed). A hybrid (``hybrid_concat`` / ``hybrid_et`` /
``hybrid_ft``) reads the choices of ``multilabel.hybrid_base`` and, when its table row names a
``model_of`` baseline, that baseline's (``extratrees`` for ``hybrid_et``, ``bce`` for
``hybrid_ft``).

Outputs (all ``cache: false``, committed):
``reports/metrics/multilabel/<dataset>_<variant>.json`` (mean, ``_std`` and ``_seed<s>`` of
every metric, the tuned choices and where they come from, steps, each validation pick's margin
(``picks``: :func:`pick_summary`), the SHA-256 of every seed's
float32 test scores), ``reports/metrics/multilabel/reps/<dataset>_<variant>.npz``
(bootstrap replicates of micro/macro-F1 at 0.5 and at the validation threshold and of mAP from
``contrastlab.evaluation.multilabel.stratified_metric_reps(seed=0)``, whose draws depend only on
the test labels and the number of seeds, so all rows with as many seeds are paired: the
report's CIs and tests), ``reports/plots/multilabel/<dataset>_<variant>.csv`` (training loss and
validation mAP per check, per seed). Wall times go to stdout and MLflow only.

MLflow (``contrastlab.tracking.variant_run``, a side channel: no DVC output depends on it):
one run per (data set, variant) and pipeline invocation, named ``<dataset>-<variant> · <dvc
exp name or short commit>`` in ``contrastlab-multilabel``, whose params are the variant's
configuration (``loss``, ``temperature``, ``lr``, ``mask_rate``, ``queue``, ...; ``baseline``
true for logreg / bce), its tuned choices (``tuned.<name>``) and the seeds, and whose metrics
are the test metrics averaged over seeds (``map``, ``micro_f1``, ``macro_f1``,
``macro_f1_val_t``, ... with their ``_std``) plus the wall time ``time_s``; the data set
(``log_input``: name, SHA-256 prefix of ``data.safetensors`` + ``meta.json``, source folder);
the history CSV, the metrics JSON and a figure of the per-seed curves as artifacts; and one
nested run per seed (``... · seed <s>``) with its curve (``loss`` / ``val_map`` at each
validation check, step = training step; logreg: ``C`` / ``val_map`` per grid point) and its
test metrics.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from safetensors.numpy import load_file

from ..errors import InputError
from ..evaluation.multilabel import seed_score_correlation, stratified_metric_reps
from ..evaluation.picks import seed_summary
from ..io import atomic_path, write_csv, write_json
from ..tracking import Tracker, variant_run
from .multilabel import HYBRIDS, make_config, resolve_loss, run_seeds, summarize
from .multilabel_core import track_row

__all__ = ["FinalPaths", "run_final", "pick_summary", "DEFAULT_SOURCE", "tuned_choices", "dataset_digest",
           "mlflow_params", "log_seed", "curve_figure", "N_RESAMPLES"]

N_RESAMPLES = 1000


def tuned_choices(path: Path, dataset: str) -> tuple[dict, str]:
    """``(choices, source)`` of a variant on ``dataset`` from its tuned-choices JSON:
    ``datasets.<dataset>.params`` when that data set was tuned (source ``"tuned on <dataset>"``),
    else the file's top-level ``params`` (``{}`` = the ``params.yaml`` values; source says so).

    Raises:
        FileNotFoundError: no such file. ValueError: not a tuned-choices JSON.
    """
    from ..tuning import read_tuned

    top = read_tuned(path)
    per = json.loads(Path(path).read_text()).get("datasets") or {}
    if dataset in per:
        return dict(per[dataset]["params"]), f"tuned on {dataset} (CV on its training part)"
    return top, "not tuned on this data set: params.yaml values"


def dataset_digest(folder: Path) -> str:
    """SHA-256 prefix (16 hex digits) over ``data.safetensors`` and ``meta.json`` of a built
    data set folder (its identity in MLflow's dataset inputs).

    Raises:
        FileNotFoundError: one of the two files is missing.
    """
    h = hashlib.sha256()
    for name in ("data.safetensors", "meta.json"):
        f = Path(folder) / name
        if not f.exists():
            raise FileNotFoundError(f"{f}: missing (run build_multilabel first)")
        h.update(name.encode())
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()[:16]


def mlflow_params(dataset: str, variant: str, stage: str, seeds: list[int], cfg,
                  choices: dict) -> dict:
    """The variant's params as MLflow logs them: ``dataset``, ``variant``, ``stage``,
    ``seeds``, ``loss`` (the registry loss, or the variant's name for a baseline, with
    ``baseline`` true), every :class:`~contrastlab.training.multilabel.TrainConfig` field
    (``temperature``, ``lr``, ``mask_rate``, ...) and ``tuned.<name>`` for each tuned choice."""
    conf = asdict(cfg)
    conf.pop("variant", None)
    conf["loss"] = cfg.loss or variant
    return {"dataset": dataset, "variant": variant, "stage": stage, "seeds": list(seeds),
            "baseline": cfg.loss is None, **conf,
            **{f"tuned.{k}": v for k, v in choices.items()}}


def log_seed(tracker: Tracker, r) -> None:
    """One seed's nested MLflow run: its curve (``step`` or, for logreg, the grid index as
    the step; every other curve key a metric) and, at step 0, its test metrics (one that
    shares a curve's name, ``val_map``, as ``val_map_final``), ``chosen_<name>`` and
    ``time_s``. ``r``: a :class:`~contrastlab.training.multilabel.SeedResult`."""
    with tracker.seed_run(r.seed) as st:
        keys = [k for k in r.curve if k != "step"]
        steps = r.curve.get("step") or list(range(len(r.curve[keys[0]]) if keys else 0))
        for i, step in enumerate(steps):
            st.log_metrics({k: r.curve[k][i] for k in keys}, step=int(step))
        # a test metric named like a curve (val_map: the kept checkpoint's) gets ``_final``,
        # so the curve's history holds the curve only
        st.log_metrics({**{(f"{k}_final" if k in r.curve else k): v for k, v in r.metrics.items()},
                        **{f"chosen_{k}": v for k, v in r.chosen.items()}, "time_s": r.time_s})


def curve_figure(results, title: str):
    """A matplotlib figure of every seed's curve: training loss and validation mAP against
    the step (logreg: validation mAP against C). For MLflow only (not a DVC output)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [k for k in results[0].curve if k not in ("step", "C")]
    xkey = "step" if "step" in results[0].curve else "C"
    fig, axes = plt.subplots(1, len(keys), figsize=(3.2 * len(keys), 2.6), squeeze=False,
                             layout="constrained")
    for ax, k in zip(axes[0], keys):
        for r in results:
            ax.plot(r.curve[xkey], r.curve[k], marker="o", ms=2, lw=1, label=f"seed {r.seed}")
        ax.set_xlabel(xkey)
        ax.set_ylabel(k)
        if xkey == "C":
            ax.set_xscale("log")
    axes[0][-1].legend(fontsize="small")
    fig.suptitle(title)
    return fig


def pick_summary(results) -> dict:
    """Per validation pick (``threshold``, ``early_stopping``, ``C``, ...) made in every seed:
    its criterion, the number of validation rows, and per seed the chosen and runner-up
    values and the margin (rows; :func:`contrastlab.evaluation.picks.removal_margin`), with
    the count of fragile seeds (margin under 1 % of the validation rows)."""
    names = [k for k in results[0].picks if all(k in r.picks for r in results)]
    return {k: seed_summary([r.picks[k] for r in results]) for k in names}


#: ``tuned_source`` of a ``default`` run (:func:`run_final`).
DEFAULT_SOURCE = "default: the variant's params.yaml values (trial 0 of its study)"


@dataclass(frozen=True)
class FinalPaths:
    """Where :func:`run_final` reads and writes (the stage's dvc.yaml paths)."""

    params: str
    data_dir: str
    tuned_dir: str | None  # None only with run_final(default=True)
    metrics_dir: str
    plots_dir: str


def run_final(ml, ds: str, variant: str, paths: FinalPaths, default: bool = False) -> dict:
    """Train ``variant`` on data set ``ds`` for every seed of ``ml.seeds`` (``knn``: the first
    only, it is deterministic) with its tuned choices (``default``: with the variant's
    ``params.yaml`` values, trial 0 of its study, whatever was tuned; ``paths.tuned_dir`` is
    not read), score the test split once and write
    ``<metrics_dir>/<ds>_<variant>.json``, ``<metrics_dir>/reps/<ds>_<variant>.npz`` (bootstrap
    replicates, ``stratified_metric_reps(seed=0)``) and ``<plots_dir>/<ds>_<variant>.csv``.

    Args:
        ml: the ``multilabel`` params section (:class:`contrastlab.params.MultilabelParams`).
        ds: a built data set (``<data_dir>/<ds>/{data.safetensors,meta.json}``).
        variant: a name of ``ml.losses`` or a hybrid of :data:`HYBRIDS`.

    Returns:
        The metrics dict written (seed means, ``_std``, ``_seed<s>``, ``tuned``,
        ``tuned_source``, ``test_scores_sha256``, ``config``, split sizes).

    Raises:
        contrastlab.errors.InputError: bad loss keyword arguments of the variant.
        FileNotFoundError: the data set or the tuned-choices file is missing.
        ValueError: ``default`` is false and ``paths.tuned_dir`` is ``None``.
    """
    if not default and paths.tuned_dir is None:
        raise ValueError(f"{variant} on {ds}: the tuned runs need paths.tuned_dir "
                         "(tune_multilabel's choices); default=True uses the params.yaml values")
    cfg = make_config(ml, ds, variant)  # validates the names and the loss keywords first
    if cfg.loss is not None:
        try:
            resolve_loss(cfg.loss, cfg.loss_kwargs)
        except ValueError as e:
            raise InputError(f"{paths.params}: multilabel.variants.{variant}.kwargs: {e}") from None
    src = Path(paths.data_dir) / ds
    meta_path = src / "meta.json"
    if not meta_path.exists():
        raise FileNotFoundError(f"{meta_path}: missing (run build_multilabel@{ds} first)")
    meta = json.loads(meta_path.read_text())
    data = load_file(str(src / "data.safetensors"))
    base = ml.hybrid_base if variant in HYBRIDS else variant
    row = track_row(variant)
    # a hybrid reusing a baseline's model (model_of) reuses its tuned choices too
    model_of = row.model_of if row is not None else None
    model_choices = None
    if default:
        choices, source = {}, DEFAULT_SOURCE
        if model_of is not None:
            model_choices = {}
    else:
        tdir = Path(paths.tuned_dir)
        choices, source = tuned_choices(tdir / f"{base}.json", ds)
        if model_of is not None:
            model_choices, msource = tuned_choices(tdir / f"{model_of}.json", ds)
            source = f"encoder {base}: {source}; {track_row(model_of).short}: {msource}"
    cfg = make_config(ml, ds, variant, meta["encoder"], choices, model_choices)
    seeds = ml.seeds[:1] if row is not None and row.deterministic else list(ml.seeds)
    stage = f"{'default' if default else 'train'}_multilabel@{ds}-{variant}"
    logged = mlflow_params(ds, variant, stage, seeds, cfg, {**choices, **(model_choices or {})})

    def progress(r) -> None:
        print(f"{stage} seed {r.seed}: map={r.metrics['map']:.4f} micro_f1={r.metrics['micro_f1']:.4f} "
              f"macro_f1_val_t={r.metrics['macro_f1_val_t']:.4f} {r.chosen} ({r.time_s:.1f}s)", flush=True)
        log_seed(tracker, r)

    key = f"{ds}-{variant}-default" if default else f"{ds}-{variant}"
    with variant_run("multilabel", key, logged, stage=stage) as tracker:
        if tracker.active:
            tracker.log_dataset(ds, digest=dataset_digest(src), source=str(src), context="training")
        t0 = time.perf_counter()
        results = run_seeds(data, cfg, seeds, workers=ml.train.workers, progress=progress)
        wall = time.perf_counter() - t0
        out = summarize(results)
        out["tuned"] = choices if model_choices is None else {"encoder": choices, model_of: model_choices}
        out["tuned_source"] = source
        out["picks"] = pick_summary(results)
        # identity of each seed's test scores (float32 bytes): identical outputs of two rows
        # can be checked (a variant table alias_of is one method, trained once)
        out["test_scores_sha256"] = [hashlib.sha256(np.ascontiguousarray(r.scores, dtype=np.float32).tobytes())
                                     .hexdigest() for r in results]
        out["config"] = {"temperature": cfg.temperature if cfg.loss else None, "lr": cfg.lr,
                         "mask_rate": cfg.mask_rate, "queue": cfg.queue, "loss_kwargs": cfg.loss_kwargs,
                         "batch_size": cfg.batch_size, "max_steps": cfg.max_steps,
                         # a fine-tuning hybrid's BCE-phase lr / mask_rate, recorded where the
                         # metrics files have always held them
                         "model": ({"lr": cfg.finetune_lr, "mask_rate": cfg.finetune_mask_rate}
                                   if cfg.hybrid == "finetune" else cfg.model),
                         "hybrid": cfg.hybrid}
        out["n_train"], out["n_val"], out["n_test"] = (int(len(data[k])) for k in ("x_train", "x_val", "x_test"))
        # shared share of the seeds' test-score noise (the coverage simulation's calibration);
        # a model run once has no seed noise to share
        rho = (seed_score_correlation(data["y_test"], np.stack([r.scores for r in results]))
               if len(results) > 1 else None)
        if rho is not None:
            out["test_score_seed_corr"] = rho

        # the draws depend on the number of seeds: a deterministic model run once (knn) enters
        # with its one output repeated for every final seed, so its draws pair with the others'
        rep_res = results * (len(ml.seeds) // len(results)) if len(results) == 1 else results
        reps = stratified_metric_reps(data["y_test"], np.stack([r.scores for r in rep_res]),
                                      np.array([r.thresholds["global"] for r in rep_res]),
                                      n_resamples=N_RESAMPLES, seed=0, threshold=cfg.threshold)
        reps_path = Path(paths.metrics_dir) / "reps" / f"{ds}_{variant}.npz"
        with atomic_path(reps_path) as tmp:
            with open(tmp, "wb") as fh:
                np.savez_compressed(fh, **{k: v.astype(np.float32) for k, v in reps.items()})
        rows = []
        for r in results:
            keys = list(r.curve)
            if not keys:  # a scikit-learn forest / kNN: no curve, one row naming the seed
                rows.append({"seed": r.seed})
                continue
            for i in range(len(r.curve[keys[0]])):
                rows.append({"seed": r.seed, **{k: r.curve[k][i] for k in keys}})
        history = Path(paths.plots_dir) / f"{ds}_{variant}.csv"
        metrics_json = Path(paths.metrics_dir) / f"{ds}_{variant}.json"
        write_csv(history, pd.DataFrame(rows))
        write_json(metrics_json, out)
        # test metrics next to the params: seed means and stds (per-seed values: child runs)
        tracker.log_metrics({k: v for k, v in out.items()
                             if isinstance(v, (int, float)) and not isinstance(v, bool)
                             and "_seed" not in k} | {"time_s": wall})
        tracker.log_artifact(history, "history")
        tracker.log_artifact(metrics_json, "metrics")
        tracker.log_artifact(reps_path, "metrics")
        if tracker.active and results[0].curve:
            import matplotlib.pyplot as plt

            fig = curve_figure(results, f"{ds}-{variant}")
            tracker.log_figure(fig, "curves.png")
            plt.close(fig)
    print(f"{stage}: micro-F1 {out['micro_f1']:.4f}, macro-F1@val-t {out['macro_f1_val_t']:.4f}, "
          f"mAP {out['map']:.4f} ± {out['map_std']:.4f} ({wall:.1f}s)")
    return out
