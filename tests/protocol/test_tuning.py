"""contrastlab.tuning: search spaces, the equal budget, resuming, failed trials."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from contrastlab.tuning import (SearchDim, apply_choices, read_tuned, run_study, seed_mean,
                                study_history, study_name, write_tuned)


@pytest.mark.parametrize("bad", [
    {"type": "float", "low": 1.0, "high": 0.5},
    {"type": "float", "low": 0.0, "high": 1.0, "log": True},
    {"type": "float", "low": 0.0},
    {"type": "categorical", "choices": []},
    {"type": "categorical", "choices": [1], "low": 0},
    {"type": "int", "low": 0.5, "high": 3},
    {"type": "float", "low": 0.1, "high": 1.0, "log": True, "step": 0.1},
    {"type": "float", "low": 0.1, "high": 1.0, "bogus": 1},
])
def test_searchdim_rejects(bad):
    with pytest.raises(ValidationError):
        SearchDim(**bad)


def test_apply_choices_lists_and_dicts():
    cfg = {"lr": 1e-3, "feature_mask": [0.3, 0.4], "opt": {"beta": 0.9}}
    out = apply_choices(cfg, {"lr": 0.01, "feature_mask.1": 0.1, "opt.beta": 0.5})
    assert out == {"lr": 0.01, "feature_mask": [0.3, 0.1], "opt": {"beta": 0.5}}
    assert cfg["feature_mask"] == [0.3, 0.4] and cfg["opt"]["beta"] == 0.9  # not mutated
    with pytest.raises(KeyError):
        apply_choices(cfg, {"nope.0": 1})


SPACE = {"x": SearchDim(type="float", low=-2.0, high=2.0),
         "k": SearchDim(type="int", low=1, high=4),
         "c": SearchDim(type="categorical", choices=["a", "b"])}


def _obj(ch):
    return -(ch["x"] - 0.5) ** 2 - 0.1 * ch["k"] + (0.2 if ch["c"] == "b" else 0.0)


def test_budget_best_and_resume(tmp_path):
    kw = dict(track="t", variant="v", space=SPACE, seed=0, out_dir=tmp_path, startup_trials=3)
    r1 = run_study(objective=_obj, n_trials=4, progress=False, **kw)
    assert r1.n_complete == 4 and (tmp_path / "journal.log").exists()
    # raising the budget continues the same study: only the new trials run
    calls = []
    r2 = run_study(objective=lambda ch: calls.append(ch) or _obj(ch), n_trials=10,
                   progress=False, **kw)
    assert len(calls) == 6 and r2.n_complete == 10
    assert r2.best_value >= r1.best_value
    hist = study_history(track="t", variant="v", space=SPACE, out_dir=tmp_path)
    assert list(hist["trial"]) == list(range(10))
    assert hist["best_so_far"].is_monotonic_increasing
    assert hist["value"].max() == pytest.approx(r2.best_value)
    # the same budget again runs nothing and leaves the journal (a DVC output) byte-equal
    before = (tmp_path / "journal.log").read_bytes()
    assert run_study(objective=lambda ch: 1 / 0, n_trials=10, progress=False, **kw).n_complete == 10
    assert (tmp_path / "journal.log").read_bytes() == before


def test_failed_trials_count_against_the_budget(tmp_path):
    def obj(ch):
        if ch["x"] > 0:
            raise FloatingPointError("loss became nan")
        return ch["x"]

    r = run_study(track="t", variant="f", space=SPACE, objective=obj, n_trials=6, seed=1,
                  out_dir=tmp_path, progress=False)
    assert r.n_complete + r.n_failed == 6 and r.best_params["x"] <= 0


def test_all_failed_is_an_error(tmp_path):
    def obj(ch):
        raise FloatingPointError("nan")

    with pytest.raises(RuntimeError, match="all 2 trials failed"):
        run_study(track="t", variant="g", space=SPACE, objective=obj, n_trials=2, seed=0,
                  out_dir=tmp_path, progress=False)


def test_changed_space_is_a_new_study():
    other = dict(SPACE, x=SearchDim(type="float", low=-1.0, high=2.0))
    assert study_name("t", "v", SPACE) != study_name("t", "v", other)
    assert study_name("t", "v", SPACE, {"epochs": 1}) != study_name("t", "v", SPACE, {"epochs": 2})


def test_write_and_read_tuned(tmp_path):
    r = run_study(track="t", variant="w", space=SPACE, objective=_obj, n_trials=2, seed=0,
                  out_dir=tmp_path, progress=False)
    p = tmp_path / "tuned.json"
    write_tuned(p, r, track="t", variant="w", objective="val", space=SPACE, n_trials=2)
    assert set(read_tuned(p)) == {"x", "k", "c"}
    assert json.loads(p.read_text())["budget_trials"] == 2
    with pytest.raises(FileNotFoundError):
        read_tuned(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ValueError, match="not valid JSON"):
        read_tuned(tmp_path / "bad.json")


def test_mlflow_parent_run_with_one_nested_run_per_trial(tmp_path, monkeypatch):
    import mlflow

    from contrastlab.tracking import stage_run

    monkeypatch.setenv("CONTRASTLAB_MLFLOW", "1")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    with stage_run("graph", "tune_graph@v", {"budget": 3}) as tracker:
        run_study(track="t", variant="v", space=SPACE, objective=_obj, n_trials=3, seed=0,
                  out_dir=tmp_path / "s", progress=False, tracker=tracker)
        parent = tracker.run_id
    client = mlflow.tracking.MlflowClient()
    exp = client.get_experiment_by_name("contrastlab-graph")
    runs = client.search_runs([exp.experiment_id],
                              filter_string=f"tags.mlflow.parentRunId = '{parent}'")
    assert len(runs) == 3
    assert all("objective" in r.data.metrics and set(r.data.params) == {"x", "k", "c"}
               for r in runs)


# ------------------------------------------------------------------ protocol 2
def test_each_variant_has_its_own_sampler_seed(tmp_path):
    import hashlib

    from contrastlab.tuning import sampler_seed

    want = int.from_bytes(hashlib.sha256(b"0/t/a").digest()[:4], "big")
    assert sampler_seed(0, "t", "a") == want != sampler_seed(0, "t", "b")
    default = {"x": 0.0, "k": 2, "c": "a"}
    hist = {}
    for v in ("a", "b"):
        run_study(track="t", variant=v, space=SPACE, objective=_obj, n_trials=6, seed=0,
                  startup_trials=3, out_dir=tmp_path / v, default=default, progress=False)
        hist[v] = study_history(track="t", variant=v, space=SPACE, out_dir=tmp_path / v)
    cols = ["x", "k", "c"]
    rows = {v: [tuple(r) for r in h[cols].itertuples(index=False)] for v, h in hist.items()}
    assert rows["a"][0] == rows["b"][0] == (0.0, 2, "a")  # the default, trial 0 of both
    assert all(ra != rb for ra, rb in zip(rows["a"][1:], rows["b"][1:]))  # trials 1..5 differ


def test_default_is_trial_0_and_never_beaten_by_a_worse_choice(tmp_path):
    # the default is the optimum of this objective: random draws almost never reach it
    default = {"x": 0.5, "k": 1, "c": "b"}
    r = run_study(track="t", variant="d", space=SPACE, objective=_obj, n_trials=4, seed=0,
                  startup_trials=3, out_dir=tmp_path, default=default, progress=False)
    hist = study_history(track="t", variant="d", space=SPACE, out_dir=tmp_path)
    assert hist.loc[0, ["x", "k", "c"]].tolist() == [0.5, 1, "b"]
    assert hist.loc[0, "value"] == pytest.approx(_obj(default))
    assert r.best_params == default and r.best_trial == 0
    assert r.best_value >= hist.loc[0, "value"]
    with pytest.raises(ValueError, match="not in the search space"):
        run_study(track="t", variant="e", space=SPACE, objective=_obj, n_trials=1, seed=0,
                  out_dir=tmp_path, default={"nope": 1}, progress=False)
    with pytest.raises(ValueError, match="is not one of"):
        run_study(track="t", variant="e", space=SPACE, objective=_obj, n_trials=1, seed=0,
                  out_dir=tmp_path, default={"c": "z"}, progress=False)


def test_rerun_with_other_seed_is_refused(tmp_path):
    kw = dict(track="t", variant="s", space=SPACE, objective=_obj, n_trials=2,
              out_dir=tmp_path, progress=False)
    run_study(seed=0, **kw)
    with pytest.raises(ValueError, match="other settings"):
        run_study(seed=1, **kw)


def test_standard_error_is_stored_per_trial(tmp_path):
    def obj(ch):
        return _obj(ch), 0.01 * ch["k"]

    r = run_study(track="t", variant="se", space=SPACE, objective=obj, n_trials=4, seed=0,
                  out_dir=tmp_path, progress=False)
    hist = study_history(track="t", variant="se", space=SPACE, out_dir=tmp_path)
    assert hist["se"].tolist() == pytest.approx((0.01 * hist["k"]).tolist())
    assert r.best_se == pytest.approx(0.01 * r.best_params["k"])


def test_seed_mean_reports_running_means_and_returns_the_standard_error():
    reported, scored = [], []

    def score(seed):
        scored.append(seed)
        return {3: 0.5, 7: 0.7, 11: 0.9}[seed]

    mean, se = seed_mean([3, 7, 11], score, lambda k, v: reported.append((k, v)))
    assert scored == [3, 7, 11]
    assert reported == [(1, 0.5), (2, pytest.approx(0.6))]  # not after the last seed
    assert mean == pytest.approx(0.7) and se == pytest.approx(0.2 / 3 ** 0.5)  # sd 0.2, n 3
    assert seed_mean([5], lambda s: 0.25) == (0.25, 0.0)

    def prune(k, v):
        raise RuntimeError("pruned")
    with pytest.raises(RuntimeError):  # the hook's exception (Optuna's TrialPruned) stops it
        seed_mean([3, 7], score, prune)


@pytest.mark.parametrize("pruner", ["median", "hyperband", "successive_halving"])
def test_report_prunes_and_pruned_trials_count_against_the_budget(tmp_path, pruner):
    steps = []

    def obj(ch, report):
        q = _obj(ch)
        for step in range(1, 10):
            steps.append(step)
            report(step, q - 1.0 / step)
        return q

    r = run_study(track="t", variant="p", space=SPACE, objective=obj, n_trials=12, seed=0,
                  startup_trials=2, out_dir=tmp_path, pruner=pruner, progress=False)
    hist = study_history(track="t", variant="p", space=SPACE, out_dir=tmp_path)
    assert len(hist) == 12 and r.n_complete + r.n_pruned + r.n_failed == 12
    assert r.n_pruned > 0 and (hist["state"] == "PRUNED").sum() == r.n_pruned
    assert len(steps) < 9 * 12  # pruned trials stopped before their last step
    done = hist[hist["state"] == "COMPLETE"]
    assert r.best_value == pytest.approx(done["value"].max())  # chosen among COMPLETE only
    assert hist.loc[hist["trial"] == r.best_trial, "state"].item() == "COMPLETE"


def test_tune_params_and_pruners():
    import optuna

    from contrastlab.tuning import TuneParams, make_pruner, tune_kwargs

    t = TuneParams()
    assert t.pruner == "hyperband" and t.select == "best_mean"
    assert isinstance(make_pruner(t.pruner), optuna.pruners.HyperbandPruner)
    assert isinstance(make_pruner("successive_halving"), optuna.pruners.SuccessiveHalvingPruner)
    assert isinstance(make_pruner("median"), optuna.pruners.MedianPruner)
    assert isinstance(make_pruner("none"), optuna.pruners.NopPruner)
    with pytest.raises(ValueError, match="unknown pruner"):
        make_pruner("asha")
    with pytest.raises(ValidationError):
        TuneParams(pruner="asha")
    with pytest.raises(ValidationError):
        TuneParams(min_resource=4, max_resource=2)
    kw = tune_kwargs(TuneParams(trials=3, pruner="median"))
    assert kw["n_trials"] == 3 and kw["pruner"] == "median" and kw["storage"] is None


def test_an_interrupted_trial_is_not_budget(tmp_path):
    from optuna.trial import TrialState

    from contrastlab.tuning import _open

    kw = dict(track="t", variant="i", space=SPACE, seed=0, out_dir=tmp_path, progress=False)
    run_study(objective=_obj, n_trials=2, **kw)
    study = _open(study_name("t", "i", SPACE), out_dir=tmp_path, storage=None, seed=0,
                  startup=1, direction="maximize")
    study.ask()  # a stage killed during trial 2 leaves it RUNNING
    r = run_study(objective=_obj, n_trials=3, **kw)
    assert r.n_complete == 3 and r.n_pruned == 0
    states = {t.number: t.state for t in study.get_trials()}
    assert states[2] == TrialState.PRUNED and states[3] == TrialState.COMPLETE
    assert list(study_history(track="t", variant="i", space=SPACE, out_dir=tmp_path)["trial"]) \
        == [0, 1, 3]


def test_an_interrupted_configuration_is_retried_as_on_a_shared_study(tmp_path):
    """A trial killed after it drew its configuration (a local journal) is closed as
    interrupted and its configuration is the next trial's, as a shared study re-queues a dead
    worker's trial; a configuration interrupted MAX_RETRY + 1 times is not re-queued."""
    from optuna.trial import TrialState

    from contrastlab.tuning import MAX_RETRY, _open
    from contrastlab.tuning.space import suggest
    from contrastlab.tuning.study import _close_interrupted

    def study(variant):
        return _open(study_name("t", variant, SPACE), out_dir=tmp_path / variant, storage=None,
                     seed=0, startup=1, direction="maximize")

    kw = dict(track="t", variant="r", space=SPACE, seed=0, out_dir=tmp_path / "r",
              progress=False)
    run_study(objective=_obj, n_trials=2, **kw)
    killed = suggest(study("r").ask(), SPACE)  # the stage is killed during trial 2
    r = run_study(objective=_obj, n_trials=3, **kw)
    assert r.n_complete == 3
    trials = {t.number: t for t in study("r").get_trials()}
    assert trials[2].state == TrialState.PRUNED and trials[2].user_attrs["interrupted"]
    assert trials[3].state == TrialState.COMPLETE and trials[3].params == killed
    assert trials[3].user_attrs["retry_of"] == 2
    assert list(study_history(track="t", variant="r", space=SPACE, out_dir=tmp_path / "r")
                ["trial"]) == [0, 1, 3]

    # one configuration killed again and again: re-queued after each of its first MAX_RETRY
    # interruptions, then dropped (the next trial is a new draw)
    kw.update(variant="q", out_dir=tmp_path / "q")
    run_study(objective=_obj, n_trials=2, **kw)
    drawn = []
    while len(drawn) < 3 * (MAX_RETRY + 1):  # bounded: a re-queue without end fails below
        s = study("q")
        waiting = s.get_trials(states=(TrialState.WAITING,))
        if drawn and not waiting:
            break
        drawn.append(suggest(s.ask(), SPACE))
        _close_interrupted(s)
    assert len(drawn) == MAX_RETRY + 1 and all(d == drawn[0] for d in drawn)
    run_study(objective=_obj, n_trials=3, **kw)
    last = study("q").get_trials()[-1]
    assert last.state == TrialState.COMPLETE and "retry_of" not in last.user_attrs
    assert last.params != drawn[0]


