"""The bi-encoder training loop (trainer ``contrastlab``) and FAISS hard-negative mining.

Per step each process embeds ``batch_size`` training pairs (a seeded permutation; rank ``r``
takes slice ``r`` of each global batch) with the signature and body towers (one module with
``towers: shared``), running only the trained top blocks on the cached lower states. Loss:
InfoNCE over cosine logits with a learnable temperature clamped to ``[0.01, 1]`` (van den Oord
et al. 2018, Eq. 4) via :func:`contrastlab.losses.distributed_infonce_loss` (bodies gathered
with gradient), so ``W`` processes equal one process on the global batch.

``infonce_hardneg``: every ``hardneg_refresh`` steps (and before the first) the body tower
fills a FAISS inner-product index (:func:`faiss_index`; GPU when possible) and each signature's
top neighbours outside its near-duplicate group give ``hardneg_k`` negatives (Xiong et al.
2021, ANCE, Sec. 3), appended to the denominator.

AdamW (Loshchilov & Hutter 2019), linear warm-up then cosine decay, gradient clipping, bf16
autocast on CUDA (``bf16: auto``); the last state is kept (model selection is the study's).
"""

from __future__ import annotations

import copy
import inspect
import time
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from ..errors import InputError
from ..losses.registry import get_loss

#: What the registry losses this module trains consume (scripts/stage_deps.py reads it: the
#: bi-encoder stages depend on the digests of the losses with these needs).
LOSS_NEEDS = ("targets",)

__all__ = ["load_cache", "BiEncoder", "TrainResult", "pair_batches", "faiss_index", "index_label",
           "mine_hard_negatives", "train_biencoder"]


def load_cache(tensors: dict[str, torch.Tensor]):
    """``(sig Inputs, body Inputs)`` (:class:`contrastlab.finetune.train.Inputs`) from
    :func:`build_cache` tensors; states as float32."""
    from ..finetune.run import load_cache as _load

    out = []
    for part in ("sig", "body"):
        t = {"ids": tensors[f"{part}_ids"], "lengths": tensors[f"{part}_lengths"],
             "level": tensors["level"]}
        if f"{part}_states" in tensors:
            t["states"] = tensors[f"{part}_states"].float()
        out.append(_load(t))
    return out[0], out[1]


class BiEncoder(nn.Module):
    """Signature and body towers (the same module when shared) and the loss's log-temperature."""

    def __init__(self, encoder, towers: str = "shared", temperature: float = 0.05,
                 learn_temperature: bool = True):
        super().__init__()
        from ..losses.infonce import InfoNCELoss

        if towers not in ("shared", "separate"):
            raise InputError(f"towers must be 'shared' or 'separate', got {towers!r}")
        self.sig = encoder
        self.body = encoder if towers == "shared" else copy.deepcopy(encoder)
        self.towers = towers
        self.loss = InfoNCELoss(temperature, learnable=learn_temperature)

    def encoder_parameters(self) -> list[nn.Parameter]:
        towers = (self.sig,) if self.body is self.sig else (self.sig, self.body)
        return [p for t in towers for p in t.encoder_parameters()]


def pair_batches(train_idx: np.ndarray, batch: int, steps: int, seed: int) -> np.ndarray:
    """``[steps, batch]`` training rows: seeded permutations of ``train_idx`` one after another
    (a batch never holds a row twice unless ``batch > len(train_idx)``, refused).

    Raises:
        InputError: fewer training rows than ``batch``.
    """
    train_idx = np.asarray(train_idx)
    if len(train_idx) < batch:
        raise InputError(f"{len(train_idx)} training pairs for a batch of {batch}")
    rng = np.random.default_rng(seed)
    per = len(train_idx) // batch
    out = []
    while len(out) < steps:
        perm = train_idx[rng.permutation(len(train_idx))]
        out += [perm[i * batch:(i + 1) * batch] for i in range(per)]
    return np.stack(out[:steps])


def _faiss_gpu(device) -> bool:
    import faiss

    return torch.device(device).type == "cuda" and hasattr(faiss, "StandardGpuResources") \
        and faiss.get_num_gpus() > 0


