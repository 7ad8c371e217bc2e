"""Multi-label supervised contrastive training, trained to convergence on a validation split.

Representation phase (Sim-Dis paper, Huang et al., App. C.4; MulSupCon, Zhang & Wu 2024,
official code's vector-data recipe): each mini-batch of ``B`` training rows gives two views
per row by feature masking (every feature is zeroed independently with probability
``mask_rate``; the features are z-scored, so 0 is the training mean); an MLP encoder +
two-layer projection head map each view to ``z = normalize(Proj(Enc(view)))``
``[B, 2, D_P]`` and the registry loss is ``loss_fn(z, y, temperature=T)``. With a memory
queue (``queue > 0``, MoCo-style, He et al. 2020, without the momentum encoder) the
projections and labels of the last ``queue`` rows of past batches (detached) are appended
after the batch as ``contrast_features``/``contrast_labels``: they enter every anchor's
denominator (and positive set) but are never anchors. AdamW, linear warm-up then cosine decay
over ``max_steps`` steps. Every ``eval_every`` steps the encoder is scored on the validation
split by a closed-form ridge probe (validation mAP); training stops after ``patience`` checks
without improvement and the best encoder is kept (early stopping on validation mAP).

Classifier phase: the projection head is dropped, the encoder frozen, and a linear layer
``H -> C`` is fitted to convergence on ``h = Enc(x)`` with full-batch L-BFGS on mean BCE +
``clf_l2 |W|^2`` (Khosla et al. 2020 linear evaluation).

Baselines, by the ``method`` of their variant-table row (:func:`run_seed` dispatches on it,
never on a row's name): ``mlp_bce`` (encoder + linear layer trained end to end with BCE, same
steps, early stopping on its own validation mAP; :mod:`.multilabel_bce`), ``logistic``
(binary-relevance logistic regression, scikit-learn liblinear, one classifier per label, C
picked from the log grid ``logreg_c`` by validation mAP; a choice at the grid's edge extends the
grid by a decade, at most ``logreg_extend`` times, then raises), ``forest`` (scikit-learn's
native multi-output Extremely Randomized Trees, Geurts, Ernst & Wehenkel, Mach. Learn. 2006,
or Random Forest, Breiman, Mach. Learn. 2001, the row's ``estimator``; ``n_jobs = 1``),
``boosting`` (binary-relevance histogram gradient boosting,
:mod:`contrastlab.training.multilabel_hgb`) and ``neighbours`` (a label-averaging
k-nearest-neighbour scorer, cosine or Euclidean, uniform or inverse-distance weights;
deterministic, so its seeds give identical outputs); the scikit-learn ones live in
:mod:`.multilabel_sklearn`. Their hyperparameters (``cfg.model``) are tuned on validation
like the losses.

Modules: :mod:`.multilabel_core` (configuration, schedule, views, queue, step loop),
:mod:`.multilabel_contrastive` (the two phases of a contrastive variant),
:mod:`.multilabel_bce`, :mod:`.multilabel_sklearn`, :mod:`.multilabel_hgb`; this module
dispatches one run by method and holds the cross-validation, seeds and configuration helpers
(every public name of the others re-exported).

Thresholds: F1 is reported at 0.5 (``micro_f1``, ``macro_f1``) and at one global threshold
chosen on validation (``micro_f1_val_t``, ``macro_f1_val_t``: the threshold in 0.05..0.95
maximising the mean of validation micro- and macro-F1 averaged with its two grid neighbours,
:func:`contrastlab.evaluation.multilabel.threshold_pick`); per-label thresholds (each label's
validation-F1 maximiser) are optional (``*_label_t``). Every validation pick (threshold,
early-stopping step, logistic-regression C) records its margin in validation rows
(:mod:`contrastlab.evaluation.picks`).

Everything random is seeded from the seed argument: on CPU a rerun gives identical numbers,
whatever the number of worker processes (each seed runs alone in one process).
"""

from __future__ import annotations

import dataclasses
import math
import multiprocessing as mp
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any, Callable

import numpy as np
import torch