def test_seed_alias_draws_the_alias_configurations(tmp_path):
    """multilabel.tune.seed_alias (Sim-Dis Eq. 13 -> ANY: the same gradient) routes the aliased
    study's TPE seed through its alias's name, so both studies try the same configurations;
    any other pair of variants draws different ones."""
    from contrastlab.params.multilabel import MultilabelTune
    from contrastlab.training.multilabel_tune import study_seed_key

    tune = MultilabelTune(seed_alias={"simdis_eq13": "any"})
    assert study_seed_key(tune, "simdis_eq13", "yeast") == "any-yeast"
    assert study_seed_key(tune, "any", "yeast") is None
    rows = {}
    for v in ("any", "simdis_eq13", "all"):
        name = f"{v}-yeast"
        run_study(track="multilabel", variant=name, space=SPACE, objective=_obj, n_trials=6,
                  seed=0, startup_trials=3, out_dir=tmp_path / v, progress=False,
                  seed_key=study_seed_key(tune, v, "yeast"))
        h = study_history(track="multilabel", variant=name, space=SPACE, out_dir=tmp_path / v)
        rows[v] = [tuple(r) for r in h[["x", "k", "c"]].itertuples(index=False)]
    assert rows["simdis_eq13"] == rows["any"]
    assert all(a != b for a, b in zip(rows["all"], rows["any"]))


