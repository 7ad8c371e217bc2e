"""The fine-tuning loop: multi-label contrastive losses or BCE on a :class:`FinetuneEncoder`.

Each optimiser step accumulates ``grad_accum`` micro-batches of ``P`` problems x ``M``
variants (:class:`~contrastlab.finetune.data.PKSampler`). Contrastive variants pass the
L2-normalised ``z [B, 1, D]`` and multi-hot ``y [B, C]`` to the registry loss as
``loss(z, y, temperature=T, **kwargs)`` (MulSupCon, Zhang & Wu, AAAI 2024; ALL / ANY, Sim-Dis
paper Eq. 1-3; Sim-Dis Eq. 13), under ``torchrun`` via
:func:`contrastlab.losses.distributed_loss`. BCE: a linear layer on the head output.

AdamW (Loshchilov & Hutter 2019) with ``lr_encoder`` / ``lr_head`` groups, linear warm-up then
cosine decay, bf16 autocast on capable CUDA devices. Every ``eval_every`` steps the
validation retrieval mAP is measured and the best trainable state kept. Batches come from a
``torch.Generator`` seeded ``seed + rank``; the head is initialised under
``torch.manual_seed(seed)``, so a CPU rerun is bitwise identical.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..errors import InputError
from .data import PKSampler
from .encoder import FinetuneEncoder, pad_states
from .metrics import average_precision_rows, knn_purity  # noqa: F401 (knn_purity re-exported)

__all__ = ["Inputs", "embed_inputs", "train_encoder", "knn_purity", "use_bf16"]

#: ``needs`` of the registry losses this module loads (read by scripts/stage_deps.py).
LOSS_NEEDS = ("multilabels",)


@dataclass
class Inputs:
    """What the trainable part reads, per row: cached states ``[T_i, H]`` at ``level``
    (``level = n_frozen``) or token ids (``states is None``, for ``layers = "all"``)."""

    states: list[torch.Tensor] | None = None
    ids: list[list[int]] | None = None
    level: int = 0

    def __len__(self) -> int:
        return len(self.states if self.states is not None else self.ids)


def use_bf16(setting: str, device: torch.device) -> bool:
    """``on`` -> True (raises on a device without bf16), ``off`` -> False, ``auto`` -> CUDA with
    bf16 support."""
    if setting == "off":
        return False
    ok = device.type == "cuda" and torch.cuda.is_bf16_supported()
    if setting == "on" and not ok and device.type != "cpu":
        raise InputError(f"bf16 requested but {device} does not support it")
    return ok or (setting == "on" and device.type == "cpu")


#: Rows per padded sub-batch inside a (micro-)batch: rows are grouped by length so that
#: little padding is computed; the encoder treats rows independently, so the outputs (and
#: gradients) equal one padded pass.
SUB_BATCH = 8


def _forward_rows(enc: FinetuneEncoder, inp: Inputs, idx: Sequence[int], raw: bool = False,
                  sub_batch: int = SUB_BATCH) -> torch.Tensor:
    """Embeddings ``[len(idx), D]`` (unit rows; ``raw``: head output before normalising).

    Rows are sorted by length and run in padded sub-batches of ``sub_batch`` rows (less padding
    on a CPU; a GPU wants larger ones: ``finetune.sub_batch``)."""
    idx = list(idx)
    lens = [len(inp.states[i]) if inp.states is not None else len(inp.ids[i]) for i in idx]
    order = sorted(range(len(idx)), key=lambda j: (lens[j], j))
    parts = [_forward_padded(enc, inp, [idx[j] for j in order[s:s + sub_batch]], raw)
             for s in range(0, len(order), sub_batch)]
    return torch.cat(parts)[torch.argsort(torch.as_tensor(order))]  # back to the order of idx


def _forward_padded(enc: FinetuneEncoder, inp: Inputs, idx: Sequence[int], raw: bool = False) -> torch.Tensor:
    dev = next(enc.parameters()).device
    if inp.states is not None:
        h, mask = pad_states([inp.states[i] for i in idx])
        h, mask = h.to(dev), mask.to(dev)
        hh = enc.run_blocks(h, mask, inp.level, len(enc.blocks))
    else:
        input_ids, mask = enc._ids_batch([inp.ids[i] for i in idx])
        if enc.train_embeddings:
            hh = enc.run_blocks(enc.embed_tokens(input_ids), mask, 0, len(enc.blocks))
        else:
            with torch.no_grad():
                h0 = enc.run_blocks(enc.embed_tokens(input_ids), mask, 0, enc.n_frozen)
            hh = enc.run_blocks(h0, mask, enc.n_frozen, len(enc.blocks))
    pooled = enc.pool(hh, mask)
    return enc.head(pooled).float() if raw else enc.project(pooled)


@torch.no_grad()
def embed_inputs(enc: FinetuneEncoder, inp: Inputs, idx: Sequence[int] | None = None,
                 batch_size: int = 64, bf16: bool = False, sub_batch: int = SUB_BATCH) -> torch.Tensor:
    """Embeddings ``[len(idx), D]`` float32 CPU (eval mode; input order)."""
    idx = list(range(len(inp))) if idx is None else list(idx)
    was = enc.training
    enc.eval()
    out = torch.zeros((len(idx), enc.out_dim))
    dev = next(enc.parameters()).device
    lens = [int((inp.states[i] if inp.states is not None else inp.ids[i]).__len__()) for i in idx]
    order = sorted(range(len(idx)), key=lambda j: -lens[j])
    with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=bf16):
        for s in range(0, len(order), batch_size):
            part = order[s:s + batch_size]
            out[part] = _forward_rows(enc, inp, [idx[j] for j in part], sub_batch=sub_batch).float().cpu()
    enc.train(was)
    return out


def _val_map(e_tr: torch.Tensor, e_va: torch.Tensor, keys: np.ndarray, tr, va) -> tuple[float, np.ndarray]:
    """Validation retrieval mAP: validation rows query the training rows, relevant = same
    key (problem and tier). Unlike kNN@5 purity, which small cells cap near the frozen
    encoder's value, it moves with every rank change. Returns the mAP and the float64
    ``[n]`` mAP with each of the ``n`` validation rows that have a relevant training row
    left out (the pick's margin, :func:`contrastlab.evaluation.picks.pick_record`)."""
    sim = F.normalize(e_va, dim=1) @ F.normalize(e_tr, dim=1).T
    ap, _ = average_precision_rows(sim, keys[va][:, None] == keys[tr][None, :], [1])
    ap = np.asarray(ap, dtype=np.float64)
    ap = ap[~np.isnan(ap)]
    return float(ap.mean()), (ap.sum() - ap) / max(1, len(ap) - 1)


@dataclass
class TrainResult:
    curve: dict[str, list[float]] = field(default_factory=lambda: {"step": [], "loss": [], "val_map": []})
    best_step: int = 0
    best_val: float = float("nan")
    tokens: int = 0
    pick: dict | None = None  # the kept step's record (evaluation.picks.pick_record)


def train_encoder(enc: FinetuneEncoder, inp: Inputs, y: torch.Tensor, groups, train_idx, *,
                  loss: str | None, loss_kwargs: dict[str, Any] | None = None, cfg, seed: int,
                  val_idx=None, keys=None, knn_k: int = 5, device: str | torch.device = "cpu",
                  rank: int = 0) -> TrainResult:
    """Fine-tune ``enc`` in place; on return it holds the best validation state (eval mode).

    Args:
        enc: the encoder (its ``n_frozen`` must equal ``inp.level`` for cached states).
        inp: per-row inputs (:class:`Inputs`), all rows of the table.
        y: float32 multi-hot ``[N, C]``.
        groups: ``[N]`` problem ids (batch sampling).
        train_idx: rows trained on.
        loss: registry name (``mulsupcon``, ``all``, ``any``, ``simdis``) or ``None`` = BCE.
        loss_kwargs: extra keyword arguments of the loss (``weighting`` for Sim-Dis).
        cfg: :class:`contrastlab.params.finetune.FinetuneParams` (``steps``, ``grad_accum``,
            ``batch_problems``, ``batch_per_problem``, ``lr_encoder``, ``lr_head``,
            ``weight_decay``, ``warmup``, ``temperature``, ``eval_every``, ``bf16``, ``sub_batch``).
        seed: training seed.
        val_idx, keys: validation rows and the ``[N]`` relevance keys of the validation mAP
            (``problem|tier``); without them the last state is kept.
        device: where to train.

    Returns:
        :class:`TrainResult` (loss curve, validation curve, best step, tokens processed, the
        best step's pick record with its margin in validation rows).

    Raises:
        FloatingPointError: a non-finite loss (names the step).
        InputError: cached states at a level other than the encoder's frozen depth.
    """
    from ..losses import distributed_loss
    from ..distributed import average_gradients, ddp_loss_scale
    from ..evaluation.picks import pick_record
    from ..training.multilabel import resolve_loss, warmup_cosine

    if inp.states is not None and inp.level != enc.n_frozen:
        raise InputError(f"cached states are at level {inp.level}, the encoder freezes {enc.n_frozen} blocks")
    dev = torch.device(device)
    bf16 = use_bf16(cfg.bf16, dev)
    torch.manual_seed(seed)
    clf = nn.Linear(enc.out_dim, y.shape[1]).to(dev) if loss is None else None
    loss_fn = None if loss is None else resolve_loss(loss, loss_kwargs or {})
    enc.to(dev).train()
    groups_enc = enc.encoder_parameters()
    head = enc.head_parameters() + (list(clf.parameters()) if clf is not None else [])
    param_groups = [g for g in ({"params": groups_enc, "lr": cfg.lr_encoder},
                                {"params": head, "lr": cfg.lr_head}) if g["params"]]
    if not param_groups:
        raise InputError("nothing to train: layers = 0 and no projection head")
    opt = torch.optim.AdamW(param_groups, weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, warmup_cosine(cfg.steps, cfg.warmup))
    gen = torch.Generator().manual_seed(seed + rank)
    train_idx = np.asarray(train_idx)
    g = np.asarray(groups)[train_idx]
    batches = iter(PKSampler(g, cfg.batch_problems, cfg.batch_per_problem, gen))
    res = TrainResult()
    best_state, best = None, -1.0
    loos: list[np.ndarray] = []
    acc, cnt = 0.0, 0
    trainable = [p for grp in param_groups for p in grp["params"]]
    for step in range(1, cfg.steps + 1):
        opt.zero_grad(set_to_none=True)
        for _ in range(cfg.grad_accum):
            rows = train_idx[next(batches).numpy()]
            yb = y[rows].to(dev)
            with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=bf16):
                if clf is None:
                    z = _forward_rows(enc, inp, rows, sub_batch=cfg.sub_batch)
                    val = distributed_loss(loss_fn, z.float().unsqueeze(1), yb,
                                           temperature=cfg.temperature) * ddp_loss_scale()
                else:
                    val = F.binary_cross_entropy_with_logits(
                        clf(_forward_rows(enc, inp, rows, raw=True, sub_batch=cfg.sub_batch)).float(), yb)
            if not torch.isfinite(val):
                raise FloatingPointError(f"loss {loss or 'binary cross-entropy'!r} is {val.item()} at step {step}")
            (val / cfg.grad_accum).backward()
            acc += float(val.detach()) / cfg.grad_accum
            res.tokens += int(sum(len(inp.states[i]) if inp.states is not None else len(inp.ids[i])
                                  for i in rows))
        average_gradients(trainable)
        torch.nn.utils.clip_grad_norm_(trainable, 10.0)
        opt.step()
        sched.step()
        cnt += 1
        if val_idx is not None and (step % cfg.eval_every == 0 or step == cfg.steps):
            e_tr = embed_inputs(enc, inp, train_idx, cfg.batch_size_encode, bf16, cfg.sub_batch)
            e_va = embed_inputs(enc, inp, val_idx, cfg.batch_size_encode, bf16, cfg.sub_batch)
            m, loo = _val_map(e_tr, e_va, np.asarray(keys, dtype=object), train_idx, np.asarray(val_idx))
            loos.append(loo)
            res.curve["step"].append(step)
            res.curve["loss"].append(acc / max(1, cnt))
            res.curve["val_map"].append(m)
            acc, cnt = 0.0, 0
            if m > best + 1e-9:
                best, best_state, res.best_step = m, enc.trainable_state(), step
    if best_state is not None:
        enc.load_state_dict(best_state, strict=False)
        res.best_val = best
        res.pick = pick_record("validation retrieval mAP", res.curve["step"],
                               np.asarray(res.curve["val_map"]), np.stack(loos),
                               res.curve["step"].index(res.best_step))
    else:
        res.best_step = cfg.steps
    enc.eval()
    return res
