"""How many validation items a validation pick rests on (its margin), in every track.

A pick (the F1 threshold, the logistic-regression C, the early-stopping step) is the argmax of
a criterion over candidates; its *margin* is the fewest validation rows whose removal would let
another candidate reach the pick's value. The criteria (mAP, F1) are not sums over rows, so a
row's contribution is its jackknife pseudo-value ``n theta - (n - 1) theta_(i)`` (Quenouille
1956; Efron & Tibshirani 1993, Sec. 11.5), exactly the row's own value for a mean. The rows
contributing most to the gap ``n (theta_pick - theta_cand)`` are removed until they account for
it; the margin is the smallest count over candidates (0 on a tie, ``n`` when none closes it;
for a count criterion, the difference of the counts). A margin under 1 % of the rows is
*fragile* (:func:`is_fragile`). Leave-one-out values: :func:`loo_mean_average_precision`
(Manning, Raghavan & Schuetze 2008, Eq. 8.2; scikit-learn's ``average_precision_score`` for
distinct scores) and :func:`loo_f1_criterion` (mean of micro- and macro-F1).
"""

from __future__ import annotations

import numpy as np

from ..models.grid_picks import FRAGILE_SHARE  # the code track's fragile share: one rule

__all__ = ["loo_mean_average_precision", "loo_f1_criterion", "removal_margin", "pick_record",
           "count_pick_record", "seed_summary", "is_fragile", "FRAGILE_SHARE"]

def loo_mean_average_precision(y_true: np.ndarray, scores: np.ndarray) -> tuple[float, np.ndarray]:
    """Macro mAP of ``scores`` and its value with each row left out.

    Per label with ``P`` positives, rows sorted by descending score (stable: ties keep row
    order), ``AP = (1/P) sum_{positive at rank r} k_r / r`` with ``k_r`` the positives at
    ranks ``<= r``. Removing a negative at rank ``p`` moves every later rank up by one;
    removing a positive also lowers the later ``k_r`` by one and ``P`` by one (a label left
    without positives leaves the mean). Prefix and suffix sums give all ``N`` values in
    ``O(N log N)`` per label.

    Args:
        y_true: {0,1} ``[N, C]``. scores: float ``[N, C]``.

    Returns:
        ``(mAP, loo)``: a float and float64 ``[N]`` (``loo[i]``: mAP without row ``i``;
        0.0 where no label keeps a positive).

    Raises:
        ValueError: shapes differ or are not 2-D.
    """
    y = np.asarray(y_true).astype(bool)
    s = np.asarray(scores, dtype=np.float64)
    if y.ndim != 2 or s.shape != y.shape:
        raise ValueError(f"loo_mean_average_precision: y {y.shape}, scores {s.shape}; need equal [N, C]")
    n, c = y.shape
    ap_sum = np.zeros(n)      # sum over labels of each row-removed AP
    n_lab = np.zeros(n)       # labels still holding a positive after the removal
    full = []
    r = np.arange(1, n + 1, dtype=np.float64)
    for j in range(c):
        pos_total = int(y[:, j].sum())
        if pos_total == 0:
            continue
        order = np.argsort(-s[:, j], kind="stable")
        pos = y[order, j]
        k = np.cumsum(pos).astype(np.float64)
        a = np.where(pos, k / r, 0.0)                                   # k_r / r
        b = np.where(pos, k / np.maximum(r - 1, 1), 0.0)                # k_r / (r - 1)
        cc = np.where(pos, (k - 1) / np.maximum(r - 1, 1), 0.0)         # (k_r - 1) / (r - 1)
        before = np.concatenate([[0.0], np.cumsum(a)[:-1]])             # sum over ranks < p
        after_b = np.concatenate([np.cumsum(b[::-1])[::-1][1:], [0.0]])  # sum over ranks > p
        after_c = np.concatenate([np.cumsum(cc[::-1])[::-1][1:], [0.0]])
        full.append(a.sum() / pos_total)
        loo_sorted = np.where(pos, (before + after_c) / max(pos_total - 1, 1),
                              (before + after_b) / pos_total)
        keeps = np.where(pos, pos_total > 1, True)
        rows = np.empty(n, dtype=np.float64)
        rows[order] = np.where(keeps, loo_sorted, 0.0)
        kept = np.empty(n, dtype=bool)
        kept[order] = keeps
        ap_sum += rows
        n_lab += kept
    if not full:
        return 0.0, np.zeros(n)
    return float(np.mean(full)), np.where(n_lab > 0, ap_sum / np.maximum(n_lab, 1), 0.0)


def loo_f1_criterion(y_true: np.ndarray, pred: np.ndarray) -> tuple[float, np.ndarray]:
    """The threshold rule's criterion, ``(micro-F1 + macro-F1) / 2`` of the {0,1} predictions
    ``pred``, and its value with each row left out (macro-F1 averages all ``C`` labels, a
    label with no positive and no prediction counting 0, as
    :func:`contrastlab.evaluation.multilabel.choose_threshold` does).

    Args:
        y_true, pred: {0,1} ``[N, C]``.

    Returns:
        ``(criterion, loo)``: a float and float64 ``[N]``.
    """
    y = np.asarray(y_true).astype(np.int64)
    p = np.asarray(pred).astype(np.int64)
    tp_i, fp_i, fn_i = y & p, (1 - y) & p, y & (1 - p)                  # [N, C]
    tp, fp, fn = tp_i.sum(0), fp_i.sum(0), fn_i.sum(0)                  # [C]

    def crit(tp, fp, fn):
        den = 2 * tp + fp + fn
        micro = 2 * tp.sum(-1) / np.maximum(1.0, den.sum(-1))
        macro = np.where(den > 0, 2 * tp / np.maximum(1.0, den), 0.0).mean(-1)
        return 0.5 * (micro + macro)

    full = float(crit(tp.astype(np.float64), fp.astype(np.float64), fn.astype(np.float64)))
    loo = crit((tp - tp_i).astype(np.float64), (fp - fp_i).astype(np.float64),
               (fn - fn_i).astype(np.float64))
    return full, np.asarray(loo, dtype=np.float64)