from ..errors import InputError, UnknownNameError
from ..evaluation.multilabel import (knn_label_purity, threshold_pick, label_thresholds,
                                     mean_average_precision, multilabel_metrics)
from ..losses.registry import track_variants
from ..utils import seed_everything
from .multilabel_bce import train_bce
from .multilabel_contrastive import fit_linear, train_contrastive
from .multilabel_core import (MemoryQueue, SeedResult, TrainConfig, mask_views, resolve_loss, ridge_probe_scores,
                              warmup_cosine)
from .multilabel_sklearn import KNN_METRICS, forest_scores, knn_scores, train_logreg

#: ``needs`` of the registry losses this module loads (read by scripts/stage_deps.py).
LOSS_NEEDS = ("multilabels",)

__all__ = ["TrainConfig", "SeedResult", "warmup_cosine", "mask_views", "MemoryQueue",
           "ridge_probe_scores", "train_contrastive", "fit_linear", "train_bce", "train_logreg",
           "knn_scores", "forest_scores", "run_seed", "run_seeds", "resolve_loss", "summarize",
           "make_config", "TUNABLE", "SKLEARN_BASELINES", "HYBRIDS", "cv_folds", "tuning_rows",
           "cv_objective", "KNN_METRICS", "METHODS"]

#: The multi-label rows of the variant table (``contrastlab/losses/variants.yaml``).
_TABLE = track_variants("multilabel")
#: Exploratory hybrids of a contrastive encoder and the raw features, ``{row: method}`` (not
#: tuned themselves: they reuse the tuned choices of ``multilabel.hybrid_base`` and, for a
#: hybrid with ``model_of``, of that baseline). Method ``concat``: the linear probe on
#: ``[x, h]``; ``et``: the ``model_of`` forest on ``[x, h]`` (``h`` standardised with training
#: statistics); ``finetune``: the pre-trained encoder and a new linear layer trained end to
#: end with BCE at the ``model_of`` BCE MLP's learning rate and masking rate (contrastive
#: pre-training, then fine-tuning: Audibert, Gauffre & Amini 2024).
HYBRIDS = {n: v.method for n, v in _TABLE.items() if v.kind == "hybrid"}


def _fit_logistic(data, cfg, seed, t, chosen):
    pred, curve, c = train_logreg(data["x_train"], data["y_train"], data["x_val"], t["yva"], cfg.logreg_c,
                                  seed, cfg.logreg_extend, picks=t["picks"])
    chosen["C"] = c
    return pred(data["x_val"]), pred(data["x_test"]), curve


def _fit_forest(data, cfg, seed, t, chosen):
    s_val, s_te = forest_scores(cfg.variant, data["x_train"], data["y_train"],
                                [data["x_val"], data["x_test"]], cfg.model, seed)
    return s_val, s_te, {}


def _fit_boosting(data, cfg, seed, t, chosen):
    from .multilabel_hgb import hgb_scores

    s_val, s_te = hgb_scores(data["x_train"], data["y_train"], [data["x_val"], data["x_test"]], cfg.model,
                             seed, cfg.threads)
    return s_val, s_te, {}


def _fit_neighbours(data, cfg, seed, t, chosen):
    s_val, s_te = (knn_scores(data["x_train"], data["y_train"], q, int(cfg.model.get("k", 10)),
                              str(cfg.model.get("weights", "uniform")), str(cfg.model.get("metric", KNN_METRICS[0])))
                   for q in (data["x_val"], data["x_test"]))
    return s_val, s_te, {}


def _fit_mlp_bce(data, cfg, seed, t, chosen):
    pred, curve = train_bce(t["xtr"], t["ytr"], t["xva"], t["yva"], cfg, t["gen"], picks=t["picks"])
    return pred(t["xva"]).numpy(), pred(t["xte"]).numpy(), curve


#: Baseline ``method`` of the variant table -> how :func:`run_seed` fits it:
#: ``f(data, cfg, seed, tensors, chosen) -> (validation scores, test scores, curve)``.
METHODS: dict[str, Callable] = {"logistic": _fit_logistic, "forest": _fit_forest, "boosting": _fit_boosting,
                                "neighbours": _fit_neighbours, "mlp_bce": _fit_mlp_bce}
