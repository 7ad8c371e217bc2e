"""Target space and untrained baselines of the code retrieval track.

Target space (:class:`TargetSpace`): the teacher's body embeddings share one dominant
direction (mean cosine to the mean body about 0.87 with MiniLM). ``centre="mean"`` subtracts
the mean of the *training* bodies, ``"whiten"`` also applies their ZCA whitening ``C^{-1/2}``
(eigenvalues + ``eps``), fitted on training functions only (Mu & Viswanath, "All-but-the-Top",
ICLR 2018; Su et al., "Whitening Sentence Representations", 2021, Eq. 3-5).

Baselines: zero-shot (masked mean of the signature's token states vs the body embedding, raw
or centred); ridge (Hoerl & Kennard 1970, :func:`fit_ridge`); BM25 over identifier sub-tokens
(:class:`BM25Scorer`; Robertson & Zaragoza 2009, Eq. 3.15, Lucene idf via ``bm25s``, Lu 2024);
hybrids of BM25 with a dense scorer: reciprocal-rank fusion (:func:`rrf_scores`; Cormack,
Clarke & Buettcher, SIGIR 2009, Eq. 1, ``k = 60``) and a convex combination of per-query
z-scores (:func:`fuse_scores`), its weight picked on validation
(:mod:`contrastlab.models.grid_picks`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch
from torch import Tensor

__all__ = ["TargetSpace", "pooled_signature", "fit_ridge", "ridge_predict", "identifier_tokens",
           "BM25Scorer", "ranks_from_scores", "competition_ranks", "rrf_scores", "zscore_rows",
           "fuse_scores", "fuse_zscores"]


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


# ---------------------------------------------------------------------------- lexical
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# camelCase parts: an acronym before a capitalised word (HTTP|Response), a (capitalised)
# lower-case word, a remaining upper-case run, digits
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


def identifier_tokens(text: str) -> list[str]:
    """Identifier-aware tokens of Python source, in order of appearance.

    Every identifier (``[A-Za-z_][A-Za-z0-9_]*``; keywords included) yields its sub-tokens:
    split on underscores, then at camelCase boundaries (an upper-case run followed by a
    capitalised word is an acronym: ``HTTPResponse`` -> ``http``, ``response``), digits kept
    as their own part, all lower-cased; when it has more than one sub-token the whole
    identifier, lower-cased, follows them (so an exact rare name still matches as one
    term). Punctuation, operators, numbers outside identifiers and string quotes are
    dropped; words inside strings and comments are identifiers like any other.

    Example: ``getHTTPResponse_code`` -> ``["get", "http", "response", "code",
    "gethttpresponse_code"]``.

    Args:
        text: source text (str).

    Returns:
        list of str tokens (possibly empty).

    Raises:
        TypeError: ``text`` is not a str.
    """
    if not isinstance(text, str):
        raise TypeError(f"identifier_tokens needs a str, got {type(text).__name__}")
    out: list[str] = []
    for ident in _IDENT.findall(text):
        parts = [p.lower() for piece in ident.split("_") if piece for p in _CAMEL.findall(piece)]
        out.extend(parts)
        if len(parts) > 1:
            out.append(ident.lower())
    return out


class BM25Scorer:
    """BM25 over identifier tokens of a fixed document collection (``bm25s``, Lucene variant).

    ``score(d, q) = sum_{t in q} idf(t) * tf(t, d) / (tf(t, d) + k1 (1 - b + b |d| / avgdl))``
    (Robertson & Zaragoza 2009, Eq. 3.15 without its constant factor ``k1 + 1``, as Lucene
    computes it; the ranking is the same), ``idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))``.
    A query term repeated ``n`` times counts ``n`` times.

    Args:
        documents: ``N`` document strings (bodies); tokenised with :func:`identifier_tokens`.
        k1: term-frequency saturation (> 0). b: length normalisation in ``[0, 1]``.

    Raises:
        ValueError: no documents, ``k1 <= 0`` or ``b`` outside ``[0, 1]``.
    """

    def __init__(self, documents: Sequence[str], k1: float = 1.5, b: float = 0.75,
                 tokenized: Sequence[list[str]] | None = None):
        import bm25s

        if len(documents) == 0:
            raise ValueError("BM25 needs at least one document")
        if not k1 > 0 or not 0.0 <= b <= 1.0:
            raise ValueError(f"BM25 needs k1 > 0 and 0 <= b <= 1, got k1={k1}, b={b}")
        toks = list(tokenized) if tokenized is not None else [identifier_tokens(d) for d in documents]
        if len(toks) != len(documents):
            raise ValueError(f"{len(documents)} documents but {len(toks)} token lists")
        self.n_docs = len(toks)
        self.k1, self.b = float(k1), float(b)
        self._bm25 = bm25s.BM25(k1=self.k1, b=self.b, method="lucene")
        self._bm25.index([t if t else [""] for t in toks], show_progress=False)
        self._vocab = set(self._bm25.vocab_dict)

    def scores(self, queries: Sequence[str]) -> np.ndarray:
        """float32 ``[Q, N]`` BM25 score of every document for each query string."""
        out = np.zeros((len(queries), self.n_docs), dtype=np.float32)
        for i, q in enumerate(queries):
            terms = [t for t in identifier_tokens(q) if t in self._vocab]
            if terms:
                out[i] = self._bm25.get_scores(terms)
        return out


def ranks_from_scores(scores: np.ndarray, true_idx: np.ndarray) -> np.ndarray:
    """1-based rank of each query's true document, ties broken against it.

    ``rank = #{d : score(d) >= score(true)}`` (the true document included), so a true body
    tied with others (e.g. BM25 score 0) gets the worst rank of its tie block.

    Args:
        scores: float ``[Q, N]``; true_idx: int ``[Q]`` column of the true document.

    Returns:
        int64 ``[Q]`` in ``1..N``.

    Raises:
        ValueError: shapes disagree.
    """
    scores = np.asarray(scores)
    true_idx = np.asarray(true_idx, dtype=np.int64)
    if scores.ndim != 2 or len(true_idx) != scores.shape[0]:
        raise ValueError(f"scores [Q, N] and true_idx [Q] needed, got {scores.shape}, {true_idx.shape}")
    t = scores[np.arange(len(true_idx)), true_idx]
    return (scores >= t[:, None]).sum(1).astype(np.int64)


def competition_ranks(scores: np.ndarray) -> np.ndarray:
    """Per row, ``1 + #{documents scoring strictly higher}`` (ties share the best rank).

    Args: scores float ``[Q, N]``. Returns: int64 ``[Q, N]``.
    """
    scores = np.asarray(scores)
    order = np.sort(scores, axis=1)  # ascending
    n = scores.shape[1]
    out = np.empty(scores.shape, dtype=np.int64)
    for i in range(scores.shape[0]):
        # number strictly greater = n - (position of the first element > x)
        out[i] = n - np.searchsorted(order[i], scores[i], side="right") + 1
    return out


def rrf_scores(rankings: Sequence[np.ndarray], k: float = 60.0) -> np.ndarray:
    """Reciprocal-rank fusion ``RRF(d) = sum_m 1 / (k + r_m(d))`` (Cormack et al. 2009, Eq. 1).

    Args:
        rankings: each int ``[Q, N]`` (or ``[N]``) 1-based rank of every document under one
            ranker (:func:`competition_ranks`).
        k: the constant (60 in Cormack et al.).

    Returns:
        float64 array of the rankings' shape; higher = better.

    Raises:
        ValueError: no rankings, shapes differ, ``k < 0`` or a rank below 1.
    """
    if not rankings:
        raise ValueError("RRF needs at least one ranking")
    shape = np.shape(rankings[0])
    if k < 0:
        raise ValueError(f"RRF k must be >= 0, got {k}")
    out = np.zeros(shape, dtype=np.float64)
    for r in rankings:
        r = np.asarray(r)
        if r.shape != shape:
            raise ValueError(f"rankings differ in shape: {r.shape} vs {shape}")
        if (r < 1).any():
            raise ValueError("ranks are 1-based")
        out += 1.0 / (k + r)
    return out


def zscore_rows(scores: np.ndarray) -> np.ndarray:
    """Per row ``(s - mean) / std`` over the documents (std 0 -> all zeros); float64."""
    s = np.asarray(scores, dtype=np.float64)
    mu = s.mean(1, keepdims=True)
    sd = s.std(1, keepdims=True)
    return np.where(sd > 0, (s - mu) / np.where(sd > 0, sd, 1.0), 0.0)


def fuse_scores(lexical: np.ndarray, dense: np.ndarray, weight: float) -> np.ndarray:
    """``w z(lexical) + (1 - w) z(dense)`` with per-query z-scores over the corpus.

    Args:
        lexical, dense: float ``[Q, N]``; weight: ``w`` in ``[0, 1]`` (1 = lexical only).

    Raises:
        ValueError: shapes differ or ``w`` outside ``[0, 1]``.
    """
    if np.shape(lexical) != np.shape(dense):
        raise ValueError(f"score shapes differ: {np.shape(lexical)} vs {np.shape(dense)}")
    return fuse_zscores(zscore_rows(lexical), zscore_rows(dense), weight)


def fuse_zscores(z_lexical: np.ndarray, z_dense: np.ndarray, weight: float) -> np.ndarray:
    """``w z_lexical + (1 - w) z_dense`` from z-scores already computed with
    :func:`zscore_rows` (so a grid of weights reuses them); the same numbers as
    :func:`fuse_scores` on the raw scores.

    Raises:
        ValueError: ``w`` outside ``[0, 1]``.
    """
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"fusion weight must be in [0, 1], got {weight}")
    return weight * z_lexical + (1.0 - weight) * z_dense
