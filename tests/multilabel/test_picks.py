"""Margins of the multi-label validation picks (contrastlab.evaluation.picks): leave-one-out
criteria against a plain recomputation without the row, the margin against a count where it
is known exactly, and every pick of a run recorded."""

from __future__ import annotations

import numpy as np
import pytest

from contrastlab.evaluation.multilabel import THRESHOLD_GRID, _f1s, mean_average_precision, threshold_pick
from contrastlab.evaluation.picks import (is_fragile, loo_f1_criterion, loo_mean_average_precision,
                                          removal_margin)


def _labels(rng, n, c):
    y = (rng.random((n, c)) < 0.25).astype(np.int64)
    y[:, -1] = 0
    y[rng.integers(n), -1] = 1          # a label with one positive: it leaves the mean without it
    y[:, -2] = 0                        # a label with no positive: never in the mean
    return y


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_loo_map_equals_recomputing_without_each_row(seed):
    rng = np.random.default_rng(seed)
    y = _labels(rng, 37, 6)
    s = rng.random((37, 6))
    full, loo = loo_mean_average_precision(y, s)
    assert full == pytest.approx(mean_average_precision(y, s), abs=1e-12)
    plain = [mean_average_precision(np.delete(y, i, 0), np.delete(s, i, 0)) for i in range(len(y))]
    np.testing.assert_allclose(loo, plain, atol=1e-12)


def test_loo_map_by_hand():
    # one label, ranks: pos, neg, pos -> AP = (1/1 + 2/3) / 2
    y = np.array([[1], [0], [1]])
    s = np.array([[0.9], [0.5], [0.1]])
    full, loo = loo_mean_average_precision(y, s)
    assert full == pytest.approx((1 + 2 / 3) / 2)
    # without row 0: neg, pos -> 1/2; without row 1: pos, pos -> 1; without row 2: pos, neg -> 1
    np.testing.assert_allclose(loo, [0.5, 1.0, 1.0])


@pytest.mark.parametrize("seed", [0, 1])
def test_loo_f1_criterion_equals_recomputing_without_each_row(seed):
    rng = np.random.default_rng(seed)
    y = _labels(rng, 30, 5)
    p = (rng.random((30, 5)) < 0.3).astype(np.int64)

    def crit(yy, pp):
        micro, per = _f1s(yy, pp)
        return 0.5 * (micro + per.mean())

    full, loo = loo_f1_criterion(y, p)
    assert full == pytest.approx(crit(y, p))
    np.testing.assert_allclose(loo, [crit(np.delete(y, i, 0), np.delete(p, i, 0)) for i in range(30)])


def _mean_loo(h):
    return (h.sum() - h) / (len(h) - 1)


def test_margin_of_a_count_is_the_difference_of_the_counts():
    n = 100
    pick, alt, other = np.zeros(n), np.zeros(n), np.zeros(n)
    pick[:40], alt[:37], alt[50:52], pick[60:62] = 1, 1, 1, 1      # 42 hits vs 39
    other[:30] = 1                                                 # 30 hits: further away
    full = [pick.mean(), alt.mean(), other.mean()]
    loo = np.stack([_mean_loo(pick), _mean_loo(alt), _mean_loo(other)])
    assert removal_margin(full, loo, 0) == (3, 1)
    assert removal_margin(full, loo, 2)[0] == 0  # a pick below another is decided by nothing
    # a tie is margin 0; one candidate: no runner-up
    assert removal_margin([0.5, 0.5], np.full((2, 4), 0.5), 1) == (0, 0)
    assert removal_margin([0.7], np.full((1, 4), 0.7), 0) == (4, None)
    with pytest.raises(ValueError):
        removal_margin([0.5, 0.4], np.zeros((3, 4)), 0)


def test_fragile_is_under_one_percent_of_the_rows():
    assert is_fragile(9, 1000) and not is_fragile(10, 1000)
    assert is_fragile(0, 78) and not is_fragile(1, 78)


def test_threshold_pick_takes_the_centre_of_a_plateau_and_records_it():
    rng = np.random.default_rng(3)
    y = (rng.random((400, 4)) < 0.3).astype(np.int64)
    s = np.clip(0.35 * y + 0.65 * rng.random((400, 4)), 0, 1)
    t, rec = threshold_pick(y, s)
    crit = []
    for g in THRESHOLD_GRID:
        micro, per = _f1s(y, (s >= g).astype(np.int64))
        crit.append(0.5 * (micro + per.mean()))
    crit = np.array(crit)
    smooth = np.array([crit[max(0, k - 1):k + 2].mean() for k in range(len(crit))])
    assert t == pytest.approx(THRESHOLD_GRID[int(np.argmax(smooth))])
    assert rec["chosen"] == t and rec["runner_up"] != t and rec["n_val"] == 400
    assert 0 <= rec["margin"] <= 400 and rec["fragile"] == is_fragile(rec["margin"], 400)
    assert threshold_pick(y, s, margin=False) == (t, None)


