"""The study loop: :func:`run_study` runs (or continues) one variant's study until the budget
holds ``n_trials`` finished trials, as a composition of the steps below it; each trial is
logged as a nested MLflow run (protocol: :mod:`contrastlab.tuning`)."""

from __future__ import annotations

import inspect
import json
import math
import time
from pathlib import Path
from typing import Any, Callable, Literal, Mapping, Sequence

import numpy as np

from .space import (SearchDim, TuneResult, _check_default, make_pruner, sampler_seed,
                    study_name, suggest)
from .storage import (_PROTOCOL_ATTRS, GRACE_S, HEARTBEAT_S, MAX_RETRY, _budget_trials,
                      _fail_stale, _first_beat, _heartbeat_of, _open, _set_up,
                      _wait_for_set_up)

__all__ = ["run_study", "widen_space", "seed_mean", "EDGE_SHARE"]


def run_study(*, track: str, variant: str, space: Mapping[str, SearchDim],
              objective: Callable[..., Any], n_trials: int, seed: int,
              out_dir: str | Path, storage: str | None = None, startup_trials: int = 6,
              direction: Literal["maximize", "minimize"] = "maximize",
              fixed: Mapping[str, Any] | None = None, tracker=None,
              progress: bool = True, default: Mapping[str, Any] | None = None,
              pruner: Any = "none", min_resource: int = 1,
              max_resource: int | str = "auto", reduction_factor: int = 3,
              seed_key: str | None = None,
              heartbeat: tuple[int, int] | None = None, widen: int = 0,
              widen_trials: int = 4) -> TuneResult:
    """Run (or continue) one variant's study until it holds ``n_trials`` finished trials.

    Args:
        track, variant: name the study (with a digest of ``space``, ``fixed`` and
            :data:`PROTOCOL`).
        space: hyperparameter name -> :class:`SearchDim`.
        objective: on validation data only; ``choices`` holds one value per ``space`` key.
            ``f(choices)``, or ``f(choices, report)`` (a parameter named ``report``, or a
            second positional parameter without default) where ``report(step: int, value:
            float)`` records the validation score after ``step`` >= 1 units of resource and
            raises ``optuna.TrialPruned`` when the pruner stops the trial (let it propagate).
            Returns a float or ``(mean, standard_error)``. A ``FloatingPointError`` or a
            non-finite mean fails the trial; failed and pruned trials count against the
            budget (a diverging setting is a real outcome).
        n_trials: the budget of finished (complete + pruned + failed) trials.
        seed: base sampler seed; the study's TPE seed is :func:`sampler_seed` (``seed``,
            ``track``, ``seed_key`` or ``variant``); on a shared ``storage`` each worker
            process mixes in its host and pid, so workers do not draw the same configurations.
        out_dir: folder of the journal file (``journal.log``) when ``storage`` is None.
        storage: Optuna RDB URL to share the study across processes and machines.
        fixed: the non-tuned configuration; part of the study's identity (digest).
        tracker: a :class:`contrastlab.tracking.Tracker` of the parent run; each trial is
            logged as a nested run (params + objective) when it is active.
        default: the variant's untuned choices (a subset of ``space``'s keys), evaluated as
            trial 0 of a new study (``study.enqueue_trial``, once even when several workers
            start at once).
        pruner, min_resource, max_resource, reduction_factor: see :func:`make_pruner`
            (``"none"`` by default here; :class:`TuneParams` defaults to hyperband; pass
            ``**tune_kwargs(tune)``).
        seed_key: the name hashed into the sampler seed instead of ``variant`` (two studies
            that must draw the same configurations share it).
        heartbeat: ``(interval s, grace period s)`` of an RDB study's trial heartbeat
            (default ``(HEARTBEAT_S, GRACE_S)``; module docstring, "Workers can die").
        widen, widen_trials: at most ``widen`` rounds of widening (0: none). After the
            budget, when the best trial's value of a log-scale dimension lies in the outer
            :data:`EDGE_SHARE` of its log range, that bound moves out by half the log range
            (:func:`widen_space`), a probe (the best configuration with the moved value in
            the middle of the new strip) is enqueued and ``widen_trials`` more trials run on
            the wider space; again while the best lands on an edge. The study keeps its name
            (the declared space); each round is stored as study attribute ``widen_<r>``.

    Returns:
        :class:`TuneResult` of the COMPLETE trial with the best objective.

    Raises:
        RuntimeError: no trial completed (no configuration to choose).
        ValueError: ``default`` names a key outside ``space`` or a value it cannot take, or an
            existing study was run with another sampler seed, default or pruner.
    """
    from tqdm.auto import tqdm

    if n_trials < 1:
        raise ValueError(f"n_trials must be >= 1 (got {n_trials})")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)  # a DVC output even when the study is in an RDB
    name = study_name(track, variant, space, fixed)
    s_seed = sampler_seed(seed, track, seed_key or variant)
    default = _check_default(default, space) if default else None
    prune = make_pruner(pruner, min_resource=min_resource, max_resource=max_resource,
                        reduction_factor=reduction_factor, startup_trials=startup_trials)
    proto = _protocol(s_seed, default, pruner)
    opening = dict(out_dir=out_dir, storage=storage, seed=s_seed, startup=startup_trials,
                   direction=direction, pruner=prune, heartbeat=heartbeat)
    study = _open(name, **opening)
    _agree_on_protocol(study, name, storage, default, proto)
    if storage is None:
        _close_interrupted(study)
    done = len(_budget_trials(study))
    if done:  # reopened so the sampler's seed moves on with the trials already told
        study = _open(name, n_done=done, **opening)
    with_report = _wants_report(objective)
    bar = tqdm(total=n_trials, initial=min(done, n_trials), desc=f"tune {variant}",
               disable=not progress, leave=False)
    beat = (heartbeat or (HEARTBEAT_S, GRACE_S))[0]
    budget, current, rounds = n_trials, dict(space), []
    for r in range(widen + 1):
        if r:
            wider = _widen_round(study, r, current, budget, direction)
            if wider is None:
                break
            current, record = wider
            budget += widen_trials
            rounds.append({**record, "trials": widen_trials})
            bar.total = budget
        while _next_slot(study, budget, storage, beat):
            trial = study.ask()
            _first_beat(trial, study, storage)
            if storage is not None and _surplus(study, trial, budget):
                continue  # wait until the trials ahead have finished or gone stale
            choices = suggest(trial, current)
            state, value, se = _run_trial(study, trial, objective, choices, with_report=with_report,
                                          storage=storage, variant=variant, progress=progress)
            _log_trial(tracker, f"{variant} · trial {trial.number}", choices, value, state, se)
            bar.update(1)
    bar.close()
    return _result(study, name, direction, s_seed, widened=rounds or None)


