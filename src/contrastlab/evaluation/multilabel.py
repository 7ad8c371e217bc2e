"""Multi-label metrics (sklearn) and the HumanEval problem x tier neighbour purity.

Conventions (Sim-Dis paper, Appendix C.2; Zhang & Wu 2024):
- micro-F1 / macro-F1 on predictions ``sigmoid(logit) >= threshold`` (threshold 0.5 by
  default, stated in every report); a label with no positive and no predicted positive gets
  F1 = 0 in the macro average (sklearn ``zero_division=0``).
- mAP = macro average precision: the mean over labels of sklearn's
  ``average_precision_score`` on the scores, over labels with at least one positive in the
  test split (labels without positives have undefined AP and are left out; their count is
  returned as ``map_labels_skipped``).
- precision@k: for each test sample, the fraction of its k top-scored labels that are
  true, averaged over samples (the extreme-classification convention, MIMIC P@8).
All values are fractions in [0, 1]; reports multiply by 100 where they compare with the paper.
"""

from __future__ import annotations

import numpy as np

from ..errors import InputError

__all__ = ["multilabel_metrics", "precision_at_k", "knn_label_purity"]


def precision_at_k(y_true: np.ndarray, scores: np.ndarray, k: int) -> float:
    """Mean over samples of |top-k scored labels ∩ true labels| / k.

    Args:
        y_true: {0,1} ``[N, C]``; scores: float ``[N, C]``; k: 1 <= k <= C.

    Raises:
        ValueError: shapes differ or k out of range.
    """
    y_true = np.asarray(y_true)
    scores = np.asarray(scores)
    if y_true.shape != scores.shape:
        raise ValueError(f"precision_at_k: y_true {y_true.shape} vs scores {scores.shape}")
    if not 1 <= k <= y_true.shape[1]:
        raise ValueError(f"precision_at_k: k={k} outside [1, {y_true.shape[1]}]")
    top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    return float(np.take_along_axis(y_true, top, axis=1).sum(1).mean() / k)


def multilabel_metrics(y_true: np.ndarray, scores: np.ndarray, threshold: float = 0.5,
                       precision_at: list[int] | tuple[int, ...] = ()) -> dict[str, float]:
    """micro-F1, macro-F1, mAP (macro AP) and precision@k of multi-label scores.

    Args:
        y_true: {0,1} ``[N, C]`` test labels.
        scores: ``[N, C]`` probabilities (sigmoid of the classifier's logits) in [0, 1].
        threshold: predicted positive when ``score >= threshold``.
        precision_at: k values for precision@k.

    Returns:
        ``{"micro_f1", "macro_f1", "map", "map_labels_skipped", "p_at_<k>"...}`` as floats.

    Raises:
        ValueError: shapes differ, or no label has a positive (mAP undefined).
    """
    from sklearn.metrics import average_precision_score, f1_score

    y_true = np.asarray(y_true).astype(np.int64)
    scores = np.asarray(scores, dtype=np.float64)
    if y_true.shape != scores.shape or y_true.ndim != 2:
        raise ValueError(f"multilabel_metrics: y_true {y_true.shape} vs scores {scores.shape}")
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
    for k in precision_at:
        out[f"p_at_{k}"] = precision_at_k(y_true, scores, int(k))
    return out


def knn_label_purity(train_emb: np.ndarray, train_groups: np.ndarray, test_emb: np.ndarray,
                     test_groups: np.ndarray, k: int = 5) -> float:
    """Mean over test samples of the fraction of its k nearest training neighbours (cosine,
    exact search with FAISS inner product on L2-normalised vectors) in the same group.

    For HumanEval the group is the (problem, tier) pair: this is the multi-label fine-tuning
    notes' goal of "embeddings aware of both the problem and the correctness tier"
    (docs/sources.md).

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
        raise ValueError("knn_label_purity: embeddings and groups differ in length")
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
