"""Final runs of one code-retrieval variant (stage ``train_code@<variant>``; callable from a
notebook or under ``torchrun``): :func:`run_final` trains one SigPredictor per seed of
``code.train.seeds`` with the variant's tuned (or declared) hyperparameters, writes the
checkpoints, ``summary.json`` and the per-epoch history, and tracks the variant in MLflow
(rank 0 only). The caller owns nothing: the process group is initialised and destroyed here.
"""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from .. import distributed as D
from ..data.code_inputs import load_code_data
from ..errors import InputError
from ..evaluation.code_eval import evaluate_variant
from ..evaluation.picks import seed_summary
from ..io import write_csv, write_json
from ..timings import write_timing
from ..tracking import variant_run
from .code import STOP_RULES, checkpoint_path, prepare_targets, train_seeds
from .code_inputs import run_params, variant_settings

__all__ = ["run_final", "run_evaluation", "run_default", "early_stopping_pick", "HIST_COLS"]


def teacher_digest(teacher: str) -> str:
    """SHA-256 prefix of the teacher states' ``index.json`` (ids, settings, shard hashes)."""
    return hashlib.sha256((Path(teacher) / "index.json").read_bytes()).hexdigest()[:16]


HIST_COLS = ["seed", "epoch", "train_loss", "val_rank_at_10", "val_rank_at_1", "val_mrr",
             "val_mean_cosine", "lr", "temperature"]  # no wall times: reruns give equal bytes


def _variant(code, variant: str):
    """``code.variants[variant]``; a ``KeyError`` naming the known variants when absent."""
    if variant not in code.variants:
        raise KeyError(f"code.variants has no {variant!r} (known: {', '.join(code.variants)})")
    return code.variants[variant]


def _train(code, variant: str, cfg: dict, splits: str, teacher: str, out: Path) -> list[dict]:
    """Train ``variant`` with the settings ``cfg`` on every final seed into ``out`` (what
    :func:`run_final` and :func:`run_default` share); returns :func:`train_seeds`' summaries."""
    data, hidden = load_code_data(splits, teacher)
    targets = prepare_targets(data, code.target.centre, code.target.whiten_eps)
    return train_seeds(data, hidden, code.variants[variant].loss, code.model, code.train, out,
                       targets=targets, seeds=list(code.train.seeds), lr=cfg["lr"],
                       temperature=cfg["temperature"], residual=cfg["residual"],
                       workers=code.train.workers)


def early_stopping_pick(history: pd.DataFrame, n_val: int, rule: str = "mrr_plateau") -> dict:
    """The early-stopping epochs of a variant's seeds with their margins, from the per-epoch
    history (``seed, epoch, val_rank_at_10, val_mrr``; the plots CSV of ``train_code``), under
    the rule the run kept its checkpoint by (``code.train.early_stopping``,
    :func:`contrastlab.training.code.train_code`):

    - ``mrr_plateau``: the centre of the plateau of epochs whose validation MRR is within
      :data:`contrastlab.models.grid_picks.PLATEAU_SHARE` of the ``n_val`` validation queries
      of the best; its margin is the smallest change of one epoch's MRR, in queries, that
      moves the pick (:func:`contrastlab.models.grid_picks.pick_on_grid`).
    - ``rank_at_10``: the first epoch with the highest validation Rank@10, a count of queries;
      the margin is the gap to the runner-up epoch (:func:`contrastlab.models.grid_picks.argmax_pick`;
      0 on a tie).

    ``other_rule_seed`` is the epoch the other rule would keep among the epochs run (a record,
    not a checkpoint).

    Returns:
        :func:`contrastlab.evaluation.picks.seed_summary` of the seeds (``criterion``,
        ``chosen_seed``, ``runner_up_seed``, ``margin_seed`` in queries, ``fragile_seeds``,
        ``n_val``) plus ``rule``, ``other_rule`` and ``other_rule_seed``.

    Raises:
        ValueError: an empty history, ``n_val < 1`` or an unknown rule.
    """
    if history.empty:
        raise ValueError("early_stopping_pick: empty history")
    if rule not in STOP_RULES:
        raise ValueError(f"early_stopping_pick: unknown rule {rule!r}; use {' or '.join(STOP_RULES)}")
    other = next(r for r in STOP_RULES if r != rule)
    recs, alt = [], []
    for _, h in history.sort_values(["seed", "epoch"]).groupby("seed", sort=True):
        epochs = [int(e) for e in h["epoch"]]
        pick = {x: STOP_RULES[x].pick(epochs, h[STOP_RULES[x].score].to_numpy(), n_val) for x in (rule, other)}
        r = pick[rule]
        recs.append({"criterion": STOP_RULES[rule].criterion, "n_val": r["n_val"], "chosen": r["choice"],
                     "runner_up": r["runner_up"], "margin": r["margin_items"], "fragile": r["fragile"]})
        alt.append(pick[other]["choice"])
    return {**seed_summary(recs), "rule": rule, "other_rule": other, "other_rule_seed": alt}


