"""Training loop of the code retrieval track (the retrieval experiment notes, Exp 1.3 / 1.4 /
2.1; docs/sources.md).

The SigPredictor maps a function signature's frozen teacher token states to the body's
embedding. Losses come from the registry (``smoothl1``, ``cosine``, ``infonce``,
``infonce_hardneg``). AdamW, linear warmup then cosine decay (per step), validation
Rank@10 against the full corpus (all extracted bodies) every epoch, early stopping on it
with patience, best checkpoint kept.

Distributed (``torchrun --nproc_per_node=N``; gloo on CPU, NCCL on CUDA): every epoch
draws one seeded permutation of the training functions; step ``s`` uses the global batch
``perm[s*N*B:(s+1)*N*B]`` and rank ``r`` takes its ``r``-th slice of ``B`` (= batch size per
process). For InfoNCE the (frozen) target body embeddings are gathered from all ranks (every
rank's targets are negatives) and the positive of local anchor ``i`` is gathered row ``r*B + i``. Each rank
backpropagates ``N * (B / (N*B)) * loss_r`` so that after DDP's gradient averaging the
update equals one process on the same global batch (see ``contrastlab.distributed``).
Dropout masks differ per rank, so exact equality needs ``dropout = 0`` (as in the test).

Hard negatives (``infonce_hardneg``, Exp 2.1 of the retrieval notes): every ``hardneg_refresh`` epochs a
FAISS inner-product index over the training bodies is searched with the current
predictions (epoch 0: with the true bodies) and each training function keeps its ``K``
nearest bodies that are neither its own nor an identical body (same ``body_hash``).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from ..progress import tqdm

from .. import distributed as D
from ..errors import InputError
from ..evaluation.retrieval import build_index, search, true_ranks
from ..losses import get_loss
from ..models.sig_predictor import SigPredictor

__all__ = ["CodeStudent", "CodeData", "train_code", "predict", "warmup_cosine"]
#: ``needs`` of the registry losses this module loads (read by scripts/stage_deps.py).
LOSS_NEEDS = ("targets", "regression")



def is_contrastive(loss: str) -> bool:
    """A retrieval loss with in-batch negatives (registry ``needs == "targets"``: L2-normalised
    predictions and a learnable temperature) rather than a regression baseline."""
    from ..losses import get_spec

    return get_spec(loss).needs == "targets"


def takes_hard_negatives(loss: str) -> bool:
    """The registry loss accepts mined ``hard_negatives`` (its signature says so)."""
    import inspect

    from ..losses import get_spec

    return "hard_negatives" in inspect.signature(get_spec(loss).function()).parameters


class CodeStudent(nn.Module):
    """SigPredictor plus, for InfoNCE, the learnable log-temperature (init ``log(init_temperature)``)."""

    def __init__(self, hidden_size: int, loss: str, d_model: int, n_layers: int, n_heads: int,
                 ffn: int, dropout: float, init_temperature: float = 0.07):
        super().__init__()
        self.loss_name = loss
        self.predictor = SigPredictor(hidden_size, d_model, n_layers, n_heads, ffn, dropout)
        if is_contrastive(loss):
            self.log_temperature = nn.Parameter(torch.tensor(math.log(init_temperature)))

    @property
    def normalize(self) -> bool:
        return is_contrastive(self.loss_name)

    def forward(self, states: Tensor, mask: Tensor) -> Tensor:
        return self.predictor(states, mask, normalize=self.normalize)


@dataclass
class CodeData:
    """Everything the loop needs, rows in function-id order.

    ``sig_states`` fp16 ``[N, T, H]``, ``sig_mask`` bool ``[N, T]``, ``body_emb`` fp32
    ``[N, H]``, ``split`` array of ``train|val|test`` ``[N]``, ``body_hash`` array ``[N]``.
    """

    sig_states: Tensor
    sig_mask: Tensor
    body_emb: Tensor
    split: np.ndarray
    body_hash: np.ndarray

    def rows(self, split: str) -> np.ndarray:
        return np.nonzero(self.split == split)[0]


def warmup_cosine(step: int, warmup: int, total: int) -> float:
    """LR factor: linear warmup over ``warmup`` steps, then cosine decay to 0 at ``total``."""
    if warmup > 0 and step < warmup:
        return (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))


@torch.no_grad()
def predict(model: nn.Module, data: CodeData, rows: np.ndarray, device: torch.device,
            batch_size: int = 256) -> Tensor:
    """L2-normalised predictions ``[len(rows), H]`` (fp32, CPU) in eval mode."""
    was = model.training
    model.eval()
    out = []
    for s in range(0, len(rows), batch_size):
        idx = torch.as_tensor(rows[s:s + batch_size])
        st, mk = _trim(data.sig_states[idx], data.sig_mask[idx])
        out.append(F.normalize(model(st.to(device), mk.to(device)).float(), dim=-1).cpu())
    model.train(was)
    return torch.cat(out) if out else torch.zeros((0, data.body_emb.shape[1]))


def _trim(states: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
    """Drop padding columns that no row of the batch uses."""
    t = int(mask.sum(1).max().item()) if mask.numel() else 1
    return states[:, :max(1, t)], mask[:, :max(1, t)]


def _from_rank0(t: Tensor, device: torch.device) -> Tensor:
    """Rank 0's copy of ``t`` on every rank (no-op in a single process); returned on the CPU."""
    if D.world_size() == 1:
        return t
    import torch.distributed as dist

    x = t.to(device).contiguous()
    dist.broadcast(x, src=0)
    return x.cpu()