#: Share of a log-scale dimension's log range, at either end, where a pick counts as on the edge.
EDGE_SHARE = 0.1


def seed_mean(seeds: Sequence[int], score: Callable[[int], float],
              report: Callable[[int, float], None] | None = None) -> tuple[float, float]:
    """An objective's value over training seeds: ``score(seed)`` for each seed in order, with
    the running mean reported after every seed but the last (``report(k, mean)``, the pruning
    hook :func:`run_study` passes; it may raise ``optuna.TrialPruned``).

    Returns:
        ``(mean, standard error)``: the standard error is the sample standard deviation
        (ddof 1) over ``sqrt(n)``, 0.0 for one seed.
    """
    scores = []
    for k, seed in enumerate(seeds, start=1):
        scores.append(float(score(seed)))
        if report is not None and k < len(seeds):
            report(k, float(np.mean(scores)))
    se = float(np.std(scores, ddof=1) / np.sqrt(len(scores))) if len(scores) > 1 else 0.0
    return float(np.mean(scores)), se


def widen_space(space: Mapping[str, SearchDim], best: Mapping[str, Any],
                edge_share: float = EDGE_SHARE) -> tuple[dict[str, SearchDim], dict[str, list]]:
    """``(space, moved)``: ``space`` with every log-scale dimension whose ``best`` value
    lies within ``edge_share`` of its log range from a bound moved out by half the log range
    (``high -> high * (high / low) ** 0.5``; an int dimension's new bound rounded outwards, a
    low bound of an int kept >= 1), and ``moved``: name -> ``[old low, old high, new low, new
    high]``. Linear and categorical dimensions never move (their bounds are often natural
    limits: a probability, a count, a list of options)."""
    out, moved = dict(space), {}
    for k, d in space.items():
        if d.type == "categorical" or not d.log or k not in best:
            continue
        lo, hi = math.log(d.low), math.log(d.high)
        frac = (math.log(best[k]) - lo) / (hi - lo)
        half = (hi - lo) / 2
        low, high = d.low, d.high
        if frac <= edge_share:
            low = math.exp(lo - half)
        elif frac >= 1 - edge_share:
            high = math.exp(hi + half)
        else:
            continue
        if d.type == "int":
            low, high = max(1, math.floor(low)), math.ceil(high)
        out[k] = d.model_copy(update={"low": float(low), "high": float(high)})
        moved[k] = [d.low, d.high, out[k].low, out[k].high]
    return out, moved