def index_label(device="cpu") -> str:
    """What :func:`faiss_index` builds on ``device``: ``faiss-gpu IndexFlatIP`` or
    ``faiss-cpu IndexFlatIP`` (exact inner product either way), recorded in the metrics."""
    return f"faiss-{'gpu' if _faiss_gpu(device) else 'cpu'} IndexFlatIP"


def faiss_index(corpus: torch.Tensor, device="cpu"):
    """Exact inner-product index (FAISS ``IndexFlatIP``) over ``corpus [N, D]``: on this
    process's GPU (``faiss.StandardGpuResources``) when ``device`` is CUDA and FAISS has GPU
    support (faiss-gpu), else on the CPU (:func:`index_label` says which)."""
    import faiss

    from ..evaluation.retrieval import build_index

    index = build_index(corpus, "cpu")
    if not _faiss_gpu(device):
        return index
    dev = torch.device(device)
    res = faiss.StandardGpuResources()
    gpu = faiss.index_cpu_to_gpu(res, torch.cuda.current_device() if dev.index is None else dev.index, index)
    gpu._res = res  # keep the resources alive with the index
    return gpu


def mine_hard_negatives(q: torch.Tensor, corpus: torch.Tensor, positive: np.ndarray,
                        dup: np.ndarray, k: int, device="cpu") -> np.ndarray:
    """``k`` hard negatives per query: its nearest corpus rows by inner product
    (:func:`faiss_index` on ``device``), skipping the positive and every row of the
    positive's near-duplicate group.

    Args:
        q: ``[Q, D]`` query embeddings; corpus: ``[N, D]`` (both unit rows).
        positive: ``[Q]`` corpus row of each query's own body; dup: ``[N]`` group per corpus row.
        k: negatives per query (``<`` the corpus rows outside a group).

    Returns:
        int64 ``[Q, k]`` corpus rows, nearest first.

    Raises:
        InputError: not enough candidates outside a query's group.
    """
    from ..evaluation.retrieval import search

    dup = np.asarray(dup)
    width = k + 1 + int(np.bincount(dup - dup.min()).max())
    if width > len(corpus):
        raise InputError(f"cannot mine {k} negatives from {len(corpus)} rows")
    _, nn_idx = search(faiss_index(corpus, device), q, width)
    out = np.empty((len(q), k), dtype=np.int64)
    for i, row in enumerate(nn_idx):
        g = dup[positive[i]]
        keep = [j for j in row if j >= 0 and j != positive[i] and dup[j] != g][:k]
        if len(keep) < k:
            raise InputError(f"query {i}: only {len(keep)} negatives outside its group")
        out[i] = keep
    return out


@dataclass
class TrainResult:
    curve: dict[str, list[float]] = field(default_factory=lambda: {"step": [], "loss": [], "temperature": []})
    tokens: int = 0
    seconds: float = 0.0   # wall time of the steps (never written to hashed outputs)


