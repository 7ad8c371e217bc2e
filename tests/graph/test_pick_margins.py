"""The graph track's validation picks and their margins: the probe's C, the baselines'
(K, normalisation, C) and the committed runs that must record them (the supervised
references' early-stopping epoch: tests/graph/test_supervised.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from contrastlab.evaluation.graph_baselines import select_on_validation
from contrastlab.evaluation.picks import FRAGILE_SHARE, count_pick_record
from contrastlab.evaluation.probe import logreg_probe

ROOT = Path(__file__).resolve().parents[2]


def test_count_pick_record_by_hand():
    r = count_pick_record("acc", [0.1, 1.0, 10.0, 100.0], [10, 15, 12, 12], 1, 500)
    # the gap to the best other candidate (the first of the two with 12), in items
    assert (r["chosen"], r["runner_up"], r["margin"], r["n_val"]) == (1.0, 10.0, 3, 500)
    assert r["fragile"]  # 3 < 1 % of 500
    tie = count_pick_record("acc", [1, 2, 3], [7, 9, 9], 2, 10)  # a tie-break kept epoch 3
    assert (tie["runner_up"], tie["margin"], tie["fragile"]) == (2, 0, True)
    wide = count_pick_record("acc", [1, 2], [80, 20], 0, 100)
    assert (wide["margin"], wide["fragile"]) == (60, False)
    one = count_pick_record("acc", [[2, "l2", 0.1]], [5], 0, 9)
    assert (one["runner_up"], one["margin"], one["chosen"]) == (None, 9, [2, "l2", 0.1])
    with pytest.raises(ValueError):
        count_pick_record("acc", [1, 2], [3], 0, 10)
    with pytest.raises(ValueError):
        count_pick_record("acc", [1, 2], [3, 4], 2, 10)


def _blobs(seed: int = 0, n: int = 240, sep: float = 1.0):
    rng = np.random.default_rng(seed)
    y = rng.choice(3, n, p=[0.5, 0.3, 0.2])
    x = rng.normal(size=(n, 6))
    x[np.arange(n), y] += sep
    m = np.zeros((3, n), bool)
    m[0, :60], m[1, 60:150], m[2, 150:] = True, True, True
    return x, y, m


def _val_correct(x, y, m, c: float) -> int:
    """Validation points a plain scikit-learn fit at ``C = c`` gets right (no normalisation)."""
    from sklearn.linear_model import LogisticRegression

    clf = LogisticRegression(C=c, max_iter=2000).fit(x[m[0]], y[m[0]])
    return int((clf.predict(x[m[1]]) == y[m[1]]).sum())


def test_the_probe_records_its_c_and_margin_against_independent_fits():
    x, y, m = _blobs()
    r = logreg_probe(x, y, *m, c_grid=[1e-3, 1e-2, 0.1, 1.0, 10.0], normalize="none")
    counts = [_val_correct(x, y, m, c) for c in r["c_grid"]]
    assert r["val_correct"] == counts and r["val_acc"] == counts[r["c_grid"].index(r["C"])] / 90
    p = r["pick"]
    assert p["chosen"] == r["C"] and p["n_val"] == 90
    others = [k for c, k in zip(r["c_grid"], counts) if c != r["C"]]
    assert p["margin"] == max(counts) - max(others)
    assert counts[r["c_grid"].index(p["runner_up"])] == max(others)


def test_the_baselines_pick_is_over_every_feature_set_normalisation_and_c():
    x, y, m = _blobs(1)
    feats = {1: x * 0.0 + np.random.default_rng(2).normal(size=x.shape), 2: x}  # noise, signal
    probe = dict(c_grid=[1e-2, 0.1, 1.0, 10.0], edge="extend", max_extend=4)
    r, (key, norm), pick = select_on_validation(feats, (y, *m), probe, ["none"])
    assert key == 2 and pick["chosen"] == [2, "none", r["C"]]
    every = {(k, c): _val_correct(f, y, m, c) for k, f in feats.items()
             for c in logreg_probe(f, y, *m, normalize="none", **probe)["c_grid"]}
    best = every[(2, r["C"])]
    assert best == max(every.values())
    assert pick["margin"] == best - max(v for kc, v in every.items() if kc != (2, r["C"]))


def _records(path: Path):
    m = json.loads(path.read_text())
    return m if "logreg_acc_mean" not in m else {path.stem: m}


def _check(es: dict, chosen: list, where: str) -> None:
    assert es["chosen_seed"] == chosen, f"{where}: recorded picks {es['chosen_seed']} vs {chosen}"
    assert len(es["margin_seed"]) == len(chosen) and min(es["margin_seed"]) >= 0, where
    assert es["fragile_seeds"] == sum(x < FRAGILE_SHARE * es["n_val"] for x in es["margin_seed"]), where
    assert es["n_val"] == 500, where  # Cora's public validation split


def test_every_committed_graph_pick_records_its_margin():
    """A committed graph run whose linear-probe C, baseline configuration or early-stopping
    epoch has no margin per seed fails here."""
    seen = 0
    for f in sorted((ROOT / "reports" / "metrics" / "graph").rglob("*.json")):
        for name, m in _records(f).items():
            where = f"{f.relative_to(ROOT)}:{name}"
            picks = m.get("picks") or {}
            if "probe_C" in m:
                assert "C" in picks, f"{where}: the probe's C without its margin"
                _check(picks["C"], m["probe_C"], where)
            if "chosen_epoch" in m:
                assert "early_stopping" in picks, f"{where}: early stopping without its margin"
                _check(picks["early_stopping"], m["chosen_epoch"], where)
            if "K" in m or "normalize" in m:
                conf = picks["configuration"]
                _check(conf, [[m.get("K", 0), m["normalize"], m["C"]]], where)
            if name == "random_gcn":
                assert len(picks["C"]["margin_seed"]) == m["n_seeds"], where
            seen += bool(picks)
    assert seen >= 3 * 3 + 3 + 3  # final, default, ablation of 3 variants; 3 baselines; 3 references
