"""Retrieval metrics over a corpus with a FAISS inner-product index (Rank@k; docs/sources.md).

Queries and corpus are L2-normalised (inner product = cosine). The true body's rank is
``1 + #{corpus items scoring strictly higher}``: read from the top-``k_max`` list when there,
else counted exactly (chunked matrix product), so MRR and median rank are exact. GPU FAISS
when available. Rank@k = share of queries with the true body in the top ``k``; MRR = mean 1/rank.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

__all__ = ["build_index", "search", "true_ranks", "rank_at_k_curve", "rank_metrics"]


def _np32(x: torch.Tensor | np.ndarray) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        x = x.detach().to(torch.float32).cpu().numpy()
    return np.ascontiguousarray(x, dtype=np.float32)


def build_index(corpus: torch.Tensor | np.ndarray, device: str = "auto"):
    """FAISS ``IndexFlatIP`` over ``corpus [N, D]`` (should be L2-normalised).

    ``device``: ``auto`` (GPU when ``faiss`` has GPU support and CUDA is present), ``cpu``, ``cuda``.
    """
    import faiss

    x = _np32(corpus)
    index = faiss.IndexFlatIP(x.shape[1])
    use_gpu = device != "cpu" and hasattr(faiss, "StandardGpuResources") and \
        faiss.get_num_gpus() > 0 and torch.cuda.is_available()
    if device.startswith("cuda") and not use_gpu:
        raise RuntimeError("evaluation on cuda requested but FAISS has no GPU support here")
    if use_gpu:
        res = faiss.StandardGpuResources()
        index = faiss.index_cpu_to_gpu(res, 0, index)
        index._res = res  # keep the resources alive with the index
    index.add(x)
    return index


def search(index, queries: torch.Tensor | np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-``k`` ``(scores [Q, k] float32, ids [Q, k] int64)``, best first."""
    return index.search(_np32(queries), int(min(k, index.ntotal)))


def true_ranks(queries: torch.Tensor, corpus: torch.Tensor, true_idx: torch.Tensor | np.ndarray,
               k_max: int = 100, device: str = "auto", index=None) -> np.ndarray:
    """1-based rank of each query's true corpus item.

    Args:
        queries: ``[Q, D]``; corpus: ``[N, D]`` (both normalised inside).
        true_idx: ``[Q]`` row of the true item in ``corpus``.
        k_max: depth of the FAISS search; deeper ranks are counted exactly.
        index: a prebuilt index over the normalised corpus (built when ``None``).

    Returns:
        int64 ``[Q]`` ranks in ``1..N``.
    """
    q = F.normalize(torch.as_tensor(queries, dtype=torch.float32), dim=-1)
    c = F.normalize(torch.as_tensor(corpus, dtype=torch.float32), dim=-1)
    true_idx = np.asarray(true_idx, dtype=np.int64)
    if index is None:
        index = build_index(c, device)
    _, ids = search(index, q, k_max)
    ranks = np.zeros(len(true_idx), dtype=np.int64)
    hit = ids == true_idx[:, None]
    found = hit.any(1)
    ranks[found] = hit[found].argmax(1) + 1
    miss = np.nonzero(~found)[0]
    for s in range(0, len(miss), 1024):
        sel = torch.as_tensor(miss[s:s + 1024])
        scores = q[sel] @ c.T
        t = scores[torch.arange(len(sel)), torch.as_tensor(true_idx[miss[s:s + 1024]])]
        ranks[miss[s:s + 1024]] = (scores > t[:, None]).sum(1).numpy() + 1
    return ranks


def rank_at_k_curve(ranks: np.ndarray, k_max: int = 100) -> np.ndarray:
    """``[k_max]`` fractions: entry ``k-1`` = Rank@k = mean(rank <= k)."""
    ranks = np.asarray(ranks)
    return np.array([(ranks <= k).mean() for k in range(1, k_max + 1)], dtype=np.float64)


def rank_metrics(ranks: np.ndarray) -> dict[str, float]:
    """Rank@1/5/10 (fractions), MRR and median rank of 1-based ranks ``[Q]``."""
    ranks = np.asarray(ranks)
    return {"rank_at_1": float((ranks <= 1).mean()), "rank_at_5": float((ranks <= 5).mean()),
            "rank_at_10": float((ranks <= 10).mean()), "mrr": float((1.0 / ranks).mean()),
            "median_rank": float(np.median(ranks))}
