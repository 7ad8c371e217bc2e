"""Linear probes on frozen node embeddings (public split of Cora: 140 / 500 / 1000).

- :func:`logreg_probe` is the standard protocol (e.g. DGI, Velickovic et al. 2019; GRACE,
  Zhu et al. 2020): L2-regularised logistic regression (``sklearn``) on the training
  nodes, the inverse regularisation ``C`` chosen on the validation nodes (by default their
  mean cross-entropy, a smooth criterion; or their accuracy), accuracy reported on the test
  nodes.
- :func:`notebook_probe` is a reference notebook implementation's protocol: ``nn.Linear`` trained for 200
  full-batch Adam steps (lr 0.01) on the training nodes, no validation, test accuracy.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
from torch import nn

from ..errors import InputError
from .picks import count_pick_record, pick_record

__all__ = ["logreg_probe", "notebook_probe", "row_normalize", "mean_loss_pick", "probe_pick"]


def _np(t) -> np.ndarray:
    return t.detach().cpu().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)


def row_normalize(x) -> np.ndarray:
    """Rows scaled to sum 1 (rows of zeros left at zero): the feature preprocessing of Kipf &
    Welling (ICLR 2017, Sec. 5.1) and SGC (Wu et al., ICML 2019, Sec. 4). ``x``: ``[N, F]``
    non-negative; returns float64 ``[N, F]``."""
    x = _np(x.to_dense() if isinstance(x, torch.Tensor) and x.is_sparse else x).astype(np.float64)
    s = x.sum(1, keepdims=True)
    return x / np.where(s > 0, s, 1.0)


def _normalized(x: np.ndarray, tr: np.ndarray, normalize: str) -> np.ndarray:
    if normalize == "l2":
        return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    if normalize == "standard":
        mu, sd = x[tr].mean(0), x[tr].std(0)
        return (x - mu) / np.where(sd > 0, sd, 1.0)
    if normalize == "row":
        return row_normalize(x)
    if normalize != "none":
        raise InputError(f"unknown normalize {normalize!r}; use l2, standard, row or none")
    return x


def mean_loss_pick(criterion: str, candidates: list, losses, pick: int) -> dict:
    """:func:`contrastlab.evaluation.picks.pick_record` of a pick that minimises a mean
    validation loss (the graph track's probe C, baseline configuration and early-stopping
    epoch): the criterion is ``-mean_i losses[k, i]``, whose leave-one-out values are exact, so
    the margin is the fewest validation nodes whose removal lets another candidate reach the
    pick. ``candidates``: JSON values (a C, an epoch, a ``[K, normalisation, C]`` list), kept
    as given in ``chosen`` and ``runner_up``; ``losses``: float ``[K, n]``; ``pick``: the
    chosen index.

    Raises:
        ValueError: shapes disagree or ``pick`` is out of range.
    """
    nl = np.asarray(losses, dtype=np.float64)
    if nl.ndim != 2 or nl.shape[0] != len(candidates):
        raise ValueError(f"mean_loss_pick: {len(candidates)} candidates, losses {nl.shape}")
    loo = (nl.sum(1, keepdims=True) - nl) / max(nl.shape[1] - 1, 1)   # mean without node i
    rec = pick_record(criterion, list(range(len(candidates))), -nl.mean(1), -loo, pick)
    runner = rec["runner_up"]
    return {**rec, "chosen": candidates[pick],
            "runner_up": None if runner is None else candidates[int(runner)]}


def probe_pick(criterion: str, candidates: list, correct: Sequence[int], nll, pick: int,
               n_val: int) -> dict:
    """The record of a choice among ``candidates`` made on the probe's validation
    ``criterion``, with its margin in validation nodes: for ``"accuracy"``,
    :func:`contrastlab.evaluation.picks.count_pick_record` of ``correct`` (validation nodes
    right per candidate, of ``n_val``); for ``"log_loss"``, :func:`mean_loss_pick` of ``nll``
    (float ``[K, n_val]``, each node's cross-entropy per candidate). ``pick``: the chosen index."""
    if criterion == "accuracy":
        return count_pick_record("validation accuracy", candidates, correct, pick, n_val)
    return mean_loss_pick("validation log-loss", candidates, nll, pick)


def logreg_probe(emb, y, train_mask, val_mask, test_mask, *,
                 c_grid: Sequence[float] = (1e-4, 1e-3, 1e-2, 1e-1, 1.0, 1e1, 1e2, 1e3),
                 normalize: str = "l2", max_iter: int = 2000,
                 return_pred: bool = False, edge: str = "extend",
                 max_extend: int = 4, criterion: str = "log_loss") -> dict:
    """Standard linear probe: logistic regression, ``C`` picked on the validation nodes.

    ``criterion="log_loss"`` keeps the ``C`` of lowest mean validation cross-entropy
    ``-(1/n) sum_i log p_C(y_i | x_i)``, a mean over nodes (smooth: one node moves it by
    ``1/n`` of its own loss); ``"accuracy"`` the ``C`` of most validation nodes classified
    right (a count). The chosen ``C`` must be interior to the grid (docs/graph.md): ties prefer
    an interior value, then the smaller; ``edge="extend"`` extends the grid past the end by its
    outermost ratio, one value at a time, up to ``max_extend`` values. Grids of 1-2 values are
    taken as given.

    Args:
        emb: ``[N, D]`` float embeddings (frozen), dense or sparse.
        y: ``[N]`` int class labels.
        train_mask, val_mask, test_mask: ``[N]`` bool masks.
        c_grid: candidate inverse regularisation strengths (sorted here; at least 3 values
            for the interior rule, fewer are taken as given); ties: see above.
        normalize: ``"l2"`` (rows to unit norm), ``"standard"`` (z-score using the training
            nodes' mean/std), ``"row"`` (rows sum to 1) or ``"none"``.
        max_iter: L-BFGS iterations.
        return_pred: also return ``"test_pred"``, the ``[n_test]`` int64 predicted classes
            of the test nodes in node order (for paired tests across methods).
        edge: ``"extend"`` or ``"raise"`` when the chosen ``C`` is at an end of the grid.
        max_extend: most values added by ``"extend"``.
        criterion: ``"log_loss"`` or ``"accuracy"`` (above).

    Returns:
        ``{"test_acc", "val_acc", "C", "c_grid", "val_correct", "val_score", "val_log_loss",
        "val_nll", "pick"}`` (accuracies in [0, 1]; ``c_grid`` the grid finally searched,
        ``val_correct`` its validation nodes classified right per ``C``, ``val_score`` the
        criterion per ``C``, higher is better (accuracy, or minus the mean cross-entropy),
        ``val_log_loss`` its mean validation cross-entropy per ``C`` in nats, ``val_nll``
        float64 ``[len(c_grid), n_val]`` each validation node's cross-entropy, ``pick`` the
        choice of ``C`` with its margin in validation nodes, :func:`probe_pick`) and
        ``"test_pred"`` if asked.

    Raises:
        InputError: empty or non-positive ``c_grid``, unknown ``normalize``, ``edge`` or
            ``criterion``, or a chosen ``C`` at the grid's end after the allowed extensions.
    """
    from sklearn.linear_model import LogisticRegression

    if not len(c_grid) or min(c_grid) <= 0:
        raise InputError(f"c_grid must be non-empty and positive (got {list(c_grid)})")
    if edge not in ("extend", "raise"):
        raise InputError(f"unknown edge {edge!r}; use extend or raise")
    if criterion not in ("log_loss", "accuracy"):
        raise InputError(f"unknown criterion {criterion!r}; use log_loss or accuracy")
    if isinstance(emb, torch.Tensor) and emb.is_sparse:
        emb = emb.to_dense()
    x, y = _np(emb).astype(np.float64), _np(y)
    tr, va, te = (_np(m).astype(bool) for m in (train_mask, val_mask, test_mask))
    x = _normalized(x, tr, normalize)
    # per C: (criterion, higher is better; per validation node: right, -log p(y); the model)
    fits: dict[float, tuple[float, np.ndarray, np.ndarray, object]] = {}

    def fit(c: float):
        if c not in fits:
            clf = LogisticRegression(C=c, max_iter=max_iter)
            clf.fit(x[tr], y[tr])
            col = {lab: k for k, lab in enumerate(clf.classes_)}
            k_true = np.array([col.get(v, -1) for v in y[va]])
            proba = clf.predict_proba(x[va])
            p_true = np.where(k_true >= 0, proba[np.arange(len(k_true)), k_true], 0.0)
            nll = -np.log(np.clip(p_true, 1e-15, 1.0))  # a class never trained on: -log(1e-15)
            right = clf.classes_[proba.argmax(1)] == y[va]  # what clf.predict returns
            score = float(right.mean()) if criterion == "accuracy" else -float(nll.mean())
            fits[c] = (score, right, nll, clf)
        return fits[c]

    grid = sorted(float(c) for c in set(c_grid))
    added = 0
    while True:
        for c in grid:
            fit(c)
        top = max(fits[c][0] for c in grid)
        tied = [c for c in grid if fits[c][0] == top]
        inner = [c for c in tied if c not in (grid[0], grid[-1])]
        best_c = (inner or tied)[0]  # ties: an interior C first, then the smaller C
        i = grid.index(best_c)
        if len(grid) < 3 or 0 < i < len(grid) - 1:
            break
        if edge == "raise" or added >= max_extend:
            raise InputError(
                f"logreg_probe: the chosen C={best_c:g} is at the "
                f"{'lower' if i == 0 else 'upper'} end of the grid {grid} (validation "
                f"{criterion} {abs(fits[best_c][0]):.4f}); widen probe.c_grid")
        grid = ([grid[0] ** 2 / grid[1]] + grid if i == 0 else grid + [grid[-1] ** 2 / grid[-2]])
        grid = [float(f"{c:.6g}") for c in grid]
        added += 1
    _, right, _, clf = fits[best_c]
    pred = clf.predict(x[te])
    n_va = int(va.sum())
    correct = [int(fits[c][1].sum()) for c in grid]
    loss = np.stack([fits[c][2] for c in grid])                      # [K, n_va]
    out = {"test_acc": float((pred == y[te]).mean()), "val_acc": float(right.mean()),
           "C": best_c, "c_grid": grid, "val_correct": correct,
           "val_score": [fits[c][0] for c in grid],
           "val_log_loss": [float(v) for v in loss.mean(1)], "val_nll": loss,
           "pick": probe_pick(criterion, grid, correct, loss, i, n_va)}
    if return_pred:
        out["test_pred"] = pred.astype(np.int64)
    return out


def notebook_probe(emb: torch.Tensor, y: torch.Tensor, train_mask: torch.Tensor,
                   test_mask: torch.Tensor, *, steps: int = 200, lr: float = 0.01,
                   seed: int = 0) -> dict[str, float]:
    """A reference notebook implementation's probe: ``nn.Linear(D, C)`` trained ``steps``
    full-batch Adam steps (cross-entropy on the training nodes), accuracy on the test nodes.

    Args:
        emb: ``[N, D]`` float embeddings (detached inside).
        y: ``[N]`` long labels; train_mask / test_mask: ``[N]`` bool.
        steps, lr: Adam steps and learning rate (notebook: 200, 0.01).
        seed: seeds the linear layer's initialisation.

    Returns:
        ``{"test_acc"}`` in [0, 1].
    """
    emb = emb.detach().float()
    n_classes = int(y.max()) + 1
    g = torch.Generator().manual_seed(seed)
    clf = nn.Linear(emb.shape[1], n_classes)
    with torch.no_grad():  # nn.Linear's default init, drawn from our generator
        bound = 1.0 / emb.shape[1] ** 0.5
        clf.weight.uniform_(-bound, bound, generator=g)
        clf.bias.uniform_(-bound, bound, generator=g)
    opt = torch.optim.Adam(clf.parameters(), lr=lr)
    x_tr, y_tr = emb[train_mask], y[train_mask]
    for _ in range(steps):
        opt.zero_grad()
        nn.functional.cross_entropy(clf(x_tr), y_tr).backward()
        opt.step()
    with torch.no_grad():
        pred = clf(emb[test_mask]).argmax(1)
    return {"test_acc": float((pred == y[test_mask]).float().mean())}