def test_multilabel_study_name_ignores_the_thread_count():
    """A multi-label study is named by what changes its results, not by how many threads run
    it: the committed HistGradientBoosting studies keep their names (created with one thread),
    a study continues under ``threads_per_worker: 2``, and a real change (the folds) renames it."""
    from pathlib import Path

    from contrastlab.params import load_params
    from contrastlab.training.multilabel import make_config
    from contrastlab.training.multilabel_tune import study_identity
    from contrastlab.tuning import study_name

    root = Path(__file__).resolve().parents[2]
    ml = load_params(root / "params.yaml").multilabel
    space = {k: SearchDim(**v) for k, v in ml.variants["hgb"].search.items()}
    base = make_config(ml, ml.tune.datasets[0], "hgb")
    default = {k: base.model.get(k) for k in space}
    journal = (root / "reports/tune/multilabel/hgb/journal.log").read_text()

    def name(m, ds):
        return study_name("multilabel", f"hgb-{ds}", space, study_identity(m, "hgb", ds, default))

    for ds in ml.tune.datasets:
        assert f'"study_name":"{name(ml, ds)}"' in journal, ds
    ds = ml.tune.datasets[0]
    more = ml.model_copy(update={"train": ml.train.model_copy(update={"threads_per_worker": 2})})
    assert more.train.threads_per_worker == 2 and name(more, ds) == name(ml, ds)
    other = ml.model_copy(update={"tune": ml.tune.model_copy(update={"folds": ml.tune.folds + 1})})
    assert name(other, ds) != name(ml, ds)