def _widen_round(study, r: int, space: dict, budget: int, direction: str):
    """Round ``r`` of widening: ``(wider space, record)``, or ``None`` when the best of the
    first ``budget`` finished trials is on no edge. The round is decided from those trials
    only and stored (study attribute ``widen_<r>``) with its probe enqueued once, so a resumed
    or shared study widens the same way."""
    from optuna.trial import TrialState

    key = f"widen_{r}"
    if key in study.user_attrs:
        rec = study.user_attrs[key]
        return {k: SearchDim(**v) for k, v in rec["space"].items()}, {"moved": rec["moved"]}
    first = sorted(_budget_trials(study), key=lambda t: t.number)[:budget]
    complete = [t for t in first if t.state == TrialState.COMPLETE]
    if not complete:
        return None
    sign = 1.0 if direction == "maximize" else -1.0
    best = min(complete, key=lambda t: (-sign * t.value, t.number))
    wider, moved = widen_space(space, best.params)
    if not moved:
        return None
    probe = dict(best.params)
    for k, (lo, hi, nlo, nhi) in moved.items():
        a, b = (nlo, lo) if nlo < lo else (hi, nhi)
        v = math.sqrt(a * b)
        probe[k] = round(v) if wider[k].type == "int" else v
    study.set_user_attr(key, {"space": {k: v.model_dump() for k, v in wider.items()},
                              "moved": moved, "probe": probe})
    study.enqueue_trial(probe)
    return wider, {"moved": moved}


# ------------------------------------------------------------------ the steps of run_study
def _protocol(s_seed: int, default: dict | None, pruner: Any) -> dict:
    """The protocol attributes stored with a study (:data:`~.storage._PROTOCOL_ATTRS`), as
    they read back from the storage (JSON round trip)."""
    proto = {"sampler_seed": s_seed, "default": default,
             "pruner": pruner if isinstance(pruner, str) or pruner is None
             else type(pruner).__name__}
    return json.loads(json.dumps(proto, default=str))


def _agree_on_protocol(study, name: str, storage: str | None, default: dict | None,
                       proto: dict) -> None:
    """Set up a study this process created (default trial, then the protocol attributes);
    for an existing one, wait for its creator's set-up on a shared storage, set it up when
    its creator stopped before, and refuse other settings than the stored ones.

    Raises:
        ValueError: the study was run with another sampler seed, default or pruner.
    """
    if study._created_here:
        _set_up(study, default, proto)
        return
    attrs = study.user_attrs
    if storage is not None and not all(k in attrs for k in _PROTOCOL_ATTRS):
        attrs = _wait_for_set_up(study)  # another worker created it a moment ago
    if not all(k in attrs for k in _PROTOCOL_ATTRS):
        _set_up(study, default, proto)  # its creator stopped before setting it up
    else:
        clash = {k: (attrs[k], proto[k]) for k in _PROTOCOL_ATTRS if attrs[k] != proto[k]}
        if clash:
            raise ValueError(f"study {name} was run with other settings ({clash}: stored, "
                             "requested); keep them or use a new storage / journal")