def mine_hard_negatives(queries: Tensor, bodies_n: Tensor, body_hash: np.ndarray, k: int,
                        device: str = "auto") -> np.ndarray:
    """``[Q, k]`` row indices into ``bodies_n``: nearest bodies to each query, excluding the
    query's own row (query ``i`` is body row ``i``) and rows with the same body hash.

    Rows with fewer than ``k`` eligible neighbours are filled with the last eligible one.
    """
    index = build_index(bodies_n, device)
    depth = min(len(bodies_n), k + 16)
    _, ids = search(index, queries, depth)
    own = np.arange(len(queries))[:, None]
    same = (ids == own) | (body_hash[ids] == body_hash[own[:, 0]][:, None]) | (ids < 0)
    out = np.zeros((len(queries), k), dtype=np.int64)
    for r in range(len(queries)):  # bookkeeping per row of a search result, not a loss
        ok = ids[r][~same[r]]
        if len(ok) == 0:
            ok = np.array([(r + 1) % len(bodies_n)])
        out[r] = np.resize(ok[:k], k) if len(ok) < k else ok[:k]
    return out


def train_code(data: CodeData, hidden_size: int, loss: str, model_p, train_p,
               checkpoint: Path | None, on_epoch: Callable[[dict[str, Any]], None] | None = None,
               dump_first_step: Path | None = None, log: Callable[[str], None] = print
               ) -> dict[str, Any]:
    """Train one variant and keep the best checkpoint (by val Rank@10).

    Args:
        data: :class:`CodeData`.
        hidden_size: teacher width ``H``.
        loss: registry name (``smoothl1``, ``cosine``, ``infonce``, ``infonce_hardneg``).
        model_p: :class:`contrastlab.params.code.ModelParams`.
        train_p: :class:`contrastlab.params.code.TrainParams`.
        checkpoint: where rank 0 saves the best state (``None``: not saved).
        on_epoch: called on rank 0 with each epoch's history row.
        dump_first_step: if set, rank 0 saves the first step's global loss and gradients
            there (``torch.save``) and training stops after that step (equivalence tests).

    Returns:
        Summary: ``history`` (list of per-epoch dicts), ``best_epoch``, ``best_val_rank_at_10``,
        ``epochs_run``, ``time_s``, ``world_size``.

    Raises:
        FloatingPointError: the loss became NaN/inf.
        ValueError: no training or validation functions.
    """
    from ..io import save_torch
    from ..utils import seed_everything, set_cpu_threads

    info = D.init_distributed(train_p.device)
    set_cpu_threads(train_p.threads)
    seed_everything(train_p.seed)
    dev = info.device
    world, rank = info.world_size, info.rank
    tr, va = data.rows("train"), data.rows("val")
    if len(tr) == 0 or len(va) == 0:
        raise InputError("code training needs train and val functions (check the split)")
    b = train_p.batch_size
    gb = b * world
    steps = len(tr) // gb
    if steps == 0:
        raise InputError(f"{len(tr)} training functions < global batch {gb}")
    loss_fn = get_loss(loss)
    contrastive, hardneg = is_contrastive(loss), takes_hard_negatives(loss)
    student = CodeStudent(hidden_size, loss, model_p.d_model, model_p.n_layers, model_p.n_heads,
                          model_p.ffn, model_p.dropout, train_p.init_temperature).to(dev)
    model: nn.Module = student
    if info.distributed:
        model = nn.parallel.DistributedDataParallel(
            student, device_ids=[dev.index] if dev.type == "cuda" else None)
    opt = torch.optim.AdamW(student.parameters(), lr=train_p.lr, weight_decay=train_p.weight_decay)
    total = steps * train_p.epochs
    warm = int(round(train_p.warmup_epochs * steps))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: warmup_cosine(s, warm, total))
    bodies_n = F.normalize(data.body_emb.float(), dim=-1)
    corpus_index = build_index(bodies_n, train_p.device)
    train_bodies_n = bodies_n[torch.as_tensor(tr)]
    hard = None
    history: list[dict[str, Any]] = []
    best = (-1.0, -1)
    bad = 0
    t0 = time.time()
    step = 0
    for epoch in tqdm(range(train_p.epochs), desc=f"train {loss}", unit="epoch",
                      disable=D.rank() != 0):
        te = time.time()
        if hardneg and epoch % train_p.hardneg_refresh == 0:
            q = train_bodies_n if epoch == 0 else predict(student, data, tr, dev)
            hard = torch.as_tensor(mine_hard_negatives(q, train_bodies_n, data.body_hash[tr],
                                                       train_p.hardneg_k, train_p.device))
            hard = _from_rank0(hard, dev)  # every rank uses rank 0's negatives
        g = torch.Generator().manual_seed(train_p.seed * 1000 + epoch)
        perm = torch.randperm(len(tr), generator=g)
        model.train()
        run_loss = torch.zeros((), dtype=torch.float64)
        for s in range(steps):
            local = perm[s * gb + rank * b: s * gb + (rank + 1) * b]
            rows = torch.as_tensor(tr)[local]
            st, mk = _trim(data.sig_states[rows], data.sig_mask[rows])
            pred = model(st.to(dev), mk.to(dev))
            target = data.body_emb[rows].to(dev)
            if contrastive:
                tn = F.normalize(target, dim=-1)
                targets = D.all_gather_no_grad(tn)
                if not hardneg:
                    l_r = loss_fn(pred, targets, student.log_temperature, anchor_offset=rank * b)
                else:
                    hn = train_bodies_n[hard[local]].to(dev)
                    l_r = loss_fn(pred, targets, student.log_temperature, hn, anchor_offset=rank * b)
            else:
                l_r = loss_fn(pred, target)
            share = l_r * (b / gb)  # this rank's share of the global-batch mean
            if not torch.isfinite(share):
                raise FloatingPointError(f"{loss}: non-finite loss at epoch {epoch} step {s}")
            opt.zero_grad(set_to_none=True)
            (share * D.ddp_loss_scale()).backward()
            glob = D.all_reduce_sum(share.detach().double().cpu())
            if dump_first_step is not None:
                if rank == 0:
                    grads = {n: p.grad.detach().cpu().clone() for n, p in student.named_parameters()
                             if p.grad is not None}
                    save_torch(dump_first_step, {"loss": float(glob), "grads": grads})
                D.cleanup()
                return {"history": [], "dumped": str(dump_first_step)}
            if train_p.grad_clip > 0:
                nn.utils.clip_grad_norm_(student.parameters(), train_p.grad_clip)
            opt.step()
            sched.step()
            step += 1
            run_loss += glob
        vpred = predict(student, data, va, dev)
        ranks = true_ranks(vpred, bodies_n, va, k_max=10, index=corpus_index)
        cos = (vpred * bodies_n[torch.as_tensor(va)]).sum(-1).mean()
        row = {"epoch": epoch + 1, "train_loss": float(run_loss / steps),
               "val_rank_at_10": float((ranks <= 10).mean()),
               "val_rank_at_1": float((ranks <= 1).mean()),
               "val_mrr": float((1.0 / ranks).mean()), "val_mean_cosine": float(cos),
               "lr": float(opt.param_groups[0]["lr"]),
               "temperature": float(student.log_temperature.detach().exp()) if hasattr(student, "log_temperature") else float("nan"),
               "epoch_time_s": time.time() - te}
        history.append(row)
        if rank == 0:
            log(f"[{loss}] epoch {epoch + 1}/{train_p.epochs} loss {row['train_loss']:.4f} "
                f"val R@1 {row['val_rank_at_1']:.2%} R@10 {row['val_rank_at_10']:.2%} "
                f"cos {row['val_mean_cosine']:.3f} ({row['epoch_time_s']:.1f}s)")
            if on_epoch:
                on_epoch(row)
        # rank 0's score decides, so all ranks stop at the same epoch even if GPU search differs
        row["val_rank_at_10"] = float(_from_rank0(torch.tensor([row["val_rank_at_10"]],
                                                               dtype=torch.float64), dev)[0])
        if row["val_rank_at_10"] > best[0]:
            best = (row["val_rank_at_10"], epoch + 1)
            bad = 0
            if rank == 0 and checkpoint is not None:
                save_torch(checkpoint, {"state_dict": student.state_dict(), "loss": loss,
                                        "hidden_size": hidden_size, "model": model_p.model_dump(),
                                        "epoch": epoch + 1, "val": row})
        else:
            bad += 1
            if bad >= train_p.patience:
                if rank == 0:
                    log(f"[{loss}] early stop: no val Rank@10 gain for {bad} epochs")
                break
    summary = {"history": history, "best_epoch": best[1], "best_val_rank_at_10": best[0],
               "epochs_run": len(history), "time_s": time.time() - t0, "world_size": world,
               "steps": step}
    D.cleanup()
    return summary


def load_student(path: Path, device: torch.device | str = "cpu") -> CodeStudent:
    """Rebuild a :class:`CodeStudent` from a checkpoint written by :func:`train_code`."""
    ck = torch.load(path, map_location="cpu", weights_only=False)
    m = ck["model"]
    st = CodeStudent(ck["hidden_size"], ck["loss"], m["d_model"], m["n_layers"], m["n_heads"],
                     m["ffn"], m["dropout"])
    st.load_state_dict(ck["state_dict"])
    return st.to(device).eval()
