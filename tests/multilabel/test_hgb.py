"""The HistGradientBoosting baseline: one scikit-learn model per label, against a plainly written
per-label reference; constant and rare labels; bad input; the row is declared, not hard-coded."""

import numpy as np
import pytest

from contrastlab.errors import InputError
from contrastlab.training.multilabel_hgb import HGB_KEYS, hgb_scores


def _data(n=160, f=6, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, f))
    y = np.stack([(x[:, 0] > 0), (x[:, 1] + x[:, 2] > 0.5), np.zeros(n, bool)], 1).astype(np.int64)
    y[:2, 2] = 1  # a rare label: two positives
    return x, y


def test_matches_a_per_label_reference_and_learns():
    from sklearn.ensemble import HistGradientBoostingClassifier

    x, y = _data()
    xq = np.random.default_rng(1).normal(size=(40, 6))
    params = {"max_iter": 30, "learning_rate": 0.2, "max_leaf_nodes": 8, "min_samples_leaf": 5}
    (got,) = hgb_scores(x, y, [xq], params, seed=3)
    assert got.shape == (40, 3) and np.all((got >= 0) & (got <= 1))
    for j in range(3):  # the reference: one plainly configured classifier per label
        early = min(y[:, j].sum(), len(y) - y[:, j].sum()) >= 2
        ref = HistGradientBoostingClassifier(early_stopping=early, random_state=3 * 100003 + j,
                                             **params).fit(x, y[:, j])
        np.testing.assert_allclose(got[:, j], ref.predict_proba(xq)[:, 1])
    # it learns the easy label: scores separate its positives from its negatives
    truth = xq[:, 0] > 0
    assert got[truth, 0].mean() > got[~truth, 0].mean() + 0.5


def test_constant_and_single_positive_labels():
    x, y = _data()
    y[:, 2] = 0
    y[:, 1] = 0
    y[7, 1] = 1  # one positive: no stratified early-stopping split, trains max_iter rounds
    xa, xb = x[:10], x[10:30]
    a, b = hgb_scores(x, y, [xa, xb], {"max_iter": 5}, seed=0)
    assert a.shape == (10, 3) and b.shape == (20, 3)
    assert np.all(a[:, 2] == 0) and np.all(b[:, 2] == 0)  # constant label scores its constant
    assert np.all(np.isfinite(a[:, 1]))
    y[:, 2] = 1
    (c,) = hgb_scores(x, y, [xa], {"max_iter": 5}, seed=0)
    assert np.all(c[:, 2] == 1)


def test_a_rerun_with_the_same_seed_gives_the_same_scores():
    x, y = _data()
    p = {"max_iter": 40, "learning_rate": 0.3}
    (a,) = hgb_scores(x, y, [x[:20]], p, seed=0)
    (b,) = hgb_scores(x, y, [x[:20]], p, seed=0)
    np.testing.assert_array_equal(a, b)


@pytest.mark.slow
def test_the_thread_count_does_not_change_the_scores():
    """A study may continue with more threads (``threads_per_worker`` is not part of its name):
    scikit-learn builds each feature's histogram in one thread, so the scores are identical."""
    x, y = _data(n=400, f=12)
    params = {"max_iter": 40, "learning_rate": 0.1, "max_leaf_nodes": 16, "min_samples_leaf": 5}
    one = hgb_scores(x, y, [x[:50]], params, seed=1, threads=1)[0]
    two = hgb_scores(x, y, [x[:50]], params, seed=1, threads=2)[0]
    np.testing.assert_array_equal(one, two)


def test_bad_input_is_one_clear_error():
    x, y = _data()
    with pytest.raises(InputError, match="unknown hyperparameter"):
        hgb_scores(x, y, [x], {"max_depthh": 3}, seed=0)
    with pytest.raises(InputError, match="hgb: x"):
        hgb_scores(x, y[:-1], [x], {}, seed=0)
    with pytest.raises(InputError, match="hgb: x"):
        hgb_scores(x, y, [x[:, :3]], {}, seed=0)
    with pytest.raises(InputError, match="label 0"):
        hgb_scores(x, y, [x], {"learning_rate": -1.0}, seed=0)


def test_row_is_declared_and_runs_through_run_seed():
    """``hgb`` is a baseline of the variant table whose model keys are HGB_KEYS; ``run_seed``
    scores it and picks thresholds on validation like every row."""
    from contrastlab.params import load_params
    from contrastlab.params.multilabel import BASELINES, MODEL_KEYS
    from contrastlab.training.multilabel import make_config, run_seed
    from contrastlab.utils import repo_root

    assert "hgb" in BASELINES and tuple(MODEL_KEYS["hgb"]) == HGB_KEYS
    ml = load_params(repo_root() / "params.yaml").multilabel
    cfg = make_config(ml, "yeast", "hgb", choices={"learning_rate": 0.3, "max_leaf_nodes": 4})
    assert cfg.model["learning_rate"] == 0.3 and cfg.model["max_iter"] == 100
    with pytest.raises(InputError):
        make_config(ml, "yeast", "hgb", choices={"temperature": 0.1})
    x, y = _data(n=200)
    d = {"x_train": x[:120], "y_train": y[:120], "x_val": x[120:160], "y_val": y[120:160],
         "x_test": x[160:], "y_test": y[160:]}
    r = run_seed(d, cfg, 0)
    assert r.scores.shape == (40, 3) and 0.05 <= r.metrics["threshold_val"] <= 0.95
    assert r.metrics["map"] > 0.5
