"""Label statistics and the validation split of a multi-label training set
(:mod:`contrastlab.data.multilabel`): :func:`label_stats` and :func:`stratified_val_split`
(iterative stratification).
"""

from __future__ import annotations

import numpy as np

from ..errors import InputError


def label_stats(y: np.ndarray) -> dict[str, float]:
    """Summary of a multi-hot matrix ``[N, C]``: n, labels, cardinality (mean labels per row),
    density (cardinality / C), distinct label sets, rows without any label."""
    y = np.asarray(y)
    card = float(y.sum(1).mean()) if len(y) else 0.0
    return {
        "n": int(y.shape[0]), "labels": int(y.shape[1]), "cardinality": card,
        "density": card / max(1, y.shape[1]),
        "distinct_labelsets": int(len({r.tobytes() for r in y.astype(np.uint8)})),
        "empty_rows": int((y.sum(1) == 0).sum()),
    }


def stratified_val_split(y: np.ndarray, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Carve a validation split from a training set by iterative stratification.

    Uses ``iterstrat.ml_stratifiers.MultilabelStratifiedShuffleSplit`` (iterative
    stratification, Sechidis, Tsoumakas & Vlahavas 2011, as implemented by the
    ``iterative-stratification`` package), then a deterministic repair: a label with >= 2
    positives that landed on one side only gets one positive row moved to the other side
    (a row whose other labels stay represented on both sides is preferred).

    Args:
        y: multi-hot ``[N, C]`` (any dtype; non-zero = positive).
        fraction: share of rows in the validation part, in (0, 1).
        seed: random state of the splitter.

    Returns:
        ``(train_idx, val_idx)``: sorted int64 index arrays partitioning ``range(N)``.

    Raises:
        ValueError: ``fraction`` outside (0, 1) or fewer than 2 rows.
    """
    from iterstrat.ml_stratifiers import MultilabelStratifiedShuffleSplit

    y = (np.asarray(y) != 0).astype(np.int64)
    n = len(y)
    if not 0 < fraction < 1:
        raise InputError(f"fraction must be in (0, 1), got {fraction}")
    if n < 2:
        raise InputError(f"need at least 2 rows to split, got {n}")
    splitter = MultilabelStratifiedShuffleSplit(n_splits=1, test_size=fraction, random_state=seed)
    tr, va = next(splitter.split(np.zeros((n, 1)), y))
    in_val = np.zeros(n, dtype=bool)
    in_val[va] = True
    for _ in range(2 * y.shape[1]):
        pos_tr = y[~in_val].sum(0)
        pos_va = y[in_val].sum(0)
        bad = np.flatnonzero((y.sum(0) >= 2) & ((pos_tr == 0) | (pos_va == 0)))
        if not len(bad):
            break
        c = bad[0]
        to_val = pos_va[c] == 0  # move a positive from train to validation, or back
        cand = np.flatnonzero((y[:, c] == 1) & (in_val != to_val))
        # prefer a row whose other labels keep >= 1 positive on the side it leaves
        side = pos_tr if to_val else pos_va
        safe = [r for r in cand if np.all((side - y[r])[(y[r] == 1) & (np.arange(y.shape[1]) != c)] >= 1)]
        r = (safe or list(cand))[0]
        in_val[r] = to_val
    return np.flatnonzero(~in_val).astype(np.int64), np.flatnonzero(in_val).astype(np.int64)