#: Baselines fitted by scikit-learn in :func:`run_seed` (no encoder, no optimiser steps).
SKLEARN_BASELINES = tuple(n for n, v in _TABLE.items() if v.kind == "baseline" and v.method in
                          ("logistic", "forest", "boosting", "neighbours"))


def _baseline_method(cfg: TrainConfig) -> str | None:
    """The ``method`` of ``cfg.variant`` when it is a baseline (no loss, no hybrid), else None.

    Raises:
        UnknownNameError: a variant without a loss that is no baseline of a known method.
    """
    if cfg.loss is not None or cfg.hybrid:
        return None
    spec = _TABLE.get(cfg.variant)
    if spec is None or spec.kind != "baseline" or spec.method not in METHODS:
        raise UnknownNameError(f"multi-label variant {cfg.variant!r} has no loss and is not a baseline "
                               f"of a known method ({', '.join(METHODS)})")
    return spec.method


def run_seed(data: dict[str, np.ndarray], cfg: TrainConfig, seed: int, margins: bool = True) -> SeedResult:
    """Train one seed of one variant; choose thresholds on validation; score the test split.

    Args:
        data: ``x_train``/``y_train``, ``x_val``/``y_val``, ``x_test``/``y_test`` numpy
            arrays (``[N, F]`` float32 / ``[N, C]`` {0,1}); optional ``g_train``/``g_test``
            group ids for the kNN purity (HumanEval).
        cfg: the variant's :class:`TrainConfig`.
        seed: seeds torch/numpy/python for this run.
        margins: record each validation pick's margin (``SeedResult.picks``); False skips
            the leave-one-out work (the tuning objective reads only ``val_map``).

    Returns:
        :class:`SeedResult`; metrics: ``micro_f1``/``macro_f1`` at 0.5, ``*_val_t`` at the
        validation threshold (``threshold_val``), ``*_label_t`` with per-label thresholds,
        ``map``, ``val_map``, precision@k, ``steps`` (best checkpoint's step).
    """
    torch.set_num_threads(max(1, cfg.threads))
    t0 = time.perf_counter()
    gen = seed_everything(seed)
    xtr = torch.as_tensor(data["x_train"], dtype=torch.float32)
    ytr = torch.as_tensor(data["y_train"], dtype=torch.float32)
    xva = torch.as_tensor(data["x_val"], dtype=torch.float32)
    xte = torch.as_tensor(data["x_test"], dtype=torch.float32)
    yva = np.asarray(data["y_val"])
    chosen: dict[str, float] = {}
    picks: dict | None = {} if margins else None  # the picks' records (evaluation.picks.pick_record)
    enc = None
    method = _baseline_method(cfg)
    if method is not None:
        t = {"xtr": xtr, "ytr": ytr, "xva": xva, "xte": xte, "yva": yva, "gen": gen, "picks": picks}
        s_val, s_te, curve = METHODS[method](data, cfg, seed, t, chosen)
    else:
        enc, curve = train_contrastive(xtr, ytr, xva, yva, cfg, gen, picks=picks)
        if cfg.hybrid == "finetune":
            # the pre-trained encoder and a new linear layer, trained end to end with BCE at
            # the BCE MLP's learning rate and masking rate (make_config), early-stopped anew
            if curve.get("step"):
                chosen["pretrain_best_step"] = float(curve["step"][int(np.argmax(curve["val_map"]))])
            ft = dataclasses.replace(cfg, lr=cfg.finetune_lr, mask_rate=cfg.finetune_mask_rate)
            if picks is not None:
                picks["early_stopping_pretrain"] = picks.pop("early_stopping", None)
            pred, curve = train_bce(xtr, ytr, xva, yva, ft, gen, encoder=enc, picks=picks)
            enc = pred.model[0]
            s_val, s_te = pred(xva).numpy(), pred(xte).numpy()
        else:
            with torch.no_grad():
                htr, hva, hte = enc(xtr), enc(xva), enc(xte)
            if cfg.hybrid:
                # raw features beside the learned ones; h standardised with training statistics
                mu, sd = htr.mean(0), htr.std(0).clamp_min(1e-6)
                htr, hva, hte = (torch.cat([a, (h - mu) / sd], 1) for a, h in ((xtr, htr), (xva, hva), (xte, hte)))
            if cfg.hybrid == "et":
                s_val, s_te = forest_scores(_TABLE[cfg.variant].model_of, htr.numpy(), data["y_train"],
                                            [hva.numpy(), hte.numpy()], cfg.model, seed)
            else:
                with torch.no_grad():
                    clf = fit_linear(htr, ytr, cfg.clf_l2, cfg.clf_max_iter)
                    s_val = torch.sigmoid(clf(hva)).numpy()
                    s_te = torch.sigmoid(clf(hte)).numpy()
    if curve.get("step"):
        chosen["best_step"] = float(curve["step"][int(np.argmax(curve["val_map"]))])
        chosen["steps_run"] = float(curve["step"][-1])
    t_glob, t_rec = threshold_pick(yva, s_val, margin=margins)
    if picks is not None:
        picks["threshold"] = t_rec
    t_lab = label_thresholds(yva, s_val) if cfg.per_label_thresholds else None
    y_te = data["y_test"]
    metrics = multilabel_metrics(y_te, s_te, cfg.threshold, cfg.precision_at)
    at_val = multilabel_metrics(y_te, s_te, t_glob)
    metrics["micro_f1_val_t"] = at_val["micro_f1"]
    metrics["macro_f1_val_t"] = at_val["macro_f1"]
    metrics["threshold_val"] = t_glob
    if t_lab is not None:
        at_lab = multilabel_metrics(y_te, s_te, t_lab)
        metrics["micro_f1_label_t"] = at_lab["micro_f1"]
        metrics["macro_f1_label_t"] = at_lab["macro_f1"]
    metrics["val_map"] = mean_average_precision(yva, s_val)
    if "g_train" in data and enc is not None:
        with torch.no_grad():
            metrics["knn_purity"] = knn_label_purity(enc(xtr).numpy(), data["g_train"], enc(xte).numpy(),
                                                     data["g_test"], cfg.knn_k)
    return SeedResult(seed, metrics, {k: list(map(float, v)) for k, v in curve.items()},
                      np.asarray(s_te, dtype=np.float32),
                      {"global": t_glob, "per_label": None if t_lab is None else t_lab.tolist()},
                      chosen, time.perf_counter() - t0, {k: v for k, v in (picks or {}).items() if v})


