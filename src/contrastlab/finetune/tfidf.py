"""The TF-IDF baseline's code tokens and embeddings (Salton & Buckley 1988, "Term-weighting
approaches in automatic text retrieval"; scikit-learn ``TfidfVectorizer``). A module of its
own so that the comparison (:mod:`.evaluate`, :mod:`.tiers`) reads the tokens without
importing the training code."""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["TOKEN_PATTERN", "tfidf_embeddings"]

#: Code tokens of the TF-IDF baseline: identifiers, integers, runs of operator characters.
TOKEN_PATTERN = r"[A-Za-z_][A-Za-z0-9_]*|\d+|[^\sA-Za-z0-9_]+"


def tfidf_embeddings(texts: list[str], train_mask: np.ndarray, max_features: int) -> torch.Tensor:
    """Dense TF-IDF rows ``[N, F]`` float32 (L2-normalised by scikit-learn)."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    vec = TfidfVectorizer(token_pattern=TOKEN_PATTERN, lowercase=False, ngram_range=(1, 2),
                          max_features=max_features, sublinear_tf=True)
    vec.fit([t for t, m in zip(texts, train_mask) if m])
    return torch.as_tensor(vec.transform(texts).toarray(), dtype=torch.float32)
