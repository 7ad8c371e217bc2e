"""Multi-label metrics (sklearn) and the HumanEval problem x tier neighbour purity.

Conventions (Sim-Dis paper, Appendix C.2; Zhang & Wu 2024):
- micro-F1 / macro-F1 on predictions ``sigmoid(logit) >= threshold`` (threshold 0.5 by
  default, stated in every report); a label with no positive and no predicted positive gets
  F1 = 0 in the macro average (sklearn ``zero_division=0``).
- mAP = macro average precision: the mean over labels of sklearn's
  ``average_precision_score`` on the scores, over labels with at least one positive in the
  test split (labels without positives have undefined AP and are left out; their count is
  returned as ``map_labels_skipped``).
- mAP over frequent labels (``map_min<k>`` for each ``k`` of :data:`MAP_MIN_POSITIVES`): the
  same mean over the labels with at least ``k`` test positives (their number:
  ``map_min<k>_labels``). The AP of a label with a few test positives is biased upwards and no
  bootstrap interval of mAP over all labels covers where labels are rare (medical, enron:
  ``bench/bench_coverage.py``); the report shows, per data set, the smallest ``k`` whose
  interval covers in that simulation (``reports/metrics/coverage.json``; docs/statistics.md).
- precision@k: for each test sample, the fraction of its k top-scored labels that are
  true, averaged over samples (the extreme-classification convention, MIMIC P@8).
All values are fractions in [0, 1]; reports multiply by 100 where they compare with the paper.
"""

from __future__ import annotations

import numpy as np

from ..errors import InputError
from ..metrics import knn_label_purity  # re-exported: the data layer needs it too
from .stats_crossed import crossed_reps

__all__ = ["MAP_MIN_POSITIVES", "multilabel_metrics", "precision_at_k", "knn_label_purity", "mean_average_precision",
           "choose_threshold", "threshold_pick", "label_thresholds", "seed_score_correlation",
           "stratified_metric_reps"]


#: The minimum numbers ``k`` of test positives of a label for which ``map_min<k>`` (mAP over
#: the labels with at least ``k`` test positives) is computed; the report picks one per data
#: set from the coverage simulation (bench/bench_coverage.py, reports/metrics/coverage.json).
MAP_MIN_POSITIVES = (5, 10, 20, 40)


def precision_at_k(y_true: np.ndarray, scores: np.ndarray, k: int) -> float:
    """Mean over samples of |top-k scored labels ∩ true labels| / k.

    Args:
        y_true: {0,1} ``[N, C]``; scores: float ``[N, C]``; k: 1 <= k <= C.

    Raises:
        ValueError: shapes differ or k out of range.
    """
    y_true, scores = np.asarray(y_true), np.asarray(scores)
    if y_true.shape != scores.shape:
        raise InputError(f"precision_at_k: y_true {y_true.shape} vs scores {scores.shape}")
    if not 1 <= k <= y_true.shape[1]:
        raise InputError(f"precision_at_k: k={k} outside [1, {y_true.shape[1]}]")
    top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    return float(np.take_along_axis(y_true, top, axis=1).sum(1).mean() / k)