def _summary(variant: str, loss: str, cfg: dict, summaries: list[dict]) -> dict:
    """The hashed ``summary.json`` of a variant's models: no histories, no wall times (those
    go to the plots and the timings file)."""
    return {"variant": variant, "loss": loss, **cfg, "seeds": [
        {k: x for k, x in s.items() if k not in ("history", "time_s")} for s in summaries]}


def run_final(code, variant: str, tuned_dir: str | None, splits: str, teacher: str,
              models_dir: str, plots_dir: str) -> None:
    """Train ``variant`` of ``code`` (the ``code`` params section) on every final seed.

    Args:
        tuned_dir: folder of ``tune_code``'s ``<variant>.json`` (the tuned choices); ``None``:
            the variant's declared lr / temperature.
        splits, teacher: ``splits.parquet`` and the teacher-states folder.
        models_dir, plots_dir: output folders.

    Writes ``<models_dir>/<variant>/seed<k>.safetensors`` + ``summary.json`` and
    ``<plots_dir>/<variant>.csv``.

    Raises:
        KeyError: no such variant. FileNotFoundError: an input is missing.
    """
    v = _variant(code, variant)
    cfg = variant_settings(code, variant,
                           Path(tuned_dir) / f"{variant}.json" if tuned_dir else None)
    info = D.init_distributed(code.train.device)  # the stage owns the process group
    try:
        out = Path(models_dir) / variant
        params = run_params(variant, v.loss, cfg)
        logged = {**params, "model": code.model, "train": code.train, "target": code.target,
                  "teacher": code.teacher}
        hist, times = [], {}
        with variant_run("code", variant, params, stage=f"train_code@{variant}") as tracker:
            tracker.log_params(logged)
            tracker.log_dataset("code-teacher-states", digest=teacher_digest(teacher),
                                source=str(teacher), context="training")
            seeds = list(code.train.seeds)
            summaries_full = _train(code, variant, cfg, splits, teacher, out)
            for seed, s in zip(seeds, summaries_full):
                # per-seed MLflow runs after training (forked workers log nothing themselves)
                with tracker.seed_run(seed) as st:
                    for r in s["history"]:
                        st.log_metrics({k: r[k] for k in HIST_COLS[2:] if k in r},
                                       step=int(r["epoch"]))
                    st.log_metrics({"best_val_rank_at_10": s["best_val_rank_at_10"],
                                    "best_epoch": float(s["best_epoch"])})
                    if info.is_main:
                        st.log_model(checkpoint_path(out, seed),
                                     name=f"{variant}-seed{seed}",
                                     params={"loss": v.loss, "seed": seed})
                hist += [{"seed": seed, **r} for r in s["history"]]
                # wall times go to the timings file, not to the DVC-hashed summary.json
                times[f"seed{seed}_time_s"] = round(float(s["time_s"]), 3)
            if info.is_main:
                write_csv(Path(plots_dir) / f"{variant}.csv", pd.DataFrame(hist)[HIST_COLS])
                write_json(out / "summary.json", _summary(variant, v.loss, cfg, summaries_full))
                tracker.log_metrics({"val_rank_at_10_mean": float(np.mean(
                    [x["best_val_rank_at_10"] for x in summaries_full]))})
                tracker.log_artifact(Path(plots_dir) / f"{variant}.csv", "history")
                tracker.log_metrics({"time_s": sum(times.values())})
                write_timing("code", f"train_code_{variant}", times)
    finally:
        D.cleanup()


