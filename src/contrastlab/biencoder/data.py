"""Pairs of the bi-encoder and the lower-layer cache.

Rows: the functions of ``functions.parquet`` in id order, with split, repository group (the
bootstrap cluster) and near-duplicate group (never each other's negatives). The cache
(:func:`build_cache`) holds token ids and the states after the ``L - k`` frozen blocks of
signatures and bodies, stored as float16 (read back as float32).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..errors import InputError

__all__ = ["Pairs", "load_pairs", "build_cache", "make_encoder"]


@dataclass
class Pairs:
    """Texts and labels of every function (``N`` rows, id order)."""

    ids: np.ndarray          # [N] int64 function ids
    signatures: list[str]
    bodies: list[str]
    split: np.ndarray        # [N] object: train / val / test / excluded
    repo: np.ndarray         # [N] repository group (bootstrap cluster)
    dup: np.ndarray          # [N] int64 near-duplicate group
    meta: list[dict]         # [N] id, repo, path, qualname, signature (for the index)

    def rows(self, split: str) -> np.ndarray:
        return np.flatnonzero(self.split == split)


def load_pairs(functions: str | Path, splits: str | Path) -> Pairs:
    """Signature/body pairs with their split.

    Raises:
        FileNotFoundError: an input is missing.
        InputError: the two files list different function ids.
    """
    import pandas as pd

    fn = pd.read_parquet(functions).sort_values("id")
    sp = pd.read_parquet(splits).sort_values("id")
    if len(fn) != len(sp) or (fn["id"].to_numpy() != sp["id"].to_numpy()).any():
        raise InputError(f"{functions} and {splits} list different functions (rerun split_by_repo)")
    dup = sp["dup_group"].to_numpy() if "dup_group" in sp else np.arange(len(sp))
    repo = sp["repo_group"].to_numpy() if "repo_group" in sp else sp["repo"].to_numpy()
    cols = [c for c in ("repo", "path", "qualname") if c in fn]
    meta = [{"id": int(i), "signature": s, **{c: str(r[c]) for c in cols}}
            for (i, s), (_, r) in zip(zip(fn["id"], fn["signature"]), fn[cols].iterrows())]
    return Pairs(fn["id"].to_numpy().astype(np.int64), fn["signature"].tolist(), fn["body"].tolist(),
                 sp["split"].to_numpy().astype(object), np.asarray(repo).astype(str),
                 np.asarray(dup, dtype=np.int64), meta)


def make_encoder(be, layers=None):
    """The :class:`~contrastlab.finetune.encoder.FinetuneEncoder` of ``code.biencoder`` ``be``:
    mean pooling, no projection head (the sentence-transformers architecture of
    all-MiniLM-L6-v2), ``be.layers`` trained blocks unless ``layers`` is given."""
    from ..finetune.encoder import FinetuneEncoder

    return FinetuneEncoder(be.model, layers=be.layers if layers is None else layers,
                           pooling="mean", proj_dim=0, max_length=be.max_length)


def build_cache(be, signatures: list[str], bodies: list[str], reproducible: bool = True
                ) -> dict[str, torch.Tensor]:
    """Token ids (and, unless ``layers: all``, the frozen lower states) of every text.

    Returns:
        ``{"<part>_ids": int32 [sum T], "<part>_lengths": int64 [N], "<part>_states":
        float16 [sum T, H]}`` for ``part`` in ``sig``, ``body``, and ``"level"`` int64 [1]
        (the hidden-state index of the states; 0 and no states for ``layers: all``). The
        states come from a float64 pass rounded to a fixed grid
        (:meth:`contrastlab.finetune.encoder.FinetuneEncoder.lower_states` with
        ``reproducible=True``), so their bytes do not
        depend on the CPU or thread count. ``reproducible=False``: a float32 pass (what a
        one-off run needs, e.g. ``scripts/compute_curve.py``; same shapes and dtypes).
    """
    enc = make_encoder(be)
    out = {"level": torch.as_tensor([0 if enc.train_embeddings else enc.n_frozen], dtype=torch.int64)}
    for part, texts in (("sig", signatures), ("body", bodies)):
        ids = enc.tokenize(texts)
        out[f"{part}_ids"] = torch.as_tensor([t for x in ids for t in x], dtype=torch.int32)
        out[f"{part}_lengths"] = torch.as_tensor([len(x) for x in ids], dtype=torch.int64)
        if not enc.train_embeddings:
            st = enc.lower_states(ids, be.batch_size_encode, reproducible=reproducible)
            out[f"{part}_states"] = torch.cat(st).to(torch.float16).contiguous()
    return out