def test_every_pick_of_a_run_records_its_margin():
    """A run of each kind records a margin for each of its validation picks: the threshold
    always, early stopping where it trains by steps, C for logistic regression; and the
    metrics file's summary holds every seed's."""
    from contrastlab.training.multilabel import TrainConfig, run_seed
    from contrastlab.training.multilabel_final import pick_summary

    g = np.random.default_rng(0)
    y = (g.random((200, 4)) < 0.4).astype(np.uint8)
    x = (y @ g.normal(size=(4, 8)) + g.normal(size=(200, 8))).astype(np.float32)
    data = {"x_train": x[:120], "y_train": y[:120], "x_val": x[120:160], "y_val": y[120:160],
            "x_test": x[160:], "y_test": y[160:]}
    for variant, loss, expected in (("logreg", None, {"threshold", "C"}),
                                    ("bce", None, {"threshold", "early_stopping"}),
                                    ("all", "all", {"threshold", "early_stopping"})):
        cfg = TrainConfig(variant=variant, loss=loss, hidden=[16], enc_dim=8, proj_dim=8, batch_size=32,
                          max_steps=20, eval_every=5, patience=100, lr=3e-3, logreg_c=[0.01, 0.1, 1.0, 10.0])
        runs = [run_seed(data, cfg, s) for s in (0, 1)]
        r = runs[0]
        assert set(r.picks) == expected, variant
        for rec in r.picks.values():
            assert rec["n_val"] == 40 and 0 <= rec["margin"] <= 40
        if "early_stopping" in r.picks:
            assert r.picks["early_stopping"]["chosen"] in r.curve["step"]
        if "C" in r.picks:
            assert r.picks["C"]["chosen"] == r.chosen["C"]
        assert r.picks["threshold"]["chosen"] == r.metrics["threshold_val"]
        summary = pick_summary(runs)
        assert set(summary) == expected
        assert all(len(v["margin_seed"]) == 2 and v["fragile_seeds"] <= 2 for v in summary.values())
        bare = run_seed(data, cfg, 0, margins=False)  # the tuning objective's run: same fit, no margins
        assert bare.picks == {} and bare.metrics == r.metrics and bare.chosen == r.chosen
        if "early_stopping" in r.picks:  # the kept check is the curve's first maximum
            i = r.curve["step"].index(r.picks["early_stopping"]["chosen"])
            assert r.curve["val_map"][i] == max(r.curve["val_map"])


def test_picks_table_counts_runs_margins_and_fragile_ones():
    from contrastlab.reporting.picks import missing_picks, picks_table

    rec = {"criterion": "validation mAP", "n_val": 200, "margin_seed": [1, 4, 10], "fragile_seeds": 1}
    thr = {"criterion": "F1", "n_val": 200, "margin_seed": [3, 3, 3], "fragile_seeds": 0}
    runs = {"yeast": {"bce": {"best_step": 50.0, "picks": {"early_stopping": rec, "threshold": thr}},
                      "logreg": {"C": 1.0, "picks": {"threshold": thr}}}}
    t = picks_table(runs)
    by_pick = {r[1]: r for r in t.rows}
    assert by_pick["F1 threshold"][2:] == ["6", "200", "3 (1.5 %)", "3 (1.5 %)", "0 (0 %)"]
    assert by_pick["early-stopping step"][2:] == ["3", "200", "4 (2.0 %)", "1 (0.5 %)", "1 (33 %)"]
    assert missing_picks(runs["yeast"]["bce"]) == []
    assert missing_picks(runs["yeast"]["logreg"]) == ["C"]  # chose C, recorded no margin
    assert missing_picks({"best_step": 3.0}) == ["threshold", "early_stopping"]
    assert picks_table({"yeast": {"knn": {}}}) is None


def test_committed_multilabel_runs_record_every_pick_margin():
    """Every final, hybrid and default run of the multi-label stages records the margin of each
    validation pick it made (a rerun after a change to the pick rules writes them)."""
    import json
    from pathlib import Path

    from contrastlab.reporting.picks import missing_picks

    mdir = Path(__file__).resolve().parents[2] / "reports" / "metrics" / "multilabel"
    files = sorted(mdir.glob("*.json")) + sorted(mdir.glob("default/*/*.json"))
    files = [f for f in files if not f.name.endswith("_dataset.json")]
    assert len(files) > 80
    missing = {f.relative_to(mdir).as_posix(): m for f in files
               if (m := missing_picks(json.loads(f.read_text())))}
    assert not missing, f"{len(missing)} run(s) without a recorded pick margin, e.g. {list(missing.items())[:3]}"


def test_committed_preset_runs_record_every_pick_margin():
    """Every run committed under a multi-label preset's folder (reports/metrics/multilabel_<preset>/:
    bibtex and tmc2007-500 on all training rows; the tuned, declared-values, step-cap and
    pre-training + BCE runs behind their tables, the report's combined tables among them) was
    made under the current pick rules and records the margin of every validation pick; a run
    kept from before them fails here."""
    import json
    from pathlib import Path

    from contrastlab.reporting.picks import missing_picks

    metrics = Path(__file__).resolve().parents[2] / "reports" / "metrics"
    files = [f for d in sorted(metrics.glob("multilabel_*")) for f in sorted(d.glob("*/*.json"))
             if f.parent.name != "studies"]  # studies/: a study's choice, not a run
    # bibtex: 13 declared-values, 12 tuned, 8 at the 2,000-step cap, 2 hybrids;
    # tmc2007-500 on all rows: 13 declared-values, 12 tuned, 1 hybrid
    assert len(files) == 35 + 26
    for t in metrics.glob("multilabel_*/combined_table.json"):  # the report's tables read only these
        src = json.loads(t.read_text())["source"]
        assert {metrics.parent.parent / s for s in src.values()} <= {f.parent for f in files}
    missing = {f.relative_to(metrics).as_posix(): m for f in files
               if (m := missing_picks(json.loads(f.read_text())))}
    assert not missing, f"without a recorded pick margin: {sorted(missing)}"
