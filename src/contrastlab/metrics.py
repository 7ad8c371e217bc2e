"""Metrics on plain arrays that the data layer needs as well as evaluation (``data`` may not
import ``evaluation``: tests/foundation/test_imports.py). Re-exported by
:mod:`contrastlab.evaluation.multilabel`."""

from __future__ import annotations

import numpy as np

from .errors import InputError

__all__ = ["knn_label_purity"]


def knn_label_purity(train_emb: np.ndarray, train_groups: np.ndarray, test_emb: np.ndarray,
                     test_groups: np.ndarray, k: int = 5) -> float:
    """Mean over test samples of the fraction of its k nearest training neighbours (cosine,
    exact search with FAISS inner product on L2-normalised vectors) in the same group.

    For HumanEval the group is the (problem, tier) pair: this is the fine-tuning notes' "embeddings
    aware of both the problem and the correctness tier".

    Args:
        train_emb ``[N, D]``, test_emb ``[M, D]`` float; train_groups ``[N]``, test_groups
        ``[M]`` hashable ids; k <= N.

    Raises:
        ValueError: k > N or mismatched lengths.
    """
    import faiss

    a = np.ascontiguousarray(train_emb, dtype=np.float32)
    b = np.ascontiguousarray(test_emb, dtype=np.float32)
    if len(a) != len(train_groups) or len(b) != len(test_groups):
        raise InputError("knn_label_purity: embeddings and groups differ in length")
    if k > len(a):
        raise InputError(f"knn_label_purity: k={k} > {len(a)} training samples")
    a = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
    b = b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
    index = faiss.IndexFlatIP(a.shape[1])
    index.add(a)
    _, nn_idx = index.search(b, k)
    tg = np.asarray(train_groups)
    same = tg[nn_idx] == np.asarray(test_groups)[:, None]
    return float(same.mean())