def train_biencoder(model: BiEncoder, sig_inp, body_inp, train_idx, dup, *, be, row, seed: int,
                    device: str | torch.device = "cpu", log_every: int = 8) -> TrainResult:
    """Fine-tune ``model`` in place for ``be.steps`` steps (module docstring).

    Args:
        model: :class:`BiEncoder` whose towers freeze ``inp.level`` blocks.
        sig_inp, body_inp: :class:`contrastlab.finetune.train.Inputs` of every function.
        train_idx: training rows; dup: ``[N]`` near-duplicate group of every row.
        be: ``code.biencoder`` params (steps, batch_size, weight_decay, warmup, grad_clip,
            lr_temperature, hardneg_k, hardneg_refresh, sub_batch, batch_size_encode, bf16).
        row: the row's :class:`contrastlab.params.biencoder.BiencoderRow` (loss, lr, ...).
        seed: training seed (batches: ``seed``; the same pairs for every row).

    Returns:
        :class:`TrainResult` (loss and temperature every ``log_every`` steps, tokens seen). The
        logged loss is the global batch's (summed over ranks, the same on every rank).

    Raises:
        FloatingPointError: a non-finite loss (names the step).
        InputError: cached states at another level than the towers freeze.
    """
    from ..distributed import all_reduce_sum, average_gradients, ddp_loss_scale, rank, world_size
    from ..finetune.train import _forward_rows, embed_inputs, use_bf16
    from ..losses import distributed_infonce_loss
    from ..training.multilabel import warmup_cosine

    for t, inp in ((model.sig, sig_inp), (model.body, body_inp)):
        if inp.states is not None and inp.level != t.n_frozen:
            raise InputError(f"cached states are at level {inp.level}, the encoder freezes {t.n_frozen} blocks")
    dev = torch.device(device)
    bf16 = use_bf16(be.bf16, dev)
    model.to(dev).train()
    enc_params = model.encoder_parameters()
    groups = [{"params": enc_params, "lr": row.lr, "weight_decay": be.weight_decay}]
    if row.learn_temperature:
        groups.append({"params": [model.loss.log_temperature], "lr": be.lr_temperature, "weight_decay": 0.0})
    opt = torch.optim.AdamW(groups)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, warmup_cosine(be.steps, be.warmup))
    w, r = world_size(), rank()
    batches = pair_batches(train_idx, be.batch_size * w, be.steps, seed)
    # hard negatives when the registry's loss function takes them (as in training/code.py)
    hard = "hard_negatives" in inspect.signature(get_loss(row.loss)).parameters
    train_idx = np.asarray(train_idx)
    pos_in_train = {int(j): i for i, j in enumerate(train_idx)}
    negs = None
    res = TrainResult()
    trainable = [p for g in groups for p in g["params"]]
    acc, cnt = 0.0, 0
    t0 = time.perf_counter()
    for step in range(1, be.steps + 1):
        if hard and (negs is None or (step - 1) % be.hardneg_refresh == 0):
            q = embed_inputs(model.sig, sig_inp, train_idx, be.batch_size_encode, bf16, be.sub_batch)
            c = embed_inputs(model.body, body_inp, train_idx, be.batch_size_encode, bf16, be.sub_batch)
            local = mine_hard_negatives(q, c, np.arange(len(train_idx)), np.asarray(dup)[train_idx],
                                        be.hardneg_k, dev)
            negs = train_idx[local]
            model.train()
        rows = batches[step - 1][r * be.batch_size:(r + 1) * be.batch_size]
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=bf16):
            zs = _forward_rows(model.sig, sig_inp, rows, sub_batch=be.sub_batch).float()
            zb = _forward_rows(model.body, body_inp, rows, sub_batch=be.sub_batch).float()
            hn = None
            if hard:
                nrows = negs[[pos_in_train[int(j)] for j in rows]]            # [B, K]
                hn = _forward_rows(model.body, body_inp, nrows.reshape(-1),
                                   sub_batch=be.sub_batch).float().reshape(len(rows), be.hardneg_k, -1)
            val = distributed_infonce_loss(zs, zb, model.loss.log_temperature, hn,
                                           targets_with_grad=True)
        if not torch.isfinite(val):
            raise FloatingPointError(f"loss {row.loss!r} is {val.item()} at step {step}")
        (val * ddp_loss_scale()).backward()
        average_gradients(trainable)
        if be.grad_clip:
            torch.nn.utils.clip_grad_norm_(enc_params, be.grad_clip)
        opt.step()
        sched.step()
        lens = [len(sig_inp.ids[i]) + len(body_inp.ids[i]) for i in rows]
        if hard:
            lens += [len(body_inp.ids[i]) for i in nrows.reshape(-1)]
        res.tokens += int(sum(lens))
        acc += float(all_reduce_sum(val.detach()))  # the global-batch mean (val: this rank's share)
        cnt += 1
        if step % log_every == 0 or step == be.steps:
            res.curve["step"].append(step)
            res.curve["loss"].append(acc / cnt)
            res.curve["temperature"].append(model.loss.temperature)
            acc, cnt = 0.0, 0
    res.seconds = time.perf_counter() - t0
    if w > 1:  # every rank's pairs
        res.tokens = int(all_reduce_sum(torch.tensor(res.tokens)))
    model.eval()
    return res
