"""Gradient-boosting baseline of the multi-label track: binary relevance (one model per label)
with scikit-learn's ``HistGradientBoostingClassifier``.

Gradient boosting (Friedman, Ann. Statist. 2001) on histogram-binned features (the LightGBM
scheme, Ke et al., NeurIPS 2017, as implemented in scikit-learn). scikit-learn's histogram
gradient boosting has no native multi-output classifier, so each label gets its own binary
model (binary relevance, Tsoumakas & Katakis 2007). Each model stops early on its own
validation loss: ``validation_fraction`` of its training rows (stratified by scikit-learn),
``n_iter_no_change`` rounds without improvement (so a rare label stops after a few rounds);
a label with fewer than two positives or two negatives in training has no such split and
trains ``max_iter`` rounds, and a label constant in training scores its constant. Only the
training rows given are read.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InputError

__all__ = ["HGB_KEYS", "hgb_scores"]

#: Hyperparameters of the baseline (``multilabel.variants.hgb.model``), scikit-learn's names.
HGB_KEYS = ("max_iter", "learning_rate", "max_leaf_nodes", "min_samples_leaf", "l2_regularization",
            "validation_fraction", "n_iter_no_change")


def hgb_scores(x: np.ndarray, y: np.ndarray, queries: list[np.ndarray], params: dict[str, Any],
               seed: int, threads: int = 1) -> list[np.ndarray]:
    """Positive-class probabilities of one ``HistGradientBoostingClassifier`` per label.

    Args:
        x: float ``[N, F]`` training features; y: {0,1} ``[N, C]`` training labels.
        queries: float arrays ``[M_i, F]`` to score.
        params: keys of :data:`HGB_KEYS` (``max_iter``, ``learning_rate``, ``max_leaf_nodes``,
            ``min_samples_leaf``, ``l2_regularization``, ``validation_fraction``,
            ``n_iter_no_change``); missing ones take scikit-learn's defaults, early stopping
            always on where the label allows it.
        seed: ``random_state`` of label ``j`` is ``(seed * 100003 + j) mod 2**32`` (the early-stopping split).
        threads: OpenMP threads scikit-learn may use (``threadpoolctl``).

    Returns:
        One float64 ``[M_i, C]`` array per query array, values in [0, 1].

    Raises:
        InputError: mismatched shapes, an unknown key, or values scikit-learn rejects.
    """
    from sklearn.ensemble import HistGradientBoostingClassifier
    from threadpoolctl import threadpool_limits

    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y)
    if x.ndim != 2 or y.ndim != 2 or len(x) != len(y) or any(np.ndim(q) != 2 or np.shape(q)[1] != x.shape[1]
                                                             for q in queries):
        raise InputError(f"hgb: x {x.shape}, y {y.shape}, queries {[np.shape(q) for q in queries]}")
    bad = sorted(set(params) - set(HGB_KEYS))
    if bad:
        raise InputError(f"hgb: unknown hyperparameter(s) {bad}; known: {list(HGB_KEYS)}")
    kw = {k: params[k] for k in HGB_KEYS if k in params and params[k] is not None}
    for k in ("max_iter", "max_leaf_nodes", "min_samples_leaf", "n_iter_no_change"):
        if k in kw:
            kw[k] = int(kw[k])
    out = [np.zeros((len(q), y.shape[1])) for q in queries]
    with threadpool_limits(limits=max(1, int(threads)), user_api="openmp"):
        for j in range(y.shape[1]):
            yj = (y[:, j] > 0).astype(np.int64)
            npos = int(yj.sum())
            if npos in (0, len(yj)):
                for o in out:
                    o[:, j] = float(yj[0]) if len(yj) else 0.0
                continue
            early = min(npos, len(yj) - npos) >= 2
            try:
                m = HistGradientBoostingClassifier(early_stopping=early, random_state=(seed * 100003 + j) % 2**32,
                                                   **kw).fit(x, yj)
            except ValueError as e:
                raise InputError(f"hgb: label {j}: {e}") from None
            for o, q in zip(out, queries):
                o[:, j] = m.predict_proba(np.asarray(q, dtype=np.float64))[:, 1]
    return out
