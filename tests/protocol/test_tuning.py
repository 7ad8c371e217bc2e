"""contrastlab.tuning: search spaces, the equal budget, resuming, failed trials."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from contrastlab.tuning import (SearchDim, apply_choices, read_tuned, run_study,
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
