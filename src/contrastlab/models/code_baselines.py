"""Target space and untrained baselines of the code retrieval track.

Target space (:class:`TargetSpace`): the teacher's body embeddings share one dominant
direction (mean cosine to the mean body about 0.87 with MiniLM), so raw cosine ranking is
dominated by it. ``centre="mean"`` subtracts the mean of the *training* bodies,
``"whiten"`` also applies their ZCA whitening ``C^{-1/2}`` (eigenvalues + ``eps``); both
are fitted on training functions only and applied to every body of the corpus and to the
targets of every variant. Mean-centring before cosine similarity is the standard fix for
anisotropic embeddings (Mu & Viswanath, "All-but-the-Top", ICLR 2018; Su et al.,
"Whitening Sentence Representations", 2021, Eq. 3-5).

Baselines (rows of every code table, evaluated like the trained variants):

- zero-shot: the masked mean of the signature's token states as the query, the body
  embedding as the key (the teacher's own space, no training); ``raw`` in the raw space,
  ``centred`` with the signature mean and the body target space both fitted on training
  functions.
- ridge: closed-form ridge regression (Hoerl & Kennard 1970) from the centred pooled
  signature states to the target-space body, ``W = (X^T X + lambda I)^{-1} X^T Y``, with
  ``lambda`` chosen on the validation repositories (Rank@10, ties by MRR).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = ["TargetSpace", "pooled_signature", "fit_ridge", "ridge_predict"]


def pooled_signature(states: Tensor, mask: Tensor, batch: int = 4096) -> Tensor:
    """Masked mean of signature token states.

    Args:
        states: ``[N, T, H]`` (any float dtype). mask: ``[N, T]`` bool, True = real token.

    Returns:
        float32 ``[N, H]`` (rows without a real token are zero).
    """
    out = torch.zeros((states.shape[0], states.shape[2]), dtype=torch.float32)
    for s in range(0, states.shape[0], batch):
        st = states[s:s + batch].float()
        m = mask[s:s + batch].unsqueeze(-1).float()
        out[s:s + batch] = (st * m).sum(1) / m.sum(1).clamp_min(1.0)
    return out


@dataclass
class TargetSpace:
    """An affine map ``y = (x - mean) @ proj`` fitted on training rows.

    ``mean`` float32 ``[H]``, ``proj`` float32 ``[H, H]`` (identity unless whitened).
    """

    mean: Tensor
    proj: Tensor
    kind: str

    @classmethod
    def fit(cls, x_train: Tensor, kind: str = "mean", eps: float = 1e-3) -> "TargetSpace":
        """Fit on the training bodies ``x_train`` ``[N, H]``.

        Args:
            kind: ``none`` (identity), ``mean`` (subtract the mean), ``whiten`` (ZCA).
            eps: added to the covariance eigenvalues before the inverse square root.

        Raises:
            ValueError: unknown ``kind`` or no training rows.
        """
        if kind not in ("none", "mean", "whiten"):
            raise ValueError(f"target centre must be none|mean|whiten, got {kind!r}")
        x = torch.as_tensor(x_train, dtype=torch.float64)
        if x.ndim != 2 or x.shape[0] == 0:
            raise ValueError(f"need a non-empty [N, H] training matrix, got {tuple(x.shape)}")
        h = x.shape[1]
        mean = x.mean(0) if kind != "none" else torch.zeros(h, dtype=torch.float64)
        proj = torch.eye(h, dtype=torch.float64)
        if kind == "whiten":
            xc = x - mean
            cov = xc.T @ xc / max(1, x.shape[0] - 1)
            evals, evecs = torch.linalg.eigh(cov)
            proj = evecs @ torch.diag((evals.clamp_min(0) + eps).rsqrt()) @ evecs.T
        return cls(mean.float(), proj.float(), kind)

    def __call__(self, x: Tensor) -> Tensor:
        """``[N, H]`` -> ``[N, H]`` float32 in the target space."""
        y = torch.as_tensor(x, dtype=torch.float32) - self.mean
        return y if self.kind != "whiten" else y @ self.proj

    def state_dict(self) -> dict:
        return {"mean": self.mean, "proj": self.proj, "kind": self.kind}

    @classmethod
    def from_state(cls, d: dict) -> "TargetSpace":
        return cls(d["mean"], d["proj"], d["kind"])


def fit_ridge(x: Tensor, y: Tensor, lam: float) -> tuple[Tensor, Tensor, Tensor]:
    """Closed-form ridge regression with an unpenalised intercept.

    Minimises ``||(X - mx) W + my - Y||^2 + lambda ||W||_F^2`` (Hoerl & Kennard 1970):
    ``W = (Xc^T Xc + lambda I)^{-1} Xc^T Yc``.

    Args:
        x: ``[N, D]`` inputs; y: ``[N, H]`` targets; lam: ``lambda > 0``.

    Returns:
        ``(W [D, H], mx [D], my [H])`` float32.

    Raises:
        ValueError: ``lam <= 0`` or row counts differ.
    """
    if lam <= 0:
        raise ValueError(f"ridge lambda must be > 0, got {lam}")
    x = torch.as_tensor(x, dtype=torch.float64)
    y = torch.as_tensor(y, dtype=torch.float64)
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"{x.shape[0]} inputs but {y.shape[0]} targets")
    mx, my = x.mean(0), y.mean(0)
    xc, yc = x - mx, y - my
    a = xc.T @ xc + lam * torch.eye(x.shape[1], dtype=torch.float64)
    w = torch.linalg.solve(a, xc.T @ yc)
    return w.float(), mx.float(), my.float()


def ridge_predict(x: Tensor, w: Tensor, mx: Tensor, my: Tensor) -> Tensor:
    """``(x - mx) @ W + my`` as float32 ``[N, H]``."""
    return (torch.as_tensor(x, dtype=torch.float32) - mx) @ w + my