def multilabel_metrics(y_true: np.ndarray, scores: np.ndarray, threshold: float | np.ndarray = 0.5,
                       precision_at: list[int] | tuple[int, ...] = ()) -> dict[str, float]:
    """micro-F1, macro-F1, mAP (macro AP) and precision@k of multi-label scores.

    Args:
        y_true: {0,1} ``[N, C]`` test labels.
        scores: ``[N, C]`` probabilities (sigmoid of the classifier's logits) in [0, 1].
        threshold: predicted positive when ``score >= threshold`` (a scalar, or ``[C]`` per label).
        precision_at: k values for precision@k.

    Returns:
        ``{"micro_f1", "macro_f1", "map", "map_labels_skipped", "p_at_<k>"...}`` as floats, and
        for each ``k`` of :data:`MAP_MIN_POSITIVES` with such labels ``"map_min<k>"`` and
        ``"map_min<k>_labels"`` (mAP over the labels with at least ``k`` test positives, and
        their number).

    Raises:
        ValueError: shapes differ, or no label has a positive (mAP undefined).
    """
    from sklearn.metrics import average_precision_score, f1_score

    y_true = np.asarray(y_true).astype(np.int64)
    scores = np.asarray(scores, dtype=np.float64)
    if y_true.shape != scores.shape or y_true.ndim != 2:
        raise InputError(f"multilabel_metrics: y_true {y_true.shape} vs scores {scores.shape}")
    pred = (scores >= threshold).astype(np.int64)
    has_pos = y_true.sum(0) > 0
    if not has_pos.any():
        raise InputError("multilabel_metrics: no label has a positive test sample; mAP undefined")
    out = {
        "micro_f1": float(f1_score(y_true, pred, average="micro", zero_division=0)),
        "macro_f1": float(f1_score(y_true, pred, average="macro", zero_division=0)),
        "map": float(average_precision_score(y_true[:, has_pos], scores[:, has_pos], average="macro")),
        "map_labels_skipped": float((~has_pos).sum()),
    }
    for k in MAP_MIN_POSITIVES:
        freq = y_true.sum(0) >= k
        if freq.any():
            out[f"map_min{k}"] = float(average_precision_score(y_true[:, freq], scores[:, freq],
                                                               average="macro"))
            out[f"map_min{k}_labels"] = float(freq.sum())
    for k in precision_at:
        out[f"p_at_{k}"] = precision_at_k(y_true, scores, int(k))
    return out


def mean_average_precision(y_true: np.ndarray, scores: np.ndarray) -> float:
    """Macro AP over labels with >= 1 positive (sklearn ``average_precision_score``); 0.0 when
    no label has a positive. ``y_true`` {0,1} ``[N, C]``, ``scores`` ``[N, C]``."""
    from sklearn.metrics import average_precision_score

    y = np.asarray(y_true).astype(np.int64)
    has = y.sum(0) > 0
    if not has.any():
        return 0.0
    return float(average_precision_score(y[:, has], np.asarray(scores, dtype=np.float64)[:, has], average="macro"))


THRESHOLD_GRID = np.round(np.arange(0.05, 0.951, 0.05), 2)


def _f1s(y: np.ndarray, pred: np.ndarray) -> tuple[float, np.ndarray]:
    tp = (y & pred).sum(0).astype(np.float64)
    fp = ((1 - y) & pred).sum(0).astype(np.float64)
    fn = (y & (1 - pred)).sum(0).astype(np.float64)
    micro = 2 * tp.sum() / max(1.0, 2 * tp.sum() + fp.sum() + fn.sum())
    per = np.where(2 * tp + fp + fn > 0, 2 * tp / np.maximum(1.0, 2 * tp + fp + fn), 0.0)
    return float(micro), per


def _smoothed(v: np.ndarray) -> np.ndarray:
    """Each grid point's value averaged with its grid neighbours' (axis 0; two at an end)."""
    out = np.empty_like(v)
    for k in range(len(v)):
        out[k] = v[max(0, k - 1):k + 2].mean(0)
    return out


def threshold_pick(y_val: np.ndarray, s_val: np.ndarray, grid: np.ndarray = THRESHOLD_GRID,
                   margin: bool = True) -> tuple[float, dict | None]:
    """One global threshold from ``grid`` (0.05..0.95) on the validation split, and the record
    of the pick.

    The criterion is the mean of validation micro-F1 and macro-F1 at a threshold, averaged
    with its value at the two neighbouring grid points (the centre of a plateau: F1 at one
    threshold is a count, and a raw argmax between two neighbours is often decided by one
    row); the threshold maximising it is chosen (the smallest on ties).

    Args:
        y_val: {0,1} ``[N, C]``. s_val: ``[N, C]`` scores in [0, 1].
        margin: also compute the pick's record
            (:func:`contrastlab.evaluation.picks.pick_record`: margin in validation rows,
            runner-up, fragile); False returns ``None`` for it (the coverage simulation).

    Returns:
        ``(threshold, record or None)``.
    """
    from .picks import loo_f1_criterion, pick_record

    y, s = np.asarray(y_val).astype(np.int64), np.asarray(s_val)
    crit, loo = [], []
    for t in grid:
        pred = (s >= t).astype(np.int64)
        if margin:
            c, l = loo_f1_criterion(y, pred)
            loo.append(l)
        else:
            micro, per = _f1s(y, pred)
            c = 0.5 * (micro + per.mean())
        crit.append(c)
    smooth = _smoothed(np.asarray(crit))
    k = int(np.argmax(smooth > smooth.max() - 1e-12))  # the first (smallest) of the best
    if not margin:
        return float(grid[k]), None
    rec = pick_record("mean of validation micro- and macro-F1, averaged over the threshold and "
                      "its grid neighbours", [float(t) for t in grid], smooth,
                      _smoothed(np.stack(loo)), k)
    return float(grid[k]), rec


