"""How the Sim-Dis weights fall on a data set's label relations (stage
``multilabel_weights@<dataset>``): for a seeded sample of training rows, every (anchor, other
sample) pair's relation type (Similarity-Dissimilarity loss, Eq. 8-12: R1 disjoint, R2 equal,
R3 partial overlap, R4 anchor superset, R5 anchor subset) and its weight K^s K^d (Eq. 14-15),
both computed by :mod:`contrastlab.losses.simdis`.
"""

from __future__ import annotations

import numpy as np

__all__ = ["relation_weights"]


def relation_weights(y, max_samples: int = 1500, bins: int = 20):
    """Histogram of the Sim-Dis pair weights per relation type.

    Args:
        y: ``[N, L]`` multi-hot training labels (``torch.Tensor``, any dtype; 0/1).
        max_samples: rows kept (a seeded permutation, seed 0) when ``N`` is larger.
        bins: equal-width bins of the weight on [0, 1].

    Returns:
        ``(table, summary)``: a DataFrame (``relation, bin_left, bin_right, count``; 5 x
        ``bins`` rows) and a dict with ``n_samples``, ``n_pairs`` (ordered pairs, a sample
        with itself excluded) and per relation ``R<r>_pairs``, ``R<r>_fraction`` and
        ``R<r>_weight_mean`` (None when no pair has that relation).
    """
    import pandas as pd
    import torch

    from ..losses.simdis import relation_types, simdis_weights

    y = y.float()
    if len(y) > max_samples:
        g = torch.Generator().manual_seed(0)
        y = y[torch.randperm(len(y), generator=g)[:max_samples]]
    rel = relation_types(y)
    w = simdis_weights(y)
    off = ~torch.eye(len(y), dtype=torch.bool)  # a sample with itself is not a pair
    rel, w = rel[off].numpy(), w[off].numpy()
    edges = np.linspace(0.0, 1.0, bins + 1)
    rows, summary = [], {"n_samples": int(len(y)), "n_pairs": int(len(rel))}
    for r in range(1, 6):
        m = rel == r
        counts, _ = np.histogram(w[m], bins=edges)
        for i, c in enumerate(counts):
            rows.append({"relation": f"R{r}", "bin_left": edges[i], "bin_right": edges[i + 1],
                         "count": int(c)})
        summary[f"R{r}_pairs"] = int(m.sum())
        summary[f"R{r}_fraction"] = float(m.mean()) if len(m) else 0.0
        summary[f"R{r}_weight_mean"] = float(w[m].mean()) if m.any() else None
    return pd.DataFrame(rows), summary