def _close_interrupted(study) -> None:
    """Single worker on a local journal: a RUNNING trial was interrupted (killed stage). It
    is closed as PRUNED with user attribute ``interrupted`` (not budget) and, as a shared
    study re-queues a dead worker's trial, its configuration is enqueued again (user
    attribute ``retry_of``: the interrupted trial's number), so the next trial evaluates it;
    a configuration interrupted more than :data:`MAX_RETRY` times is not re-queued. A trial
    interrupted before it drew its configuration re-queues nothing (the next draw replaces
    it)."""
    from optuna.trial import TrialState

    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        study._storage.set_trial_user_attr(t._trial_id, "interrupted", True)
        study.tell(t.number, state=TrialState.PRUNED)
        params = _configuration(t)
        if not params:
            continue
        tries = sum(u.user_attrs.get("interrupted", False) and _configuration(u) == params
                    for u in study.get_trials(deepcopy=False))
        if tries <= MAX_RETRY:
            study.enqueue_trial(params, user_attrs={"retry_of": t.number})


def _configuration(trial) -> dict:
    """The configuration a trial drew, or was enqueued with when it stopped before drawing."""
    return dict(trial.params) or dict(trial.system_attrs.get("fixed_params") or {})


def _next_slot(study, n_trials: int, storage: str | None, beat: float) -> bool:
    """True when the budget has a free slot for one more trial; False when it is met. On a
    shared storage, first fails (and re-queues) dead workers' trials, and while the slots are
    taken by other workers' running trials, waits until they finish or go stale."""
    while True:
        if storage is not None:
            _fail_stale(study)  # a dead worker's trial: FAIL, and re-queued
        if len(_budget_trials(study, running=True)) < n_trials:  # finished + running
            return True
        if storage is None or len(_budget_trials(study)) >= n_trials:
            return False
        time.sleep(min(1.0, beat))  # other workers' trials still run (or go stale)


def _surplus(study, trial, n_trials: int) -> bool:
    """Another worker may have asked for the last slot first: when the trials numbered before
    ``trial`` that are finished or running (alive or not) already fill the budget, ``trial``
    is recorded FAIL with user attribute ``surplus`` (not counted, not listed)."""
    from optuna.trial import TrialState

    ahead = [t for t in _budget_trials(study, running=True) if t.number < trial.number]
    if len(ahead) >= n_trials:
        trial.set_user_attr("surplus", True)
        study.tell(trial, state=TrialState.FAIL)
        return True
    return False


def _run_trial(study, trial, objective: Callable[..., Any], choices: dict[str, Any], *,
               with_report: bool, storage: str | None, variant: str,
               progress: bool) -> tuple[str, float | None, float | None]:
    """Evaluate ``objective`` on ``choices`` (beating the trial's heartbeat on an RDB) and
    tell the study: ``(state, value, se)`` with state FINISHED, PRUNED (the pruner stopped it
    through ``report``) or FAILED (a ``FloatingPointError`` or a non-finite objective)."""
    import optuna
    from optuna.trial import TrialState

    def report(step: int, value: float, _trial=trial) -> None:
        _trial.report(float(value), int(step))
        if _trial.should_prune():
            raise optuna.TrialPruned(f"pruned at step {step} (value {value})")

    try:
        with _heartbeat_of(trial, study, storage):
            out = objective(choices, report) if with_report else objective(choices)
        value, se = _objective_value(out)
    except optuna.TrialPruned as e:
        study.tell(trial, state=TrialState.PRUNED)
        if progress:
            print(f"tune {variant}: trial {trial.number} {e}", flush=True)
        return "PRUNED", None, None
    except FloatingPointError as e:
        study.tell(trial, state=TrialState.FAIL)
        print(f"tune {variant}: trial {trial.number} failed ({e})", flush=True)
        return "FAILED", None, None
    if se is not None:
        trial.set_user_attr("se", se)
    study.tell(trial, value)
    return "FINISHED", value, se