def choose_threshold(y_val: np.ndarray, s_val: np.ndarray, grid: np.ndarray = THRESHOLD_GRID) -> float:
    """The threshold of :func:`threshold_pick` (without its record). Returns a float."""
    return threshold_pick(y_val, s_val, grid, margin=False)[0]


def label_thresholds(y_val: np.ndarray, s_val: np.ndarray, grid: np.ndarray = THRESHOLD_GRID) -> np.ndarray:
    """Per-label thresholds ``[C]``: each label's validation-F1 maximiser on ``grid`` (0.5 for
    a label without validation positives)."""
    y, s = np.asarray(y_val).astype(np.int64), np.asarray(s_val)
    f = np.stack([_f1s(y, (s >= t).astype(np.int64))[1] for t in grid])  # [T, C]
    out = grid[np.argmax(f, axis=0)].astype(np.float64)
    out[y.sum(0) == 0] = 0.5
    return out


def seed_score_correlation(y_true: np.ndarray, scores: np.ndarray) -> float | None:
    """How much of a model's test-score noise is shared by its training seeds.

    For every label and class (positive rows, negative rows) with at least 3 rows, each seed's
    logit scores are centred on their class mean; the correlation of two seeds' centred scores
    is averaged over seed pairs, then over (label, class) cells. 1 means the seeds order the
    rows of a class identically (all noise is the row's own, shared by the seeds); 0 means
    every seed's noise is its own (the seed x row interaction of
    :mod:`contrastlab.evaluation.stats_crossed`). The coverage simulation
    (``bench/bench_coverage.py``) takes the median row's value as the shared share of its
    score noise.

    Args:
        y_true: {0,1} ``[N, C]`` test labels.
        scores: ``[S, N, C]`` probabilities in [0, 1] (clipped to [1e-6, 1 - 1e-6]).

    Returns:
        The mean correlation in [-1, 1], or None with fewer than 2 seeds or no cell with
        spread.

    Raises:
        InputError: shapes disagree.
    """
    y = np.asarray(y_true).astype(bool)
    p = np.clip(np.asarray(scores, dtype=np.float64), 1e-6, 1 - 1e-6)
    if p.ndim != 3 or p.shape[1:] != y.shape:
        raise InputError(f"seed_score_correlation: scores {p.shape}, y {y.shape}; "
                         f"expected [S, N, C] and [N, C]")
    n_s = p.shape[0]
    if n_s < 2:
        return None
    z = np.log(p) - np.log1p(-p)
    cells = []
    for c in range(y.shape[1]):
        for rows in (y[:, c], ~y[:, c]):
            if rows.sum() < 3:
                continue
            r = z[:, rows, c]
            r = r - r.mean(1, keepdims=True)
            norm = np.sqrt((r * r).sum(1))
            if np.any(norm <= 1e-12):
                continue
            cor = (r @ r.T) / np.outer(norm, norm)
            cells.append(cor[np.triu_indices(n_s, 1)].mean())
    return float(np.mean(cells)) if cells else None