LOG_SPACE = {"lr": SearchDim(type="float", low=1e-5, high=1e-3, log=True),
             "drop": SearchDim(type="float", low=0.0, high=0.5)}


def _peak_beyond_high(c):
    """Best at lr = 1e-2, beyond the declared high 1e-3; ``drop`` best at its edge 0.5."""
    import math
    return -(math.log10(c["lr"]) + 2.0) ** 2 - (c["drop"] - 0.6) ** 2


def test_widen_space_moves_only_log_bounds_at_the_edge():
    from contrastlab.tuning.study import widen_space

    wide, moved = widen_space(LOG_SPACE, {"lr": 9e-4, "drop": 0.5})
    assert set(moved) == {"lr"}  # the linear dimension's bound is a natural limit: kept
    assert wide["lr"].low == 1e-5 and wide["lr"].high == pytest.approx(1e-2)  # + half the log range
    assert wide["drop"] == LOG_SPACE["drop"]
    wide, moved = widen_space(LOG_SPACE, {"lr": 1.2e-5, "drop": 0.1})
    assert wide["lr"].low == pytest.approx(1e-6) and wide["lr"].high == 1e-3
    assert widen_space(LOG_SPACE, {"lr": 1e-4, "drop": 0.1})[1] == {}  # the middle: nothing moves
    ints = {"n": SearchDim(type="int", low=2, high=8, log=True)}
    wide, _ = widen_space(ints, {"n": 2})
    assert wide["n"].low == 1 and wide["n"].high == 8  # rounded outwards, kept >= 1