def _objective_value(out: Any) -> tuple[float, float | None]:
    """``(mean, standard error or None)`` of what an objective returned.

    Raises:
        TypeError: a tuple of another length than 2.
        FloatingPointError: a non-finite mean, or a negative or non-finite standard error.
    """
    se = None
    if isinstance(out, (tuple, list)):
        if len(out) != 2:
            raise TypeError(f"objective returned {len(out)} values; expected a float "
                            "or (mean, standard_error)")
        value, se = float(out[0]), float(out[1])
        if not (math.isfinite(se) and se >= 0):
            raise FloatingPointError(f"standard error is {se}")
    else:
        value = float(out)
    if not math.isfinite(value):
        raise FloatingPointError(f"objective is {value}")
    return value, se


def _wants_report(objective: Callable) -> bool:
    """True when ``objective`` takes the ``report`` callback: it has a parameter named
    ``report``, or its second positional parameter has no default."""
    try:
        params = list(inspect.signature(objective).parameters.values())
    except (TypeError, ValueError):
        return False
    if any(p.name == "report" for p in params):
        return True
    pos = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(pos) >= 2 and pos[1].default is inspect.Parameter.empty


def _result(study, name: str, direction: str, s_seed: int | None,
            widened: list | None = None) -> TuneResult:
    from optuna.trial import TrialState

    budget = _budget_trials(study)
    complete = [t for t in budget if t.state == TrialState.COMPLETE]
    if not complete:
        raise RuntimeError(f"study {name}: all {len(budget)} trials failed or were pruned")
    sign = 1.0 if direction == "maximize" else -1.0
    best = min(complete, key=lambda t: (-sign * t.value, t.number))  # lowest number on ties
    se = best.user_attrs.get("se")
    return TuneResult(study_name=name, best_params=dict(best.params),
                      best_value=float(best.value), best_trial=best.number,
                      n_complete=len(complete),
                      n_failed=sum(t.state == TrialState.FAIL for t in budget),
                      n_pruned=sum(t.state == TrialState.PRUNED for t in budget),
                      direction=direction, best_se=None if se is None else float(se),
                      sampler_seed=s_seed, widened=widened)


def _log_trial(tracker, name: str, choices: Mapping[str, Any], value: float | None,
               state: str, se: float | None = None) -> None:
    """One nested MLflow run per trial under the study's parent run (no-op when inactive):
    a child run (tag ``mlflow.parentRunId``) holding the trial's params, ``objective`` and
    ``objective_se``; status FINISHED, KILLED (pruned) or FAILED."""
    parent = getattr(tracker, "run_id", None)
    if not parent:
        return
    try:
        from mlflow.tracking import MlflowClient

        # the parent run's own client: a bare MlflowClient() would miss the project's store
        # when MLFLOW_TRACKING_URI is unset (contrastlab.tracking.tracking_uri)
        client = getattr(tracker, "_client", None) or MlflowClient()
        exp_id = client.get_run(parent).info.experiment_id
        run = client.create_run(exp_id, run_name=name,
                                tags={"mlflow.parentRunId": parent, "trial_state": state})
        rid = run.info.run_id
        for k, v in choices.items():
            client.log_param(rid, k, str(v))
        for metric, v in (("objective", value), ("objective_se", se)):
            if v is not None:
                client.log_metric(rid, metric, v)
        status = {"FINISHED": "FINISHED", "PRUNED": "KILLED"}.get(state, "FAILED")
        client.set_terminated(rid, status=status)
    except Exception as e:  # tracking must never fail a tuning run
        print(f"warning: MLflow trial logging failed: {e}", flush=True)
