"""Equal-budget hyperparameter tuning on validation data.

Protocol (one study per track and variant; every variant of a track gets the same settings)

1. **Equal budget, validation only** (Musgrave, Belongie & Lim, ECCV 2020, Sec. 4): every
   loss gets the same number of finished trials (``<track>.tune.trials``), each scored on the
   validation split only; the test split is read once, by the final runs.
2. **Sampler**: TPE (Bergstra, Bardenet, Bengio & Kegl, NeurIPS 2011, Sec. 4) in Optuna
   (Akiba, Sano, Yanase, Ohta & Koyama, KDD 2019), ``startup_trials`` random draws first. Its
   seed is *derived per study*: :func:`sampler_seed` = the first 4 bytes of
   SHA-256(``"<tune.seed>/<track>/<variant>"``), so two variants searching the same space do
   not evaluate the same configurations (with one shared seed they did, trial for trial, and
   their comparison measured the losses on identical draws rather than each loss's search).
3. **The default is trial 0**: given ``default`` (the variant's untuned configuration),
   a new study evaluates it first (``study.enqueue_trial``), so the chosen configuration is
   never worse than the default on the validation objective.
4. **Pruning**: an objective ``f(choices, report)`` calls ``report(step, value)`` with an
   intermediate validation score after ``step`` units of resource (epochs, folds; ``step``
   >= 1); the track's pruner (:class:`TuneParams` ``pruner``) may stop the trial there
   (``optuna.TrialPruned``): Hyperband (Li, Jamieson, DeSalvo, Rostamizadeh & Talwalkar,
   JMLR 2018), successive halving (Jamieson & Talwalkar, AISTATS 2016; asynchronous form of
   Li et al., MLSys 2020), or Optuna's median rule. The budget counts *finished* trials
   (complete + pruned + failed), so a pruned trial costs a slot but less compute.
5. **Uncertainty**: the objective may return ``(mean, standard_error)`` (e.g. over folds or
   training seeds); the SE is kept per trial (user attribute ``se``; column ``se`` of
   :func:`study_history`).
6. **Selection** (``select: best_mean``): the winner is the COMPLETE trial with the best
   mean objective (pruned and failed trials are never chosen). Ties go to the lower trial
   number (Optuna's ``best_trial``), so the default wins a tie.

Storage. A study lives in Optuna's journal file (``journal.log`` in the stage's output
folder, kept by DVC with ``persist: true``), so a rerun after an interruption continues it
(the trial left RUNNING is closed as interrupted, not counted, and its configuration runs
again, as on a shared study);
with ``storage`` set to an RDB URL (``postgresql+psycopg2://user:pw@host/db``) several
processes or machines run the same stage and share one study: each worker stops when the
study holds ``n_trials`` finished trials, and a trial asked for beyond the budget by a worker
that lost the race is dropped (recorded FAIL with user attribute ``surplus``; not counted,
not listed). The default is enqueued only by the process that created the study (the
database's unique study name decides) before it stores the protocol attributes; a worker
that opens the study meanwhile waits (up to 30 s) for those attributes, so two workers
starting at once evaluate the default once.
Workers can die. In an RDB study every trial beats a heartbeat (Optuna's ``heartbeat_interval``,
:data:`HEARTBEAT_S` seconds); a RUNNING trial silent for :data:`GRACE_S` seconds (its worker
was killed, its machine lost) is failed by the next worker that looks
(``optuna.storages.fail_stale_trials``) and re-queued with the same configuration
(``RetryFailedTrialCallback``, at most :data:`MAX_RETRY` times); a failed-and-retried trial
does not count against the budget, and a worker that finds the budget taken waits until the
other workers' trials have finished (or gone stale) before it stops, so the budget is met
with complete trials even when a worker is killed mid-trial (SIGKILL included).
The study name is ``<track>-<variant>-<digest>``, the digest covering the space, the fixed
configuration and the protocol version (:data:`PROTOCOL`); the sampler seed, default and
pruner are stored as study attributes and a rerun with different ones is refused.

Search space entries (:class:`SearchDim`)::

    temperature: {type: float, low: 0.05, high: 1.0, log: true}
    n_hard:      {type: int, low: 32, high: 512, log: true}
    mode:        {type: categorical, choices: [column, element]}

A dotted name (``feature_mask.0``) sets an element of a list-valued hyperparameter; the
objective receives the flat dict and applies it (:func:`apply_choices`).

A pick on the edge of a log-scale range can widen the space (``tune.widen`` rounds,
``tune.widen_trials`` trials each; :func:`widen_space`): the bound moves out by half the log
range, a probe in the new strip runs first, and the study keeps its name (the declared space);
each round is stored as a study attribute, so a resumed study widens the same way.
"""

from __future__ import annotations

# The package's modules, lowest first: space (search spaces, the study's identity), storage
# (journal / RDB, opening a study, the budget's trials), study (run_study), results (history,
# the tuned-choices JSON).
from .results import read_tuned, study_history, write_tuned
from .space import (PROTOCOL, PrunerName, SearchDim, SeedTrialTune, Strict, TuneParams,
                    TuneResult, apply_choices, distinct_seeds, make_pruner, sampler_seed,
                    space_digest, study_name, suggest, tune_kwargs)
from .storage import GRACE_S, HEARTBEAT_S, MAX_RETRY, rdb_url
from .storage import _open, _storage  # noqa: F401 - for tests that open a study directly
from .study import run_study, seed_mean, widen_space

__all__ = ["SearchDim", "TuneParams", "TuneResult", "PROTOCOL", "suggest", "study_name",
           "sampler_seed", "make_pruner", "tune_kwargs", "run_study", "study_history",
           "write_tuned", "read_tuned", "apply_choices", "rdb_url", "space_digest",
           "PrunerName", "HEARTBEAT_S", "GRACE_S", "MAX_RETRY", "SeedTrialTune",
           "distinct_seeds", "Strict", "widen_space", "seed_mean"]
