"""Tuning of one graph variant under the shared protocol (stage ``tune_graph@<variant>``):
:func:`run_tuning`.

An equal-budget Optuna study on the validation nodes (Musgrave et al., ECCV 2020):
``graph.tune.trials`` finished trials over ``graph.variants.<variant>.search``, trial 0 the
declared configuration, a per-variant TPE seed, a pruner (Hyperband by default; Li et al.,
JMLR 2018). A trial trains each seed of ``graph.tune.seeds`` (disjoint from the final seeds)
and scores the linear probe's accuracy on the 500 validation nodes (test nodes never read;
the probe's C picked by ``graph.tune.probe_criterion``), reporting the running mean; it
returns ``(mean, standard error)``. A variant without a search
space is scored once.
"""

from __future__ import annotations

import pandas as pd
import torch

from ..data.planetoid import load_planetoid
from ..io import write_csv
from ..tracking import stage_run
from ..tuning import TuneResult, run_study, seed_mean, study_history, tune_kwargs, write_tuned
from .graph import default_choices, fit_and_probe, graph_run_config

__all__ = ["run_tuning", "study_fixed", "trial_probe"]


def trial_probe(g):
    """``graph.probe`` with the trials' C criterion, ``graph.tune.probe_criterion``."""
    return g.probe.model_copy(update={"criterion": g.tune.probe_criterion})


def study_fixed(g, variant: str) -> dict:
    """The non-searched settings in ``variant``'s study identity: the configuration, the
    trials' probe, seeds and objective. The probe's criterion is left out when it is
    ``accuracy``, the rule of the studies committed before the criterion existed (their
    journals resume); any other criterion names new studies."""
    probe = trial_probe(g).model_dump()
    if probe["criterion"] == "accuracy":
        del probe["criterion"]
    return {"config": graph_run_config(g, variant).flat(), "probe": probe,
            "seeds": g.tune.seeds, "objective": "val_acc"}


def run_tuning(g, variant: str, data_path: str, study_dir: str, tuned_dir: str,
               plots_dir: str) -> TuneResult:
    """Tune ``variant`` of ``g`` (the ``graph`` params section).

    Writes ``<study_dir>/<variant>/journal.log`` (the Optuna journal; an interrupted study
    resumes), ``<tuned_dir>/<variant>.json`` (the choices ``train_graph`` reads) and
    ``<plots_dir>/<variant>.csv`` (trial history: value, best so far, params). MLflow: one
    parent run ``tune_graph@<variant>`` with a nested run per trial.

    Returns:
        The :class:`contrastlab.tuning.TuneResult`.

    Raises:
        KeyError: no such variant. FileNotFoundError: the Planetoid data is missing.
    """
    base = graph_run_config(g, variant)
    space = g.variants[variant].search
    torch.set_num_threads(g.threads)
    data, _ = load_planetoid(data_path, g.dataset)
    tune = g.tune
    probe, fixed = trial_probe(g), study_fixed(g, variant)

    def objective(choices: dict, report=None):
        cfg = base.with_choices(choices)
        return seed_mean(tune.seeds, lambda s: fit_and_probe(data, cfg, s, probe)["val_acc"],
                         report)

    out_dir = f"{study_dir}/{variant}"
    logged = {"variant": variant, "tune": tune.model_dump(), "base": base.flat(),
              "search": {k: v.model_dump(exclude_none=True) for k, v in space.items()}}
    with stage_run("graph", f"tune_graph@{variant}", logged) as tracker:
        if space:
            res = run_study(track="graph", variant=variant, space=space, objective=objective,
                            out_dir=out_dir, fixed=fixed, tracker=tracker,
                            default=default_choices(base, space), **tune_kwargs(tune))
        else:  # nothing to search: the declared configuration, scored once, is the choice
            res = TuneResult(study_name="none", best_params={}, best_value=objective({})[0],
                             best_trial=0, n_complete=1, n_failed=0, direction="maximize")
        tracker.log_metrics({"best_val_acc": res.best_value, "n_complete": res.n_complete,
                             "n_failed": res.n_failed})
        tracker.log_params({f"chosen.{k}": v for k, v in res.best_params.items()})
    write_tuned(f"{tuned_dir}/{variant}.json", res, track="graph", variant=variant,
                objective="linear-probe accuracy on the 500 validation nodes",
                space=space, n_trials=tune.trials)
    if space:
        hist = study_history(track="graph", variant=variant, space=space, out_dir=out_dir,
                             storage=tune.storage, fixed=fixed)
    else:
        hist = pd.DataFrame({"trial": [0], "state": ["COMPLETE"], "value": [res.best_value],
                             "best_so_far": [res.best_value]})
    write_csv(f"{plots_dir}/{variant}.csv", hist)
    return res