def test_widening_follows_a_pick_on_the_edge_and_resumes_the_same(tmp_path):
    common = dict(track="t", variant="v", space=LOG_SPACE, objective=_peak_beyond_high, seed=0,
                  startup_trials=3, progress=False, n_trials=6, default={"lr": 5e-4, "drop": 0.4})
    plain = run_study(out_dir=tmp_path / "plain", **common)
    assert plain.best_params["lr"] <= 1e-3 and plain.widened is None
    res = run_study(out_dir=tmp_path / "wide", widen=2, widen_trials=3, **common)
    assert res.widened and res.widened[0]["moved"]["lr"][:2] == [1e-5, 1e-3]
    assert res.best_params["lr"] > 1e-3  # found beyond the declared space
    assert res.best_value > plain.best_value
    n = res.n_complete + res.n_failed + res.n_pruned
    assert n == 6 + 3 * len(res.widened)
    again = run_study(out_dir=tmp_path / "wide", widen=2, widen_trials=3, **common)  # resumed: no new trial
    assert (again.best_trial, again.best_params, again.widened) == (res.best_trial, res.best_params,
                                                                     res.widened)
    write_tuned(tmp_path / "t.json", res, track="t", variant="v", objective="f", space=LOG_SPACE,
                n_trials=6)
    assert json.loads((tmp_path / "t.json").read_text())["widened"] == res.widened


def test_widening_leaves_a_pick_in_the_middle_alone(tmp_path):
    import math

    res = run_study(track="t", variant="m", space=LOG_SPACE, seed=0, startup_trials=3, progress=False,
                    n_trials=6, out_dir=tmp_path, widen=2, default={"lr": 1e-4, "drop": 0.2},
                    objective=lambda c: -(math.log10(c["lr"]) + 4.0) ** 2)
    assert res.widened is None and res.n_complete == 6