def removal_margin(full: np.ndarray, loo: np.ndarray, pick: int) -> tuple[int, int | None]:
    """The pick's margin over every other candidate, in validation rows.

    For candidate ``a`` the gap is ``G = full[pick] - full[a]``; row ``i`` contributes
    ``d_i = n G - (n - 1) (loo[pick, i] - loo[a, i])`` to ``n G`` (jackknife pseudo-values;
    exact for a mean over rows). The rows with the largest ``d_i`` are removed until their
    sum reaches ``n G``. The margin is the smallest count over the candidates.

    Args:
        full: float ``[K]`` criterion of the ``K`` candidates on all validation rows.
        loo: float ``[K, n]`` the criterion with each row left out.
        pick: index of the chosen candidate.

    Returns:
        ``(margin, runner_up)``: rows (0 when a candidate ties the pick, ``n`` when no removal
        closes a gap) and the index of the candidate that attains it (``None`` with one
        candidate).

    Raises:
        ValueError: shapes disagree or ``pick`` is out of range.
    """
    full = np.asarray(full, dtype=np.float64)
    loo = np.asarray(loo, dtype=np.float64)
    if loo.ndim != 2 or loo.shape[0] != len(full) or not 0 <= pick < len(full):
        raise ValueError(f"removal_margin: full {full.shape}, loo {loo.shape}, pick {pick}")
    n = loo.shape[1]
    best, runner = n, None
    for a in range(len(full)):
        if a == pick:
            continue
        gap = n * (full[pick] - full[a])
        if gap <= 1e-9:
            m = 0
        else:
            d = np.sort(gap - (n - 1) * (loo[pick] - loo[a]))[::-1]
            closed = np.nonzero(np.cumsum(d) >= gap - 1e-9)[0]
            m = int(closed[0]) + 1 if len(closed) else n
        if runner is None or m < best:
            best, runner = m, a
    return (best if runner is not None else n), runner


def is_fragile(margin: int, n_val: int) -> bool:
    """A pick decided by fewer than ``FRAGILE_SHARE * n_val`` validation rows (the code
    track's rule, :data:`contrastlab.models.grid_picks.FRAGILE_SHARE`)."""
    return margin < FRAGILE_SHARE * n_val


def pick_record(criterion: str, candidates: list[float], full: np.ndarray, loo: np.ndarray,
                pick: int) -> dict:
    """What a metrics file records of one pick: the criterion's name, the chosen and the
    runner-up candidate values, the margin in validation rows (:func:`removal_margin`), the
    number of validation rows and whether the pick is fragile (:func:`is_fragile`)."""
    margin, runner = removal_margin(full, loo, pick)
    n_val = int(np.asarray(loo).shape[1])
    return {"criterion": criterion, "chosen": float(candidates[pick]),
            "runner_up": None if runner is None else float(candidates[runner]),
            "margin": int(margin), "n_val": n_val, "fragile": bool(is_fragile(margin, n_val))}


def count_pick_record(criterion: str, candidates: list, counts, pick: int, n_val: int) -> dict:
    """:func:`pick_record` of a pick on a count (validation items a candidate gets right, e.g.
    accuracy times ``n_val``): the margin is the count's gap to the best other candidate
    (exact: removing an item the pick gets right and that candidate gets wrong closes the gap
    by one; 0 when a tie-break decided the pick). ``candidates``: JSON values (a ``C``, an
    epoch, a ``[K, normalisation, C]`` list); ``counts``: int ``[K]``; ``pick``: the chosen
    index.

    Raises:
        ValueError: lengths differ, ``pick`` is out of range or ``n_val < 1``.
    """
    c = [int(x) for x in counts]
    if len(c) != len(candidates) or not 0 <= pick < len(c) or n_val < 1:
        raise ValueError(f"count_pick_record: {len(candidates)} candidates, {len(c)} counts, "
                         f"pick {pick}, n_val {n_val}")
    others = [a for a in range(len(c)) if a != pick]
    runner = max(others, key=lambda a: (c[a], -a)) if others else None  # first of the best
    margin = n_val if runner is None else max(0, c[pick] - c[runner])
    return {"criterion": criterion, "chosen": candidates[pick],
            "runner_up": None if runner is None else candidates[runner],
            "margin": int(margin), "n_val": int(n_val), "fragile": bool(is_fragile(margin, n_val))}


def seed_summary(recs: list[dict]) -> dict:
    """One pick over seeds, as a metrics file stores it: the criterion and validation rows
    of the first record, per seed the chosen and runner-up values and the margin (rows), and
    the count of fragile seeds. ``recs``: one :func:`pick_record` per seed (non-empty)."""
    return {"criterion": recs[0]["criterion"], "n_val": recs[0]["n_val"],
            "chosen_seed": [p["chosen"] for p in recs],
            "runner_up_seed": [p["runner_up"] for p in recs],
            "margin_seed": [p["margin"] for p in recs],
            "fragile_seeds": sum(bool(p["fragile"]) for p in recs)}
