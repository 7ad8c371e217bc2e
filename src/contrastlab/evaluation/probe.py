"""Linear probes on frozen node embeddings (public split of Cora: 140 / 500 / 1000).

- :func:`logreg_probe` is the standard protocol (e.g. DGI, Velickovic et al. 2019; GRACE,
  Zhu et al. 2020): L2-regularised logistic regression (``sklearn``) on the training
  nodes, the inverse regularisation ``C`` chosen by accuracy on the validation nodes,
  accuracy reported on the test nodes.
- :func:`notebook_probe` is a reference notebook implementation's protocol: ``nn.Linear`` trained for 200
  full-batch Adam steps (lr 0.01) on the training nodes, no validation, test accuracy.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
from torch import nn

from ..errors import InputError

__all__ = ["logreg_probe", "notebook_probe"]


def _np(t) -> np.ndarray:
    return t.detach().cpu().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)


def logreg_probe(emb, y, train_mask, val_mask, test_mask, *,
                 c_grid: Sequence[float] = (0.01, 0.1, 1.0, 10.0, 100.0),
                 normalize: str = "l2", max_iter: int = 2000,
                 return_pred: bool = False) -> dict:
    """Standard linear probe: logistic regression, ``C`` picked on the validation nodes.

    Args:
        emb: ``[N, D]`` float embeddings (frozen).
        y: ``[N]`` int class labels.
        train_mask, val_mask, test_mask: ``[N]`` bool masks.
        c_grid: candidate inverse regularisation strengths; ties go to the smaller ``C``.
        normalize: ``"l2"`` (rows to unit norm), ``"standard"`` (z-score using the training
            nodes' mean/std) or ``"none"``.
        max_iter: L-BFGS iterations.
        return_pred: also return ``"test_pred"``, the ``[n_test]`` int64 predicted classes
            of the test nodes in node order (for paired tests across methods).

    Returns:
        ``{"test_acc", "val_acc", "C"}`` (accuracies in [0, 1]) and ``"test_pred"`` if asked.

    Raises:
        ValueError: empty ``c_grid`` or unknown ``normalize``.
    """
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import accuracy_score

    if not len(c_grid):
        raise InputError("c_grid must not be empty")
    x, y = _np(emb).astype(np.float64), _np(y)
    tr, va, te = (_np(m).astype(bool) for m in (train_mask, val_mask, test_mask))
    if normalize == "l2":
        x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    elif normalize == "standard":
        mu, sd = x[tr].mean(0), x[tr].std(0)
        x = (x - mu) / np.where(sd > 0, sd, 1.0)
    elif normalize != "none":
        raise InputError(f"unknown normalize {normalize!r}; use l2, standard or none")
    best = None
    for c in c_grid:
        clf = LogisticRegression(C=float(c), max_iter=max_iter)
        clf.fit(x[tr], y[tr])
        va_acc = accuracy_score(y[va], clf.predict(x[va]))
        if best is None or va_acc > best[0]:
            best = (va_acc, float(c), clf)
    va_acc, c, clf = best
    pred = clf.predict(x[te])
    out = {"test_acc": float(accuracy_score(y[te], pred)), "val_acc": float(va_acc), "C": c}
    if return_pred:
        out["test_pred"] = pred.astype(np.int64)
    return out


def notebook_probe(emb: torch.Tensor, y: torch.Tensor, train_mask: torch.Tensor,
                   test_mask: torch.Tensor, *, steps: int = 200, lr: float = 0.01,
                   seed: int = 0) -> dict[str, float]:
    """A reference notebook implementation's probe: ``nn.Linear(D, C)`` trained ``steps`` full-batch Adam steps
    (cross-entropy on the training nodes), accuracy on the test nodes.

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
