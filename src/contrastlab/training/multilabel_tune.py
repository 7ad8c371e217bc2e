"""Equal-budget Optuna search for one multi-label variant, one study per data set of
``multilabel.tune.datasets`` (stage ``tune_multilabel@<variant>``; callable from a
notebook): :func:`run_tuning`.

one study per data set in ``multilabel.tune.datasets``.

Objective of a trial on data set ``d`` (``contrastlab.training.multilabel.cv_objective``): the
mean validation mAP over ``multilabel.tune.folds`` iterative-stratification folds (Sechidis et
al. 2011) of ``d``'s training part (its train + validation rows; the test split is never
read), fold ``f`` trained with seed ``tune.run_seeds[f]`` (disjoint from the final seeds,
checked by the params schema); its standard error over folds is recorded beside it. Every
variant gets ``tune.trials`` finished trials per data set over the search space declared
beside it in ``params.yaml`` (``multilabel.variants.<variant>.search``: temperature, learning
rate, masking rate, queue size for the losses; depth, feature fraction and leaf size for the
forests; k, weighting and metric for kNN); trial 0 is the variant's ``params.yaml`` values
(the values used on the data sets not tuned). The sampler seed is ``tune.seed`` offset by a
hash of (variant, data set); a variant in ``tune.seed_alias`` uses its alias's seed
(``simdis_eq13`` -> ``any``: the same gradient, so the same configurations are drawn). A variant without a search space (``logreg``, whose C is picked
on validation inside every run) gets a JSON with no params and no study.

Pruning (``tune.pruner``, default ``none``): each fold but the last reports the running mean
as step ``folds done`` (a trial whose folds are all computed is never pruned, as the other
tracks never report their last seed), so ``hyperband`` with ``min_resource: 1``, ``max_resource: folds``,
``reduction_factor: 3`` is the graph and code tracks' pruner (Li et al., JMLR 2018) over folds
instead of seeds. A pruned trial counts against the budget and is never chosen. A pruner other
than ``none`` enters the study name (``fixed["pruner"]``), so switching it starts new studies
next to the committed ones instead of refusing them, and the JSON gains ``n_pruned``.

Outputs: ``reports/tuned/multilabel/<variant>.json`` (``datasets.<d>.params``: the choices
``train_multilabel`` uses on ``d``; a data set not listed uses the ``params.yaml`` values),
``reports/plots/tune/multilabel/<variant>.csv`` (trial history, column ``dataset``),
``reports/tune/multilabel/<variant>/journal.log`` (the Optuna studies; persist, committed so a
fresh clone does not retune and an interrupted run continues) and, beside it,
``fold_se.json`` (each trial's standard error over folds, keyed by its choices; written by
studies run before :func:`contrastlab.tuning.run_study` kept the standard errors, now only read).

``--only <d>`` runs the study of ``d`` alone and writes the JSON with the data sets whose
studies are complete (a partial run; the DVC command runs every data set).
"""

from __future__ import annotations

import json
import time
import zlib
from pathlib import Path

from ..errors import InputError, UnknownNameError
from ..io import write_csv, write_json
from ..tracking import stage_run

__all__ = ["run_tuning", "study_identity", "study_seed", "study_seed_key"]


def study_identity(ml, variant: str, ds: str, default: dict) -> dict:
    """What a study's name (``<track>-<variant>-<digest>``) covers besides its space: the data
    set, the cross-validation folds and seeds, the training and data settings, the variant's
    declaration, its default (trial 0) and the pruner when there is one.

    ``multilabel.train.threads_per_worker`` is an execution setting, not part of the study: it
    is recorded as 1 whatever its value, so a study started on one core continues on more (the
    scikit-learn baselines give identical scores for any thread count; a torch row's float
    sums may differ in their last bits). Studies created before this rule ran with 1, so their
    names are unchanged.

    Args:
        ml: the validated ``multilabel`` params; variant: a key of ``ml.variants``;
        ds: a data set name; default: the variant's declared values of the searched keys.

    Returns:
        A JSON-serialisable dict, the ``fixed`` argument of :func:`contrastlab.tuning.run_study`.
    """
    tune = ml.tune
    train = ml.train.model_dump()
    train["threads_per_worker"] = 1
    fixed = {"dataset": ds, "folds": tune.folds, "run_seeds": list(tune.run_seeds),
             "train": train, "data": ml.data[ds].model_dump(),
             "variant": ml.variants[variant].model_dump(exclude={"search"}), "default": default}
    if tune.pruner != "none":  # a pruned search is another study than the unpruned one
        fixed["pruner"] = {"name": tune.pruner, "min_resource": tune.min_resource,
                           "max_resource": tune.folds,  # 'auto' and folds: one protocol
                           "reduction_factor": tune.reduction_factor}
    return fixed


