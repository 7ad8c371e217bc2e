"""The scikit-learn baselines of the multi-label track (variant-table methods ``logistic``,
``neighbours`` and ``forest``; ``boosting``: :mod:`contrastlab.training.multilabel_hgb`):
binary-relevance logistic regression with C chosen on validation (:func:`train_logreg`), the
label-averaging k-nearest-neighbour scorer (:func:`knn_scores`) and scikit-learn's multi-output
forests (:func:`forest_scores`, the class named by the row's ``estimator``).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..errors import InputError
from ..evaluation.multilabel import mean_average_precision
from ..evaluation.picks import loo_mean_average_precision, pick_record

__all__ = ["KNN_METRICS", "train_logreg", "knn_scores", "forest_scores"]

#: scikit-learn distances of the kNN baseline (the first is the default).
KNN_METRICS = ("cosine", "euclidean")  # not a loss name


def train_logreg(x: np.ndarray, y: np.ndarray, xva: np.ndarray, yva: np.ndarray, grid: list[float],
                 seed: int, extend: int = 3, picks: dict | None = None) -> tuple[Callable[[np.ndarray], np.ndarray], dict[str, list[float]], float]:
    """Binary-relevance logistic regression (scikit-learn ``LogisticRegression``, liblinear,
    L2), one classifier per label; ``C`` from ``grid`` by validation mAP (the smallest C on
    ties). A label constant in the training part gets its training frequency as score.

    ``grid`` must be increasing and log-spaced by a constant factor. When the best C is the
    grid's smallest or largest value, the grid grows by one factor in that direction (at most
    ``extend`` times): a maximiser on the edge means the grid did not bracket it. A choice
    still on an edge after ``extend`` extensions raises. With ``picks`` (a dict), the chosen C's
    record (:func:`contrastlab.evaluation.picks.pick_record`: margin in validation rows over
    every other fitted C) goes to ``picks["C"]``.

    Returns:
        ``(predict_proba [N, C], curve {C, val_map} in evaluation order, best C)``.

    Raises:
        InputError: fewer than 3 grid points, a grid not increasing, or the best C on an
        edge of the fully extended grid.
    """
    from sklearn.linear_model import LogisticRegression

    grid = [float(c) for c in grid]
    if len(grid) < 3 or any(b <= a for a, b in zip(grid, grid[1:])) or grid[0] <= 0:
        raise InputError(f"logreg_c must hold >= 3 increasing positive values, got {grid}")
    factor = grid[-1] / grid[-2]

    def fit(c: float):
        models = []
        for j in range(y.shape[1]):
            col = y[:, j]
            if col.min() == col.max():
                models.append(float(col[0]))
            else:
                models.append(LogisticRegression(C=c, solver="liblinear", random_state=seed,
                                                 max_iter=1000).fit(x, col))

        def predict(a: np.ndarray) -> np.ndarray:
            return np.stack([np.full(len(a), m) if isinstance(m, float) else m.predict_proba(a)[:, 1]
                             for m in models], axis=1)
        return predict

    curve: dict[str, list[float]] = {"C": [], "val_map": []}
    fitted: dict[float, tuple[float, Any]] = {}

    def score(c: float) -> None:
        if c not in fitted:
            pred = fit(c)
            s_va = pred(xva)
            m = mean_average_precision(yva, s_va)
            fitted[c] = (m, pred, loo_mean_average_precision(yva, s_va) if picks is not None else None)
            curve["C"].append(c)
            curve["val_map"].append(m)

    for c in grid:
        score(c)
    for _ in range(extend + 1):
        cs = sorted(fitted)
        best_c = max(cs, key=lambda c: (fitted[c][0], -c))  # smallest C on ties
        if cs[0] < best_c < cs[-1]:
            if picks is not None:
                picks["C"] = pick_record("validation mAP", cs, np.array([fitted[c][2][0] for c in cs]),
                                         np.stack([fitted[c][2][1] for c in cs]), cs.index(best_c))
            return fitted[best_c][1], curve, float(best_c)
        if _ == extend:
            break
        score(best_c / factor if best_c == cs[0] else best_c * factor)
    raise InputError(f"logistic regression: validation mAP is best at C = {best_c:g}, the edge of the "
                     f"grid {sorted(fitted)} after {extend} extension(s); widen multilabel.train.logreg_c")


def knn_scores(x: np.ndarray, y: np.ndarray, xq: np.ndarray, k: int, weights: str = "uniform",
               metric: str = KNN_METRICS[0]) -> np.ndarray:
    """Label scores of a k-nearest-neighbour multi-label scorer: for each query row the
    (weighted) mean of its ``k`` nearest training rows' label vectors (the posterior of the
    multi-label kNN rule before ML-kNN's Bayesian correction; Zhang & Zhou, Pattern Recognit.
    2007, Sec. 3). Exact search (scikit-learn ``NearestNeighbors``, brute force).

    Args:
        x: float ``[N, F]`` training features; y: {0,1} ``[N, C]``; xq: float ``[M, F]`` queries.
        k: neighbours (capped at ``N``).
        weights: ``uniform``, or ``distance`` (weight 1/d; a query at distance 0 from some
            training rows takes the mean of those rows only, as scikit-learn does).
        metric: ``cosine`` (1 - cosine similarity) or ``euclidean``.

    Returns:
        float64 ``[M, C]`` scores in [0, 1], rounded to 12 decimals (so that scores equal in
        exact arithmetic tie exactly, whatever the order of the floating-point sums).

    Raises:
        InputError: unknown weights/metric, k < 1, or shapes that disagree.
    """
    from sklearn.neighbors import NearestNeighbors

    x, xq = np.asarray(x, dtype=np.float64), np.asarray(xq, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if weights not in ("uniform", "distance") or metric not in KNN_METRICS:
        raise InputError(f"knn: weights {weights!r} / metric {metric!r}; expected uniform|distance / cosine|euclidean")
    if k < 1 or x.ndim != 2 or xq.ndim != 2 or len(x) != len(y) or x.shape[1] != xq.shape[1]:
        raise InputError(f"knn: k={k}, x {x.shape}, y {y.shape}, queries {xq.shape}")
    k = min(int(k), len(x))
    d, idx = NearestNeighbors(n_neighbors=k, metric=metric, algorithm="brute").fit(x).kneighbors(xq)
    if weights == "uniform":
        w = np.ones_like(d)
    else:
        d = np.maximum(d, 0.0)  # cosine distances may round below 0
        zero = d <= 1e-12
        w = np.where(zero.any(1, keepdims=True), zero.astype(np.float64), 1.0 / np.maximum(d, 1e-12))
    # rounded to 12 decimals: with distance weights a label that every neighbour carries scores
    # sum(w) / sum(w), which floating point gives as 1.0 or 1 - 1 ulp depending on the order of
    # the sums (BLAS threads); unrounded, such rows' ties were broken by that noise and mAP moved
    # by up to 4e-4 between two runs of the same code (tmc2007-500)
    return np.round(np.einsum("mk,mkc->mc", w, y[idx]) / w.sum(1, keepdims=True), 12)


def forest_scores(kind: str, x: np.ndarray, y: np.ndarray, queries: list[np.ndarray], params: dict[str, Any],
                  seed: int, chunk: int = 100) -> list[np.ndarray]:
    """Positive-class probabilities of a scikit-learn multi-output forest (``kind``: a
    multi-label baseline row of method ``forest``, fitted by the scikit-learn class its
    ``estimator`` names, e.g. ``ExtraTreesClassifier``; ``n_jobs = 1``).

    The ``n_estimators`` trees are grown in forests of ``chunk`` trees (seeds drawn from
    ``seed``) whose class probabilities are averaged: the same estimator as one forest (a forest's
    probability is the mean of its trees'), with the memory of ``chunk`` trees at a time.

    Args:
        x: float ``[N, F]``; y: {0,1} ``[N, C]``; queries: float arrays ``[M_i, F]``.
        params: ``n_estimators``, ``max_depth`` (0 = unlimited), ``max_features`` (``sqrt``,
            ``log2`` or a fraction), ``min_samples_leaf``.

    Returns:
        One float64 ``[M_i, C]`` array per query array (a label constant in training scores
        its constant).

    Raises:
        InputError: unknown ``kind`` or hyperparameter values scikit-learn rejects.
    """
    import sklearn.ensemble

    from .multilabel_core import track_row

    spec = track_row(kind)
    if spec is None or spec.method != "forest":
        raise InputError(f"forest_scores: unknown kind {kind!r}")
    cls = getattr(sklearn.ensemble, spec.estimator)
    n_trees = int(params.get("n_estimators", 500))
    mf = params.get("max_features", "sqrt")
    mf = mf if isinstance(mf, str) else (1.0 if float(mf) >= 1.0 else float(mf))
    depth = int(params.get("max_depth") or 0) or None
    y = np.asarray(y).astype(np.int64)
    out = [np.zeros((len(q), y.shape[1])) for q in queries]
    rng = np.random.default_rng(seed)
    done = 0
    while done < n_trees:
        n = min(chunk, n_trees - done)
        try:
            m = cls(n_estimators=n, max_depth=depth, max_features=mf,
                    min_samples_leaf=int(params.get("min_samples_leaf", 1)), n_jobs=1,
                    random_state=int(rng.integers(0, 2**31 - 1))).fit(x, y)
        except ValueError as e:
            raise InputError(f"{kind}: {e}") from None
        for o, q in zip(out, queries):
            probs = m.predict_proba(q)
            for j, (pj, cj) in enumerate(zip(probs, m.classes_)):
                o[:, j] += n * (pj[:, list(cj).index(1)] if 1 in cj else 0.0)
        done += n
    return [o / n_trees for o in out]