def stratified_metric_reps(y_true: np.ndarray, scores: np.ndarray, val_thresholds: np.ndarray, *,
                           n_resamples: int = 1000, seed: int = 0, threshold: float = 0.5,
                           chunk: int = 250) -> dict[str, np.ndarray]:
    """Bootstrap replicates of the multi-label metrics under which every label is defined.

    A plain bootstrap over test rows leaves some labels without a positive in a draw (their AP
    is undefined and the label silently drops out of that draw's mean) and duplicates positive
    rows (a duplicated positive raises the precision of its own rank), so the replicates of mAP
    sit above the estimate. Here each draw resamples the training seeds with replacement and,
    **for every label separately**, its positive test rows and its negative test rows with
    replacement (a stratified bootstrap: Efron & Tibshirani, "An Introduction to the
    Bootstrap", 1993, Sec. 6.4 and 8.2; as for the AUC, Carpenter & Bithell, Stat. Med. 2000).
    The number of positives of a label in a draw is Binomial(N, n_pos / N) as in a row
    bootstrap (precision and F1 depend on the prevalence; fixing it made macro-F1 intervals
    cover 89 % in the simulation), conditioned on at least one positive, so AP and F1 are
    defined in every draw and every label counts in every draw. The label-wise draws are independent of each other, so the
    correlation of two labels' errors through shared rows is not reproduced; the coverage
    simulation (``tests/protocol/test_coverage.py``) checks the result on independent labels.
    Use the replicates with :func:`contrastlab.evaluation.stats.summarize` (BC percentile
    intervals, which move down by the bias the duplication adds to AP).

    Per draw ``r`` and drawn seed ``j``: micro-F1 sums TP/FP/FN over labels (each label on its
    own rows), macro-F1 and mAP average the labels' F1 / AP (labels without any positive in
    the test split are left out of mAP, as in :func:`multilabel_metrics`). The replicate is
    :func:`contrastlab.evaluation.stats_crossed.crossed_reps`: the mean over all seeds on the
    draw's rows plus the drawn seeds' deviation (n - 1 of n, each seed at its test-set value),
    shrunk so that the seed-by-row interaction is counted once, not twice (Owen, Ann. Appl.
    Stat. 2007; the plain two-level bootstrap over-covered at 0.98-0.99 in the simulation).

    The draws depend only on ``(y_true, S, n_resamples, seed)``: every model of a table scored
    with the same arguments is evaluated on the same draws, so differences are paired.

    Args:
        y_true: {0,1} ``[N, C]`` test labels.
        scores: float ``[S, N, C]`` test scores (probabilities) of the ``S`` seeds.
        val_thresholds: ``[S]`` global thresholds chosen on validation, one per seed.
        n_resamples: number of draws ``R`` (>= 1).
        seed: seed of the NumPy generator.
        threshold: the fixed threshold of ``micro_f1`` / ``macro_f1``.
        chunk: draws processed at once (memory ``chunk x N`` floats per label).

    Returns:
        ``{"micro_f1", "macro_f1", "micro_f1_val_t", "macro_f1_val_t", "map"}`` and
        ``"map_min<k>"`` for each ``k`` of :data:`MAP_MIN_POSITIVES` that some label reaches ->
        ``[R]`` float64 fractions in [0, 1].

    Raises:
        InputError: shapes disagree, or ``n_resamples < 1``.
    """
    y = np.asarray(y_true).astype(np.int64)
    s = np.asarray(scores, dtype=np.float64)
    vt = np.asarray(val_thresholds, dtype=np.float64).ravel()
    if y.ndim != 2 or s.ndim != 3 or s.shape[1:] != y.shape or vt.shape != (s.shape[0],):
        raise InputError(f"stratified_metric_reps: scores {s.shape}, y {y.shape}, "
                         f"thresholds {vt.shape}; expected [S, N, C], [N, C], [S]")
    if n_resamples < 1:
        raise InputError(f"stratified_metric_reps: n_resamples must be >= 1 (got {n_resamples})")
    n_s, n, n_c = s.shape
    rng = np.random.default_rng(seed)
    seed_idx = rng.integers(0, n_s, (n_resamples, max(1, n_s - 1)))  # n - 1 bootstrap (stats.resample_counts)
    # per (draw, seed) sums over labels; row R holds each seed's value on the test set itself
    rr = n_resamples + 1
    tp, fp, fn, f1sum = ({t: np.zeros((rr, n_s)) for t in ("fix", "val")} for _ in range(4))
    apsum = np.zeros((rr, n_s))
    apfreq = {k: np.zeros((rr, n_s)) for k in MAP_MIN_POSITIVES}  # labels with >= k positives
    n_ap = 0
    n_freq = {k: int((y.sum(0) >= k).sum()) for k in MAP_MIN_POSITIVES}
    label_seeds = rng.integers(0, 2**63 - 1, n_c)
    thr = {"fix": np.full(n_s, float(threshold)), "val": vt}

    def add(w: np.ndarray, lo: int, hi: int, c: int, orders, yc, n_pos_c: int) -> None:
        """Add label ``c``'s counts, F1 and AP under row weights ``w [k, N]`` to rows lo:hi."""
        for j in range(n_s):
            for t in ("fix", "val"):
                pred = (s[j, :, c] >= thr[t][j]).astype(np.float64)
                a = w @ (yc * pred)
                b = w @ ((1 - yc) * pred)
                e = w @ (yc * (1 - pred))
                tp[t][lo:hi, j] += a
                fp[t][lo:hi, j] += b
                fn[t][lo:hi, j] += e
                den = 2 * a + b + e
                f1sum[t][lo:hi, j] += np.where(den > 0, 2 * a / np.maximum(den, 1e-12), 0.0)
            if n_pos_c:
                o = orders[j]
                wc = w[:, o]
                wy = wc * yc[o]
                prec = np.cumsum(wy, 1) / np.maximum(np.cumsum(wc, 1), 1e-12)
                ap = (wy * prec).sum(1) / np.maximum(wy.sum(1), 1e-12)
                apsum[lo:hi, j] += ap
                for k in MAP_MIN_POSITIVES:
                    if n_pos_c >= k:
                        apfreq[k][lo:hi, j] += ap

    for c in range(n_c):
        lr = np.random.default_rng(int(label_seeds[c]))
        pos = np.flatnonzero(y[:, c] == 1)
        neg = np.flatnonzero(y[:, c] == 0)
        n_ap += int(pos.size > 0)
        orders = [np.argsort(-s[j, :, c], kind="stable") for j in range(n_s)]
        yc = y[:, c].astype(np.float64)
        add(np.ones((1, n)), n_resamples, rr, c, orders, yc, pos.size)
        for lo in range(0, n_resamples, chunk):
            hi = min(n_resamples, lo + chunk)
            k = hi - lo
            w = np.zeros((k, n))
            # the draw's number of positives varies as in a row bootstrap, conditioned on >= 1
            n_pos = np.zeros(k, dtype=np.int64)
            if pos.size:
                n_pos = np.maximum(1, lr.binomial(n, pos.size / n, k))
                if neg.size == 0:
                    n_pos[:] = n
            cols = np.arange(n)[None, :]
            offs = (np.arange(k) * n)[:, None]
            for grp, m in ((pos, n_pos), (neg, n - n_pos)):
                if grp.size:
                    keep = cols < m[:, None]                       # [k, n]: the first m of row r
                    pick = grp[lr.integers(0, grp.size, (k, n))]
                    w += np.bincount((offs + pick)[keep], minlength=k * n).reshape(k, n)
            add(w, lo, hi, c, orders, yc, pos.size)
    per = {}
    for t, suffix in (("fix", ""), ("val", "_val_t")):
        per["micro_f1" + suffix] = 2 * tp[t] / np.maximum(2 * tp[t] + fp[t] + fn[t], 1e-12)
        per["macro_f1" + suffix] = f1sum[t] / n_c
    per["map"] = apsum / max(n_ap, 1)
    for k in MAP_MIN_POSITIVES:
        if n_freq[k]:
            per[f"map_min{k}"] = apfreq[k] / n_freq[k]
    # each metric's [R, S] values and per-seed test-set values -> replicates with the seed x
    # row interaction counted once (stats_crossed.crossed_reps)
    return {k: crossed_reps(v[:n_resamples], v[n_resamples], seed_idx)[0] for k, v in per.items()}