def run_default(code, variant: str, splits: str, teacher: str,
                models_dir: str | None = None) -> tuple[dict, pd.DataFrame]:
    """The variant's declared configuration (``params.yaml``'s lr and initial temperature,
    trial 0 of its study) trained on the final seeds and tested (stage
    ``default_code@<variant>``): the report's default-vs-tuned comparison. Trains like
    :func:`run_final` (same seeds and library; no MLflow run) into
    ``<models_dir>/<variant>`` (``None``: a temporary folder, deleted afterwards) and
    evaluates like ``evaluate_code``.

    Returns:
        ``(metrics, ranks)``: the metrics JSON (``searched`` False and a note, with empty
        ranks, for a variant without a search space, whose final run is its default) and the
        per-query test ranks (``id, repo, seed, rank``).

    Raises:
        KeyError: no such variant. FileNotFoundError: an input is missing.
    """
    v = _variant(code, variant)
    if not v.search:  # an ablation at its declared configuration: the final run is the default
        return ({"variant": variant, "searched": False,
                 "note": "no search space: the final run is the declared configuration"},
                pd.DataFrame({"id": [], "repo": [], "seed": [], "rank": []}))
    cfg = variant_settings(code, variant, None)  # declared lr / temperature (trial 0)
    with tempfile.TemporaryDirectory(prefix="default_code-") as tmp:
        out_dir = Path(models_dir if models_dir is not None else tmp) / variant
        out_dir.mkdir(parents=True, exist_ok=True)
        summaries = _train(code, variant, cfg, splits, teacher, out_dir)
        write_json(out_dir / "summary.json", _summary(variant, v.loss, cfg, summaries))
        out, _, ranks, _ = evaluate_variant(code, out_dir, splits, teacher)
    hist = pd.DataFrame([{**row, "seed": x["seed"]} for x in summaries for row in x["history"]])
    picks = {"early_stopping": early_stopping_pick(hist, _n_val(splits), code.train.early_stopping)}
    return {**out, "variant": variant, "searched": True, "picks": picks}, ranks


def _n_val(splits: str) -> int:
    """The validation queries of the split (rows with ``split == "val"``)."""
    return int((pd.read_parquet(splits, columns=["split"])["split"] == "val").sum())


def run_evaluation(code, variant: str, splits: str, teacher: str, models_dir: str,
                   metrics_dir: str, curves_dir: str, history: str | None = None) -> dict:
    """Stage ``evaluate_code@<variant>``: every seed's checkpoint under
    ``<models_dir>/<variant>`` ranked against the whole corpus
    (:func:`contrastlab.evaluation.code_eval.evaluate_variant`); writes
    ``<metrics_dir>/<variant>.json``, the per-query ranks ``<curves_dir>/<variant>_ranks.csv``
    (the bootstrap's input) and the mean Rank@k curve ``<curves_dir>/<variant>_rank_curve.csv``,
    with ``history`` (``train_code``'s per-epoch CSV) the early-stopping picks and their
    margins (:func:`early_stopping_pick`, under ``picks``), and logs the test metrics to the
    variant's MLflow run (opened by :func:`run_final`, found again by its params) and to each
    seed's nested run.

    Returns:
        The metrics JSON.

    Raises:
        InputError: the history's early-stopping epochs are not the checkpoints'.
    """
    out, per_seed, ranks, curve = evaluate_variant(code, Path(models_dir) / variant, splits, teacher)
    if history is not None:
        pick = early_stopping_pick(pd.read_csv(history), _n_val(splits), code.train.early_stopping)
        kept = [m["best_epoch"] for m in per_seed]
        if pick["chosen_seed"] != kept:
            raise InputError(f"{history}: early-stopping epochs {pick['chosen_seed']} differ from "
                             f"the checkpoints' {kept} (a history of another run?)")
        out["picks"] = {"early_stopping": pick}
    write_json(Path(metrics_dir) / f"{variant}.json", out)
    scalar = ("rank_at_1", "rank_at_5", "rank_at_10", "mrr", "median_rank", "mean_cosine")
    with variant_run("code", variant, run_params(variant, out["loss"], out),
                     stage=f"evaluate_code@{variant}") as tracker:
        tracker.log_metrics({f"test_{k}": out[k] for k in scalar})
        for m in per_seed:
            with tracker.seed_run(m["seed"]) as st:
                st.log_metrics({f"test_{k}": m[k] for k in scalar})
    write_csv(Path(curves_dir) / f"{variant}_ranks.csv", ranks)
    write_csv(Path(curves_dir) / f"{variant}_rank_curve.csv",
              pd.DataFrame({"k": np.arange(1, len(curve) + 1), "rank_at_k": curve}))
    return out