def study_seed(base: int, variant: str, dataset: str) -> int:
    """Sampler seed of one (variant, data set) study: ``base`` + CRC-32 of ``variant/dataset``
    (so two variants with the same space do not draw the same configurations)."""
    return (int(base) + zlib.crc32(f"{variant}/{dataset}".encode())) % (2**31)


def study_seed_key(tune, variant: str, dataset: str) -> str | None:
    """The name hashed into the TPE seed of ``variant``'s study on ``dataset`` in place of its
    own (``<alias>-<dataset>`` for a variant in ``tune.seed_alias``, else ``None``): an aliased
    variant draws exactly its alias's configurations."""
    alias = tune.seed_alias.get(variant)
    return f"{alias}-{dataset}" if alias else None


def run_tuning(ml, variant: str, only: str | None, data_dir: str, tuned_dir: str, plots_dir: str,
               study_dir: str, params_file: str = "params.yaml") -> dict:
    """Tune ``variant`` of ``ml`` (the ``multilabel`` params section) on every data set of
    ``ml.tune.datasets`` (``only``: that one alone) and write its tuned-choices JSON, trial
    history and study journal (see the module docstring).

    Returns:
        ``{dataset: {"params", "best_value", "best_value_se", "best_trial", ...}}`` ({} for
        a variant without a search space).

    Raises:
        contrastlab.errors.UnknownNameError: no such variant. contrastlab.errors.InputError:
            ``only`` is not a tuned data set. FileNotFoundError: a data set is not built.
    """
    if variant not in ml.variants:
        raise UnknownNameError(f"{params_file}: multilabel.variants has no entry {variant!r}")
    tune = ml.tune
    if only is not None and only not in tune.datasets:
        raise InputError(f"--only {only}: not in multilabel.tune.datasets {tune.datasets}")
    import pandas as pd

    from ..tuning import SearchDim, run_study, study_history

    space = {k: SearchDim(**v) for k, v in ml.variants[variant].search.items()}
    out_json = Path(tuned_dir) / f"{variant}.json"
    out_dir = Path(study_dir) / variant
    if not space:
        write_json(out_json, {"track": "multilabel", "variant": variant, "params": {}, "datasets": {},
                              "note": "no search space: nothing tuned here"})
        write_csv(Path(plots_dir) / f"{variant}.csv",
                  pd.DataFrame({"dataset": [], "trial": [], "value": [], "best_so_far": []}))
        out_dir.mkdir(parents=True, exist_ok=True)
        print(f"tune_multilabel@{variant}: no search space")
        return {}
    from safetensors.numpy import load_file

    from .multilabel import cv_folds, cv_objective, make_config, tuning_rows

    vp = ml.variants[variant]
    # trial 0: the variant's params.yaml values (what the untuned data sets use)
    base_cfg = make_config(ml, (tune.datasets or ml.datasets)[0], variant)
    default = {k: (base_cfg.model.get(k) if base_cfg.model else getattr(base_cfg, k)) for k in space}
    todo = [only] if only else list(tune.datasets)
    results, hists = {}, []
    t_all = time.perf_counter()
    with stage_run("multilabel", f"tune_multilabel@{variant}", {"space": vp.search, "tune": tune}) as tracker:
        for ds in tune.datasets:
            src = Path(data_dir) / ds
            fixed = study_identity(ml, variant, ds, default)
            seed = study_seed(tune.seed, tune.seed_alias.get(variant, variant), ds)
            name = f"{variant}-{ds}"
            if ds not in todo:
                # a partial run (--only): keep the data sets whose studies are already complete
                try:
                    hist = study_history(track="multilabel", variant=name, space=space, out_dir=out_dir,
                                         storage=tune.storage, fixed=fixed)
                except Exception:  # noqa: BLE001 - no such study yet
                    continue
                if hist.empty or "state" not in hist or hist["state"].isin(["COMPLETE", "FAIL"]).sum() < tune.trials:
                    continue

                # complete: run_study below asks for no trial, so the data is not read
                def objective(choices: dict, report=None, _name=name):
                    raise RuntimeError(f"{_name}: the study is complete, yet a trial was asked for")
            elif not (src / "meta.json").exists():
                raise FileNotFoundError(f"{src / 'meta.json'}: missing (run build_multilabel@{ds} first)")
            else:
                arrays = load_file(str(src / "data.safetensors"))
                enc = json.loads((src / "meta.json").read_text())["encoder"]
                x, y = tuning_rows(arrays)  # train + validation rows only: the test split is never read
                del arrays
                folds = cv_folds(y, tune.folds, tune.seed)
                make_config(ml, ds, variant, enc)  # fails here on a bad config, before any trial

                def objective(choices: dict, report=None, _ds=ds, _x=x, _y=y, _folds=folds, _enc=enc):
                    cfg = make_config(ml, _ds, variant, _enc, choices)
                    return cv_objective(_x, _y, _folds, cfg, list(tune.run_seeds), report)

            # the objective's standard errors as written by studies run before run_study
            # recorded them (read only)
            se_file = out_dir / "fold_se.json"
            ses = json.loads(se_file.read_text()).get(name, {}) if se_file.exists() else {}
            t0 = time.perf_counter()
            res = run_study(track="multilabel", variant=name, space=space, objective=objective,
                            n_trials=tune.trials, seed=seed, out_dir=out_dir, storage=tune.storage,
                            startup_trials=tune.startup_trials, fixed=fixed, tracker=tracker,
                            progress=False, default=default, pruner=tune.pruner,
                            min_resource=tune.min_resource, max_resource=tune.folds,
                            reduction_factor=tune.reduction_factor, widen=tune.widen,
                            widen_trials=tune.widen_trials,
                            seed_key=study_seed_key(tune, variant, ds))
            hist = study_history(track="multilabel", variant=name, space=space, out_dir=out_dir,
                                 storage=tune.storage, fixed=fixed)
            se = ses.get(json.dumps(res.best_params, sort_keys=True, default=str))
            for col in ("value_se", "se"):
                if col in hist and res.best_trial in set(hist["trial"]):
                    se = hist.loc[hist["trial"] == res.best_trial, col].iloc[0]
            results[ds] = {"params": {k: (round(v, 6) if isinstance(v, float) else v)
                                      for k, v in res.best_params.items()},
                           "best_value": round(res.best_value, 6),
                           "best_value_se": None if se is None or se != se else round(float(se), 6),
                           "best_trial": res.best_trial, "n_complete": res.n_complete,
                           "n_failed": res.n_failed, "study": res.study_name, "sampler_seed": seed,
                           "default_params": default}
            if tune.pruner != "none":
                results[ds]["n_pruned"] = res.n_pruned
            hists.append(hist.assign(dataset=ds))
            print(f"tune_multilabel@{variant} {ds}: best CV val mAP {res.best_value:.4f} with "
                  f"{res.best_params} (trial {res.best_trial}; {res.n_complete} complete, "
                  f"{res.n_failed} failed; {time.perf_counter() - t0:.0f}s)", flush=True)
    write_json(out_json, {
        "track": "multilabel", "variant": variant, "direction": "maximize",
        "objective": (f"mean validation mAP over {tune.folds} iterative-stratification folds of the "
                      f"training part (train + validation rows), fold seeds {list(tune.run_seeds)}"),
        "budget_trials": tune.trials, "space": {k: v.model_dump(exclude_none=True) for k, v in space.items()},
        "params": {}, "datasets": results,
        "untuned_datasets_use": "the variant's params.yaml values (default_params)"})
    hist = pd.concat(hists, ignore_index=True) if hists else pd.DataFrame({"dataset": []})
    write_csv(Path(plots_dir) / f"{variant}.csv", hist[["dataset", *[c for c in hist if c != "dataset"]]])
    print(f"tune_multilabel@{variant}: {sorted(results)} tuned ({time.perf_counter() - t_all:.0f}s)")
    return results
