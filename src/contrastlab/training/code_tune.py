"""Tuning of one code-retrieval variant under the shared protocol (stage
``tune_code@<variant>``; callable from a notebook): :func:`run_tuning`. Every variant gets
``code.tune.trials`` finished trials (Hyperband pruning after each seed); trial 0 is the
declared configuration; a trial trains one run per seed of ``code.tune.seeds`` (disjoint from
the final seeds) for at most ``code.tune.epochs`` epochs and scores the mean over seeds of the
validation score of each run's kept epoch, with its standard error. The runs stop, keep their
epoch and are scored by the rule ``code.tune.early_stopping``
(:data:`contrastlab.training.code.STOP_RULES`): ``mrr_plateau`` scores validation MRR, a
mean of every query's reciprocal rank (smooth); ``rank_at_10`` validation Rank@10, a count
(the studies committed before 2026-11-30). The final runs use ``code.train.early_stopping``.
A variant with an empty search space (the from-scratch ablations) is not tuned: its declared
configuration is scored once. Test functions are never read.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..data.code_inputs import load_code_data
from ..io import write_csv, write_json
from ..tracking import stage_run
from ..tuning import TuneResult, run_study, seed_mean, study_history, tune_kwargs, write_tuned
from .code import STOP_RULES, prepare_targets, train_code

__all__ = ["run_tuning", "study_fixed"]


def study_fixed(code, variant: str) -> dict:
    """The non-tuned configuration of ``variant``'s study, part of its identity (the study's
    name digest, :func:`contrastlab.tuning.run_study`): loss, residual, model, training
    settings (without the final runs' seeds, device, threads, workers and early-stopping rule),
    target space, epoch cap and tuning seeds; ``early_stopping`` only when
    ``code.tune.early_stopping`` is not ``rank_at_10``, the rule of the committed studies (so
    they stay valid, and another rule starts new studies)."""
    v, t = code.variants[variant], code.tune
    fixed = {"loss": v.loss, "residual": v.residual, "model": code.model.model_dump(),
             "train": code.train.model_dump(exclude={"seeds", "device", "threads", "workers",
                                                     "early_stopping"}),
             "target": code.target.model_dump(), "epochs": t.epochs, "seeds": t.seeds}
    if t.early_stopping != "rank_at_10":
        fixed["early_stopping"] = t.early_stopping
    return fixed


def run_tuning(code, variant: str, splits: str, teacher: str, tuned_dir: str,
               history_dir: str, journal_dir: str) -> TuneResult:
    """Tune ``variant`` of ``code`` (the ``code`` params section); writes
    ``<tuned_dir>/<variant>.json``, ``<history_dir>/<variant>.csv`` and the study journal (or,
    for an empty search, ``study.json``) under ``<journal_dir>/<variant>/``; an interrupted
    study resumes.

    Returns:
        The :class:`contrastlab.tuning.TuneResult` (best params, mean and standard error).

    Raises:
        KeyError: no such variant. FileNotFoundError: an input is missing.
    """
    if variant not in code.variants:
        raise KeyError(f"code.variants has no {variant!r}")
    v = code.variants[variant]
    data, hidden = load_code_data(splits, teacher)
    targets = prepare_targets(data, code.target.centre, code.target.whiten_eps)
    t = code.tune
    fixed = study_fixed(code, variant)
    declared = {"lr": v.lr if v.lr is not None else code.train.lr,
                "temperature": v.temperature if v.temperature is not None else code.train.init_temperature}
    default = {k: declared[k] for k in v.search if k in declared}
    score = STOP_RULES[t.early_stopping].score  # the kept epoch's validation score

    def objective(choices: dict, report=None):
        def kept(seed: int) -> float:
            s = train_code(data, hidden, v.loss, code.model, code.train, None, targets=targets,
                           seed=seed, lr=choices.get("lr"),
                           temperature=choices.get("temperature"), residual=v.residual,
                           epochs=t.epochs, early_stopping=t.early_stopping, progress=False)
            return next(r[score] for r in s["history"] if r["epoch"] == s["best_epoch"])
        return seed_mean(t.seeds, kept, report)

    out_dir = Path(journal_dir) / variant
    with stage_run("code", f"tune_code@{variant}", {"variant": variant, **fixed}) as tr:
        if v.search:
            res = run_study(track="code", variant=variant, space=v.search,
                            objective=objective, out_dir=out_dir, fixed=fixed, tracker=tr,
                            default=default or None, **tune_kwargs(t))
        else:  # nothing to search: the declared configuration, scored once, is the choice
            write_json(out_dir / "study.json", {
                "study": None, "variant": variant,
                "note": "empty search space: the declared configuration, scored once"})
            mean, se = objective({})
            res = TuneResult(study_name="none", best_params={}, best_value=mean, best_trial=0,
                             n_complete=1, n_failed=0, direction="maximize", best_se=se)
    write_tuned(Path(tuned_dir) / f"{variant}.json", res, track="code",
                variant=variant, objective=score, space=v.search,
                n_trials=t.trials if v.search else 1)
    if v.search:
        hist = study_history(track="code", variant=variant, space=v.search,
                             out_dir=out_dir, storage=t.storage, fixed=fixed)
    else:
        hist = pd.DataFrame({"trial": [0], "state": ["COMPLETE"], "value": [res.best_value],
                             "best_so_far": [res.best_value], "se": [res.best_se]})
    write_csv(Path(history_dir) / f"{variant}.csv", hist)
    return res
