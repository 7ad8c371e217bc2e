"""Stage-level functions: the lower-layer cache and one compared variant end to end.

Registry losses (``mulsupcon``, ``all``, ``any``, ``simdis``) and ``bce`` are trained by the
fine-tuning loop; reference rows by their ``method``: ``frozen_head`` (frozen states + head,
``head_loss``), ``frozen_encoder`` (mean-pooled, untrained) and ``lexical`` (TF-IDF of code
tokens, Salton & Buckley 1988, unigrams + bigrams, fitted on the training rows).
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..errors import InputError, UnknownNameError
from ..evaluation.picks import seed_summary
from ..params.finetune import DETERMINISTIC_ROWS, FINETUNE_VARIANTS, HEAD_LOSS, ROW_METHOD
from ..params.presets import load_with_overrides  # noqa: F401 (re-exported for the stages)
from .data import label_matrix, label_names
from .encoder import FinetuneEncoder, pad_states
from .metrics import BASELINES, item_metrics
from .tfidf import tfidf_embeddings
from .train import Inputs, embed_inputs, train_encoder

__all__ = ["build_cache", "load_cache", "run_variant", "train_seed", "write_variant_outputs",
           "load_with_overrides", "ALL_VARIANTS"]

ALL_VARIANTS = (*FINETUNE_VARIANTS, *BASELINES)


def _encoder(ft, layers=None, proj_dim=None) -> FinetuneEncoder:
    return FinetuneEncoder(ft.model, layers=ft.layers if layers is None else layers,
                           pooling=ft.pooling,
                           proj_dim=ft.proj_dim if proj_dim is None else proj_dim,
                           proj_hidden=ft.proj_hidden, max_length=ft.max_length)


def build_cache(ft, texts: list[str]) -> dict[str, torch.Tensor]:
    """Token ids and the frozen states below the trained blocks, for every text.

    The states are computed in float64 and rounded to
    :data:`contrastlab.data.teacher_repro.BODY_BITS` significant bits (stored as float32), so
    their bytes do not depend on the CPU, the BLAS kernel or the thread count (the float64
    summation noise is far below that grid; :meth:`FinetuneEncoder.lower_states` with
    ``reproducible=True``, :mod:`contrastlab.data.teacher_repro`).

    Returns:
        ``{"ids": int32 [sum T_i], "lengths": int64 [N], "level": int64 [1],
        "states": float32 [sum T_i, H]}`` (``states`` absent for ``layers: all``);
        ``level = L - layers`` is the hidden-state index of the states.
    """
    enc = _encoder(ft, proj_dim=0)
    ids = enc.tokenize(texts)
    out = {"ids": torch.as_tensor([t for x in ids for t in x], dtype=torch.int32),
           "lengths": torch.as_tensor([len(x) for x in ids], dtype=torch.int64),
           "level": torch.as_tensor([enc.n_frozen], dtype=torch.int64)}
    if not enc.train_embeddings:
        out["states"] = torch.cat(enc.lower_states(ids, ft.batch_size_encode, reproducible=True))
    return out


def load_cache(tensors: dict[str, torch.Tensor]) -> Inputs:
    """:class:`~contrastlab.finetune.train.Inputs` from :func:`build_cache` tensors."""
    lengths = tensors["lengths"].tolist()
    bounds = np.concatenate([[0], np.cumsum(lengths)]).astype(int)
    ids_flat = tensors["ids"].tolist()
    ids = [ids_flat[bounds[i]:bounds[i + 1]] for i in range(len(lengths))]
    level = int(tensors["level"][0])
    if "states" not in tensors:
        return Inputs(ids=ids, level=0)
    st = tensors["states"]
    return Inputs(states=[st[bounds[i]:bounds[i + 1]] for i in range(len(lengths))], ids=ids,
                  level=level)


def _advance(enc: FinetuneEncoder, inp: Inputs, level: int, batch_size: int) -> Inputs:
    """States moved up from ``inp.level`` to ``level`` through frozen blocks (no gradient)."""
    if level == inp.level:
        return inp
    out: list[torch.Tensor] = []
    with torch.no_grad():
        enc.eval()
        for s in range(0, len(inp), batch_size):
            part = inp.states[s:s + batch_size]
            h, m = pad_states(part)
            hh = enc.run_blocks(h, m, inp.level, level)
            out += [hh[r, : len(x)].clone() for r, x in enumerate(part)]
    return Inputs(states=out, ids=inp.ids, level=level)


def train_seed(ft, base: Inputs, variant: str, seed: int, *, y, problems, keys, train_idx,
               val_idx, device: str):
    """One seed of one row: build the encoder under ``torch.manual_seed(seed)`` (method
    ``frozen_encoder``: no head; ``frozen_head``: layers 0 + head; else ``ft.layers``), move
    the cached states up to its first trainable block, and train it (not ``frozen_encoder``)
    with early stopping on the validation retrieval mAP of ``val_idx``
    (:func:`~contrastlab.finetune.train.train_encoder`).

    Args:
        ft: :class:`contrastlab.params.finetune.FinetuneParams` (its values are used as given,
            e.g. with a trial's choices applied). base: :func:`load_cache` inputs.
        variant: a row of :data:`ALL_VARIANTS` other than the ``lexical`` one (TF-IDF).
        y: ``[N, C]`` multi-hot labels; problems, keys: ``[N]`` problem and problem|tier keys;
        train_idx, val_idx: row indices (an empty ``val_idx``: no early stopping).

    Returns:
        ``(encoder, inputs, result)``: the trained (best-validation) encoder, its inputs and
        the :class:`~contrastlab.finetune.train.TrainResult` (``None`` for ``frozen_encoder``).
    """
    method = ROW_METHOD.get(variant, "")
    torch.manual_seed(seed)
    if method == "frozen_encoder":
        enc = _encoder(ft, layers=0, proj_dim=0)
    elif method == "frozen_head":
        enc = _encoder(ft, layers=0)
    else:
        enc = _encoder(ft)
    inp = base if (base.states is None or enc.train_embeddings) else \
        _advance(enc, base, enc.n_frozen, ft.batch_size_encode)
    if enc.train_embeddings:
        inp = Inputs(ids=base.ids, level=0)
    if method == "frozen_encoder":
        return enc, inp, None
    loss, kw = (HEAD_LOSS, {}) if method == "frozen_head" else FINETUNE_VARIANTS[variant]
    r = train_encoder(enc, inp, y, problems, train_idx, loss=loss, loss_kwargs=kw, cfg=ft,
                      seed=seed, val_idx=val_idx if len(val_idx) else None, keys=keys,
                      knn_k=max(ft.eval.knn_k), device=device)
    return enc, inp, r


def run_variant(ft, df, cache: dict[str, torch.Tensor] | None, variant: str, *,
                seeds: list[int] | None = None, device: str | None = None,
                save_model: str | Path | None = None, tracker=None) -> dict[str, Any]:
    """Train (unless a baseline without training) and evaluate one variant over seeds.

    Args:
        ft: :class:`contrastlab.params.finetune.FinetuneParams`.
        df: the variants table of ``finetune_data`` (``problem``, ``tier``, ``text``, ``split``).
        cache: :func:`build_cache` tensors (unused by the ``lexical`` row, TF-IDF).
        variant: one of :data:`ALL_VARIANTS`.
        seeds: default ``ft.seeds`` (deterministic baselines use the first only).
        device: default ``ft.device``.
        save_model: folder for the first seed's encoder (:meth:`FinetuneEncoder.save`).
        tracker: optional :class:`contrastlab.tracking.Tracker` (curves logged per seed).

    Returns:
        ``{"items": {split: {metric: [S, Q]}}, "embeddings": [S, N, D] float32 (None for
        TF-IDF), "curves": [per-seed dict], "best_step": [..], "tokens": [..], "seeds": [..],
        "picks": {"early_stopping": seed_summary}}`` (``picks`` empty without early stopping;
        :func:`contrastlab.evaluation.picks.seed_summary`: margins in validation rows).

    Raises:
        UnknownNameError: unknown variant.
    """
    if variant not in ALL_VARIANTS:
        raise UnknownNameError(f"unknown fine-tuning variant {variant!r}; known: {', '.join(ALL_VARIANTS)}")
    seeds = list(ft.seeds if seeds is None else seeds)
    if variant in DETERMINISTIC_ROWS:  # the same output for every seed: run once
        seeds = seeds[:1]
    dev = device or ft.device
    problems = df["problem"].astype(str).to_numpy()
    tiers = df["tier"].astype(str).to_numpy()
    split = df["split"].astype(str).to_numpy()
    e = ft.eval
    per_seed: list[dict] = []
    embs, curves, best_steps, tokens, picks = [], [], [], [], []
    if ROW_METHOD[variant] == "lexical":
        emb = tfidf_embeddings(df["text"].tolist(), split == "train", e.tfidf_max_features)
        per_seed.append(item_metrics(emb, problems, tiers, split, knn_k=e.knn_k, rank_k=e.rank_k,
                                     probe_c=e.probe_c))
    else:
        if cache is None:
            raise InputError(f"variant {variant!r} needs the lower-layer cache")
        base = load_cache(cache)
        y = label_matrix(problems, tiers, label_names(problems))
        keys = np.array([f"{a}|{b}" for a, b in zip(problems, tiers)], dtype=object)
        tr, va = np.flatnonzero(split == "train"), np.flatnonzero(split == "val")
        for i, seed in enumerate(seeds):
            enc, inp, r = train_seed(ft, base, variant, seed, y=y, problems=problems, keys=keys,
                                     train_idx=tr, val_idx=va, device=dev)
            if r is not None:
                curves.append(r.curve)
                best_steps.append(r.best_step)
                tokens.append(r.tokens)
                if r.pick is not None:
                    picks.append(r.pick)
                if tracker is not None:
                    for st, lo, vm in zip(r.curve["step"], r.curve["loss"], r.curve["val_map"]):
                        tracker.log_metrics({f"seed{seed}_loss": lo, f"seed{seed}_val_map": vm}, step=st)
            emb = embed_inputs(enc.to(dev), inp, None, ft.batch_size_encode, sub_batch=ft.sub_batch)
            embs.append(emb)
            per_seed.append(item_metrics(emb, problems, tiers, split, knn_k=e.knn_k,
                                         rank_k=e.rank_k, probe_c=e.probe_c))
            if i == 0 and save_model is not None:
                enc.save(save_model, {"variant": variant, "seed": seed,
                                      "strip_docstrings": ft.strip_docstrings})
    items = {s: {m: np.stack([p[s][m] for p in per_seed]) for m in per_seed[0][s]}
             for s in per_seed[0]}
    return {"items": items, "embeddings": torch.stack(embs) if embs else None, "curves": curves,
            "best_step": best_steps, "tokens": tokens, "seeds": seeds,
            "picks": {"early_stopping": seed_summary(picks)} if picks else {}}


def write_variant_outputs(res: dict[str, Any], variant: str, metrics_dir: str | Path,
                          run_dir: str | Path) -> dict[str, Any]:
    """Write one variant's results of :func:`run_variant` atomically.

    Files: ``<metrics_dir>/items/<variant>.npz`` (``seeds`` and every ``<split>/<metric>``
    ``[S, Q]`` per-query array), ``<metrics_dir>/<variant>.json`` (the returned summary: seeds,
    best validation step and training tokens per seed, the early-stopping pick's margins, the
    mean of every per-query metric; no wall time) and ``<run_dir>/embeddings.safetensors``
    (``[S, N, D]`` float32; absent for ``tfidf``, whose ``run_dir`` is created empty).
    """
    from ..io import atomic_path, save_safetensors, write_json

    items = {f"{s}/{m}": a for s, d in res["items"].items() for m, a in d.items()}
    with atomic_path(Path(metrics_dir) / "items" / f"{variant}.npz") as tmp:
        buf = io.BytesIO()
        np.savez_compressed(buf, seeds=np.asarray(res["seeds"]), **items)
        Path(tmp).write_bytes(buf.getvalue())
    summary = {"variant": variant, "seeds": res["seeds"], "best_step": res["best_step"],
               "tokens": res["tokens"], **({"picks": res["picks"]} if res.get("picks") else {}),
               "metrics": {k: float(np.nanmean(a)) for k, a in items.items()}}
    write_json(Path(metrics_dir) / f"{variant}.json", summary)
    if res["embeddings"] is not None:
        save_safetensors(Path(run_dir) / "embeddings.safetensors", {"embeddings": res["embeddings"]})
    else:
        Path(run_dir).mkdir(parents=True, exist_ok=True)
    return summary
