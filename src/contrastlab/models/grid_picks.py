"""Picks on validation grids: the fusion weight of BM25 with a dense ranker, and any grid point
chosen on a validation metric, with the margin (in validation items) that decided it.

- :func:`pick_on_grid`: the smooth rule (validation MRR; the centre of the plateau of points
  within :data:`PLATEAU_SHARE` of the validation items of the best), its margin and the
  ``fragile`` flag; :func:`argmax_pick`: the plain argmax (validation Rank@10) with its margin.
- :func:`pick_fusion_weight`: the z-scored score fusion's weight
  (:func:`contrastlab.models.code_baselines.fuse_scores`) by :func:`pick_on_grid`.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

__all__ = ["pick_fusion_weight", "pick_on_grid", "argmax_pick", "PLATEAU_SHARE", "FRAGILE_SHARE"]


def pick_fusion_weight(ranks: Mapping[float, Sequence[np.ndarray]]) -> tuple[float, list[dict], dict]:
    """The fusion weight picked by :func:`pick_on_grid` on the validation MRR averaged over
    seeds (the centre of the plateau within 1 % of the validation items of the best weight;
    only validation scores enter), from ranks computed elsewhere (e.g. query chunk by query
    chunk, :func:`contrastlab.evaluation.code_hybrids`).

    Args:
        ranks: weight -> per seed, int ``[Q_val]`` 1-based ranks of the validation queries'
            true documents under ``w z(lexical) + (1 - w) z(dense)``; the grid order is the
            ascending order of the weights.

    Returns:
        ``(weight, [{"weight", "val_rank_at_10", "val_mrr"}, ...], pick)``: the table in
        ascending weight order and the pick record of :func:`pick_on_grid` (``choice`` is the
        weight).

    Raises:
        ValueError: no weights, a weight without ranks, or seeds of different lengths.
    """
    if not ranks:
        raise ValueError("empty fusion-weight grid")
    table = []
    n_val = None
    for w in sorted(ranks, key=float):
        per_seed = ranks[w]
        if not len(per_seed):
            raise ValueError(f"no validation ranks for fusion weight {w}")
        lens = {len(r) for r in per_seed} | ({n_val} if n_val is not None else set())
        if len(lens) != 1:
            raise ValueError(f"validation rank arrays differ in length: {sorted(lens)}")
        n_val = lens.pop()
        table.append({"weight": float(w),
                      "val_rank_at_10": float(np.mean([float((r <= 10).mean()) for r in per_seed])),
                      "val_mrr": float(np.mean([float((1.0 / r).mean()) for r in per_seed]))})
    pick = pick_on_grid([g["weight"] for g in table], [g["val_mrr"] for g in table], int(n_val))
    return pick["choice"], table, pick


#: Plateau of :func:`pick_on_grid`: grid points whose criterion is within this share of the
#: validation items (1 %: 0.01 in MRR units) of the best.
PLATEAU_SHARE = 0.01
#: A pick whose margin is under this share of the validation items is flagged ``fragile``.
FRAGILE_SHARE = 0.01


def _plateau_centre(values: np.ndarray, coords: np.ndarray, tol: float) -> tuple[int, list[int]]:
    """Index of the plateau's centre and the plateau (indices in grid order); see
    :func:`pick_on_grid`."""
    best = int(np.argmax(values))  # ties: the first in grid order
    member = values >= values[best] - tol
    plateau, todo = {best}, [best]
    while todo:  # the connected component of the best (grid neighbours: one step on one axis)
        i = todo.pop()
        for j in np.flatnonzero(member):
            j = int(j)
            if j not in plateau and np.abs(coords[j] - coords[i]).sum() == 1:
                plateau.add(j)
                todo.append(j)
    members = sorted(plateau)
    centre = coords[members].mean(0)
    pick = min(members, key=lambda j: (round(float(((coords[j] - centre) ** 2).sum()), 9),
                                       -values[j], j))
    return pick, members


def pick_on_grid(points: Sequence[Any], values: Sequence[float], n_val: int,
                 coords: Sequence[Sequence[int]] | None = None, criterion: str = "val_mrr",
                 tol_share: float = PLATEAU_SHARE) -> dict:
    """Pick a grid point on a smooth validation criterion so that a few validation items
    cannot flip the pick, and record how many could.

    Rule: ``best`` = the point with the highest criterion (ties: the first in grid order);
    the *plateau* = the grid points connected to ``best`` (neighbours: one grid step along one
    axis) whose criterion is at least ``criterion(best) - tol_share`` (the criterion is a mean
    over ``n_val`` items, each in ``[0, 1]``, so ``tol_share`` is a share of the items); the
    pick = the plateau point nearest to the plateau's centroid in grid steps (ties: the
    higher criterion, then grid order). ``tol_share = 0`` is the plain argmax (exact ties
    aside).

    Margin: the smallest change of one grid point's criterion that changes the pick, times
    ``n_val`` (validation items); for the argmax it is the gap to the runner-up. Found
    exactly: the pick is constant between the values where one point's criterion crosses
    another's, or another's +- ``tol_share``.

    Args:
        points: the grid points in grid order (a weight, a ``{"k1", "b"}`` dict...; stored as
            given). values: the criterion of each point (higher is better).
        n_val: validation items the criterion averages over (> 0).
        coords: integer grid position of each point (default: ``0..P-1``, a 1-D grid).
        criterion: the criterion's name (recorded).

    Returns:
        the pick record ``{"rule", "criterion", "n_val", "tolerance_items", "choice",
        "best", "plateau", "runner_up", "margin_items", "fragile"}`` (``runner_up``: the pick
        after the smallest change; ``None`` with ``margin_items`` ``None`` on a one-point grid).

    Raises:
        ValueError: no points, lengths differ, ``n_val < 1`` or a non-finite value.
    """
    v = np.asarray(values, dtype=np.float64)
    if len(v) == 0 or len(v) != len(points):
        raise ValueError(f"need one value per grid point, got {len(points)} points, {len(v)} values")
    if n_val < 1 or not np.isfinite(v).all():
        raise ValueError(f"need n_val >= 1 and finite values, got n_val={n_val}")
    c = (np.arange(len(v))[:, None] if coords is None else np.asarray(coords, dtype=np.int64))
    if c.ndim != 2 or len(c) != len(v):
        raise ValueError(f"coords must be [P, D] with P={len(v)}, got {c.shape}")
    tol = float(tol_share)
    pick, plateau = _plateau_centre(v, c, tol)
    margin, runner = None, None
    eps = 1e-9
    for p in range(len(v)):
        others = np.delete(v, p)
        for bp in np.unique(np.concatenate([others, others - tol, others + tol])):
            for x in (bp - eps, bp + eps):
                d = abs(x - v[p])
                if margin is not None and d >= margin:
                    continue
                w = v.copy()
                w[p] = x
                q = _plateau_centre(w, c, tol)[0]
                if q != pick:
                    margin, runner = d, q
    margin_items = None if margin is None else round(float(margin) * n_val, 3)
    return {"rule": "plateau_centre" if tol > 0 else "argmax", "criterion": criterion,
            "n_val": int(n_val), "tolerance_items": round(tol * n_val, 3),
            "choice": points[pick], "best": points[int(np.argmax(v))],
            "plateau": [points[j] for j in plateau],
            "runner_up": None if runner is None else points[runner],
            "margin_items": margin_items,
            "fragile": margin_items is not None and margin_items < FRAGILE_SHARE * n_val}


def argmax_pick(points: Sequence[Any], values: Sequence[float], n_val: int,
                ties: Sequence[float] | None = None, criterion: str = "val_rank_at_10",
                tie_criterion: str = "val_mrr") -> dict:
    """The pick record (the keys of :func:`pick_on_grid`) of the lexicographic argmax: the
    highest ``values``, ties by the highest ``ties``, then the first in grid order (the rule of
    the BM25 ``(k1, b)`` and ridge lambda grids).

    ``margin_items`` is the gap to the runner-up on ``values`` in items (``0`` when the pick
    won a tie; then ``tie_gap_items`` is its lead on ``ties``).
    """
    v = np.asarray(values, dtype=np.float64)
    t = np.zeros(len(v)) if ties is None else np.asarray(ties, dtype=np.float64)
    if len(v) == 0 or len(v) != len(points) or len(t) != len(v) or n_val < 1:
        raise ValueError(f"need one value per grid point and n_val >= 1, got {len(points)} points, "
                         f"{len(v)} values, n_val={n_val}")
    order = sorted(range(len(v)), key=lambda j: (-v[j], -t[j], j))
    pick = order[0]
    rec = {"rule": "argmax", "criterion": criterion + (f", ties {tie_criterion}" if ties is not None else ""),
           "n_val": int(n_val), "tolerance_items": 0.0, "choice": points[pick],
           "best": points[pick], "plateau": [points[pick]], "runner_up": None,
           "margin_items": None, "fragile": False}
    if len(v) > 1:
        r = order[1]
        m = round(float(v[pick] - v[r]) * n_val, 3)
        rec.update(runner_up=points[r], margin_items=m, fragile=m < FRAGILE_SHARE * n_val)
        if m == 0 and ties is not None:
            rec["tie_gap_items"] = round(float(t[pick] - t[r]) * n_val, 3)
    return rec