def cv_folds(y: np.ndarray, n_folds: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """``n_folds`` (train rows, validation rows) index pairs of an iterative-stratification
    k-fold split (Sechidis, Tsoumakas & Vlahavas, ECML PKDD 2011; ``iterstrat``'s
    ``MultilabelStratifiedKFold``, shuffled with ``seed``): every row is in exactly one
    validation part and each label's positives are spread evenly over the folds.

    Raises:
        InputError: fewer than 2 folds or more folds than rows.
    """
    from iterstrat.ml_stratifiers import MultilabelStratifiedKFold

    y = np.asarray(y).astype(np.int64)
    if not 2 <= n_folds <= len(y):
        raise InputError(f"cv_folds: need 2 <= folds <= {len(y)} rows, got {n_folds}")
    kf = MultilabelStratifiedKFold(n_splits=n_folds, shuffle=True, random_state=seed)
    return [(np.sort(tr), np.sort(va)) for tr, va in kf.split(np.zeros((len(y), 1)), y)]


def tuning_rows(arrays) -> tuple[np.ndarray, np.ndarray]:
    """The training part of a built data set for tuning: ``x_train``/``x_val`` and
    ``y_train``/``y_val`` stacked (``[N_train + N_val, F]`` / ``[., C]``). Reads no other key,
    so the test split is never touched."""
    x = np.concatenate([np.asarray(arrays["x_train"]), np.asarray(arrays["x_val"])])
    y = np.concatenate([np.asarray(arrays["y_train"]), np.asarray(arrays["y_val"])])
    return x, y


def cv_objective(x: np.ndarray, y: np.ndarray, folds: list[tuple[np.ndarray, np.ndarray]], cfg: TrainConfig,
                 run_seeds: list[int], report: Callable[[int, float], None] | None = None) -> tuple[float, float]:
    """Cross-validated tuning objective: fold ``f`` trains :func:`run_seed` with seed
    ``run_seeds[f % len(run_seeds)]`` on the fold's training rows, its held-out rows acting as
    the validation split (early stopping, logistic-regression C, thresholds) and the objective
    being their mAP. ``report(folds done, running mean)`` after each fold but the last (for a
    pruner: the step is the resource, 1 .. len(folds) - 1, as the graph, code and fine-tuning
    studies report seeds done but the last). The last fold is not reported: a pruner acting
    there would throw away a trial whose every fold is computed (Optuna's successive halving
    checks a rung at step ``min_resource * eta**k``, which can be the last fold).

    Returns:
        ``(mean, standard error)`` of the folds' validation mAP (se = sample std / sqrt(k)).
    """
    vals = []
    for f, (tr, va) in enumerate(folds):
        d = {"x_train": x[tr], "y_train": y[tr], "x_val": x[va], "y_val": y[va],
             "x_test": x[va], "y_test": y[va]}
        vals.append(run_seed(d, cfg, int(run_seeds[f % len(run_seeds)]), margins=False).metrics["val_map"])
        if report is not None and f + 1 < len(folds):
            report(f + 1, float(np.mean(vals)))
    v = np.asarray(vals)
    return float(v.mean()), float(v.std(ddof=1) / math.sqrt(len(v))) if len(v) > 1 else 0.0


def _run_seed_star(args: tuple) -> SeedResult:
    return run_seed(*args)


def run_seeds(data: dict[str, np.ndarray], cfg: TrainConfig, seeds: list[int], workers: int = 1,
              progress: Callable[[SeedResult], None] | None = None) -> list[SeedResult]:
    """Run :func:`run_seed` for every seed, in ``workers`` forked processes when > 1.

    Results come back in ``seeds`` order and do not depend on ``workers``.
    """
    jobs = [(data, cfg, s) for s in seeds]
    if workers <= 1 or len(seeds) == 1:
        out = []
        for j in jobs:
            out.append(run_seed(*j))
            if progress:
                progress(out[-1])
        return out
    import sklearn.metrics  # noqa: F401  (imported once here, inherited by the forked workers)

    ctx = mp.get_context("fork")
    with ProcessPoolExecutor(max_workers=min(workers, len(seeds)), mp_context=ctx) as pool:
        out = []
        for r in pool.map(_run_seed_star, jobs):
            out.append(r)
            if progress:
                progress(r)
    return out


def summarize(results: list[SeedResult]) -> dict[str, Any]:
    """Flat metrics JSON: ``<metric>`` (mean), ``<metric>_std`` (sample std, ddof=1),
    ``<metric>_seed<s>`` per seed, ``n_seeds``."""
    out: dict[str, Any] = {"n_seeds": len(results)}
    keys = [k for k in results[0].metrics if k != "map_labels_skipped"]
    for k in keys:
        vals = np.array([r.metrics[k] for r in results], dtype=np.float64)
        out[k] = float(vals.mean())
        out[f"{k}_std"] = float(vals.std(ddof=1)) if len(vals) > 1 else 0.0
        for r in results:
            out[f"{k}_seed{r.seed}"] = float(r.metrics[k])
    out["map_labels_skipped"] = float(results[0].metrics.get("map_labels_skipped", 0.0))
    for k in results[0].chosen:
        out[k] = float(np.mean([r.chosen[k] for r in results]))
    return out


#: Hyperparameters a tuned-choices JSON may set for a contrastive variant or the BCE MLP (the rest
#: of the config is fixed); the scikit-learn baselines take the keys of
#: ``params.multilabel.MODEL_KEYS`` instead (into ``TrainConfig.model``).
TUNABLE = ("temperature", "lr", "mask_rate", "queue", "weight_decay", "clf_l2")

def make_config(ml, dataset: str, variant: str, encoder: str = "mlp",
                choices: dict[str, Any] | None = None, model_choices: dict[str, Any] | None = None) -> TrainConfig:
    """:class:`TrainConfig` for one (data set, variant) from the ``multilabel`` params section:
    ``train`` <- ``data.<dataset>`` overrides <- ``variants.<variant>`` (temperature, lr,
    mask_rate, queue, kwargs, model) <- ``choices`` (tuned values: keys in :data:`TUNABLE`,
    or in ``MODEL_KEYS[variant]`` for a scikit-learn baseline).

    A hybrid of :data:`HYBRIDS` takes its encoder configuration from the variant
    ``ml.hybrid_base`` (``choices`` = that variant's tuned choices) and, when its table row
    names a ``model_of`` baseline, that baseline's model (``model_choices`` = its tuned choices;
    for method ``finetune``: ``cfg.finetune_lr`` / ``cfg.finetune_mask_rate``, that BCE MLP's
    ``lr`` / ``mask_rate``).

    Raises:
        UnknownNameError: unknown data set / variant. InputError: a choice that is not tunable;
        a ``finetune`` hybrid whose ``model_of`` is not an ``mlp_bce`` baseline.
    """
    from ..params.multilabel import MODEL_KEYS, variant_loss

    if variant in HYBRIDS:
        cfg = make_config(ml, dataset, ml.hybrid_base, encoder, choices)
        cfg.variant, cfg.hybrid = variant, HYBRIDS[variant]
        mo = _TABLE[variant].model_of
        if cfg.hybrid == "finetune" and (mo is None or _TABLE[mo].method != "mlp_bce"):
            raise InputError(f"hybrid {variant!r} (method finetune) takes its fine-tuning lr and mask_rate "
                             f"from its model_of, which must name a baseline of method mlp_bce (got {mo!r})")
        if mo is not None:
            ref = make_config(ml, dataset, mo, encoder, model_choices)
            # a fine-tuning hybrid takes the BCE MLP's learning rate and masking rate for its
            # end-to-end phase; the other hybrids the baseline's scikit-learn model
            if cfg.hybrid == "finetune":
                cfg.finetune_lr, cfg.finetune_mask_rate = ref.lr, ref.mask_rate
            else:
                cfg.model = ref.model
        return cfg
    if variant not in ml.variants:
        raise UnknownNameError(f"multilabel.variants has no entry {variant!r}")
    if dataset not in ml.data:
        raise UnknownNameError(f"multilabel.data has no entry {dataset!r}")
    t, d, v = ml.train, ml.data[dataset], ml.variants[variant]
    cfg = TrainConfig(
        variant=variant, loss=variant_loss(variant)[0], temperature=v.temperature,
        loss_kwargs=dict(v.kwargs), encoder=encoder, hidden=list(t.hidden), enc_dim=t.enc_dim,
        proj_dim=t.proj_dim, dropout=t.dropout, batch_size=d.batch_size or t.batch_size,
        max_steps=t.max_steps, eval_every=t.eval_every, patience=t.patience,
        lr=v.lr if v.lr is not None else t.lr, weight_decay=t.weight_decay, warmup=t.warmup,
        mask_rate=v.mask_rate if v.mask_rate is not None else t.mask_rate,
        queue=v.queue if v.queue is not None else t.queue, clf_max_iter=t.clf_max_iter,
        clf_l2=t.clf_l2, threshold=t.threshold, per_label_thresholds=t.per_label_thresholds,
        logreg_c=list(t.logreg_c), logreg_extend=t.logreg_extend, precision_at=list(d.precision_at),
        knn_k=t.knn_k, threads=t.threads_per_worker, device=t.device,
        model=dict(v.model))  # MODEL_DEFAULTS filled in by the schema
    keys = MODEL_KEYS.get(variant)
    for k, val in (choices or {}).items():
        if keys is not None:
            if k not in keys:
                raise InputError(f"tuned choice {k!r} is not a hyperparameter of {variant} ({keys})")
            cfg.model[k] = val
            continue
        if k not in TUNABLE:
            raise InputError(f"tuned choice {k!r} is not tunable (tunable: {TUNABLE})")
        setattr(cfg, k, type(getattr(cfg, k))(val))
    return cfg
