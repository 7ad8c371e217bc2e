"""Training loop of the code retrieval track (signature -> body prediction; SmoothL1 / cosine
regression and InfoNCE with in-batch and FAISS hard negatives, van den Oord et al. 2018).

The student (:mod:`contrastlab.models.code_student`, re-exported here) maps a signature's
frozen teacher token states to the body's embedding in the training-fitted target space
(:class:`contrastlab.models.code_baselines.TargetSpace`). :func:`train_step` is one optimiser
step on one global batch, :func:`validate` scores validation signatures against the whole
corpus, :class:`EarlyStopping` stops after ``patience`` epochs without a gain in the stopping
criterion; :func:`train_code` strings them together (AdamW, linear warmup then cosine decay
per step) and keeps one epoch's weights by the rule ``code.train.early_stopping``, one of
:data:`STOP_RULES`: ``mrr_plateau`` (the centre of the plateau of epochs whose validation MRR
is within :data:`contrastlab.models.grid_picks.PLATEAU_SHARE` of the validation queries of
the best, :func:`contrastlab.models.grid_picks.pick_on_grid`, which records how many
queries' worth of MRR would move it) or ``rank_at_10`` (the first epoch with the highest
validation Rank@10, the rule before 2026-11-30).

Distributed (``torchrun``): the stage owns the process group. Every epoch draws one seeded
permutation; step ``s`` uses ``perm[s*N*B:(s+1)*N*B]`` and rank ``r`` its ``r``-th slice of
``B``. InfoNCE gathers the (frozen) targets of all ranks (local anchor ``i`` is row
``r*B + i``) and each rank backpropagates ``N * (B / (N*B)) * loss_r``, so DDP's averaged
update equals one process on the global batch (:mod:`contrastlab.distributed`).

Hard negatives (``infonce_hardneg``): every ``hardneg_refresh`` epochs a FAISS index over the
training targets is searched with the current predictions (epoch 0: the true targets); each
function keeps its ``K`` nearest bodies outside its own near-duplicate group.
"""

from __future__ import annotations

import inspect
import math
import time
from pathlib import Path
from typing import Any, Callable, NamedTuple

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor, nn
from tqdm.auto import tqdm

from .. import distributed as D
from ..evaluation.retrieval import build_index, search, true_ranks
from ..losses import get_loss
from ..models.grid_picks import PLATEAU_SHARE, argmax_pick, pick_on_grid
from ..models.code_student import (CodeData, CodeStudent, Targets, checkpoint_path,
                                   is_contrastive, load_student, predict, prepare_targets,
                                   read_checkpoint, save_student, trim_padding)
from ..utils import fork_map, pick_device, seed_everything, set_cpu_threads

__all__ = ["CodeStudent", "CodeData", "Targets", "prepare_targets", "train_step", "validate",
           "EarlyStopping", "train_code", "train_seeds", "predict", "warmup_cosine",
           "save_student", "read_checkpoint", "load_student", "checkpoint_path",
           "mine_hard_negatives", "STOP_RULES", "StopRule"]

#: ``needs`` of the registry losses this module loads (read by scripts/stage_deps.py).
LOSS_NEEDS = ("targets", "regression")


class StopRule(NamedTuple):
    """An early-stopping rule: the validation score its patience watches (a history
    column), the pick over the epochs run (``pick(epochs, scores, n_val)``, a
    :mod:`contrastlab.models.grid_picks` record), its criterion as the metrics name it, and
    whether it picks after training among every epoch's weights (``keeps_all``) or keeps the
    best epoch so far while training."""

    score: str
    pick: Callable[..., dict]
    criterion: str
    keeps_all: bool


#: The rules of ``code.train.early_stopping`` (and ``code.tune.early_stopping``).
STOP_RULES = {
    "mrr_plateau": StopRule("val_mrr", pick_on_grid, "validation MRR, centre of the plateau "
                            f"within {100 * PLATEAU_SHARE:g} % of the queries", True),
    "rank_at_10": StopRule("val_rank_at_10", argmax_pick, "validation Rank@10, first best epoch",
                           False),
}


def takes_hard_negatives(loss: str) -> bool:
    """The loss function accepts a hard-negative tensor (registry signature)."""
    return "hard_negatives" in inspect.signature(get_loss(loss)).parameters


def warmup_cosine(step: int, warmup: int, total: int) -> float:
    """LR factor: linear warmup over ``warmup`` steps, then cosine decay to 0 at ``total``."""
    if warmup > 0 and step < warmup:
        return (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))


def _from_rank0(t: Tensor, device: torch.device) -> Tensor:
    """Rank 0's copy of ``t`` on every rank (no-op in a single process), returned on the CPU.

    The broadcast tensor lives on ``device`` (the training device, which the process
    group's backend serves)."""
    if D.world_size() == 1:
        return t
    x = t.to(device).contiguous()
    dist.broadcast(x, src=0)
    return x.cpu()


def mine_hard_negatives(queries: Tensor, bodies_n: Tensor, groups: np.ndarray, k: int,
                        device: str = "auto") -> np.ndarray:
    """``[Q, k]`` row indices into ``bodies_n``: nearest bodies to each query, excluding the
    query's own row (query ``i`` is body row ``i``) and rows of the same (near-duplicate)
    group ``groups`` ``[Q]``.

    Rows with fewer than ``k`` eligible neighbours are filled with the last eligible one.
    """
    index = build_index(bodies_n, device)
    depth = min(len(bodies_n), k + 16)
    _, ids = search(index, queries, depth)
    own = np.arange(len(queries))[:, None]
    groups = np.asarray(groups)
    same = (ids == own) | (groups[ids] == groups[own[:, 0]][:, None]) | (ids < 0)
    out = np.zeros((len(queries), k), dtype=np.int64)
    for r in range(len(queries)):  # bookkeeping per row of a search result, not a loss
        ok = ids[r][~same[r]]
        if len(ok) == 0:
            ok = np.array([(r + 1) % len(bodies_n)])
        out[r] = np.resize(ok[:k], k) if len(ok) < k else ok[:k]
    return out


def train_step(model: nn.Module, student: CodeStudent, loss_fn: Callable, rows: Tensor,
               data: CodeData, targets: Targets, opt: torch.optim.Optimizer, *,
               device: torch.device, global_batch: int, grad_clip: float = 0.0,
               hard: Tensor | None = None, local: Tensor | None = None,
               train_bodies_n: Tensor | None = None) -> Tensor:
    """One optimiser step on this rank's slice ``rows`` of a global batch.

    Args:
        model: ``student`` or its DDP wrapper. loss_fn: registry loss.
        rows: int64 ``[B]`` corpus rows of this rank's anchors.
        global_batch: ``N * B`` (anchors over all ranks).
        hard, local, train_bodies_n: hard-negative table ``[n_train, K]``, the anchors'
            positions in the training list, and the normalised training targets.

    Returns:
        The global-batch mean loss (float64 scalar on ``device``, summed over ranks).

    Raises:
        FloatingPointError: non-finite loss.
    """
    b = len(rows)
    st, mk = trim_padding(data.sig_states[rows], data.sig_mask[rows])
    pred = model(st.to(device), mk.to(device))
    target = targets.body[rows].to(device)
    name = student.loss_name
    if is_contrastive(name):
        gathered = D.all_gather_no_grad(F.normalize(target, dim=-1))
        off = D.rank() * b
        if not takes_hard_negatives(name):
            l_r = loss_fn(pred, gathered, student.log_temperature, anchor_offset=off)
        else:
            hn = train_bodies_n[hard[local]].to(device)
            l_r = loss_fn(pred, gathered, student.log_temperature, hn, anchor_offset=off)
    else:
        l_r = loss_fn(pred, target)
    share = l_r * (b / global_batch)  # this rank's share of the global-batch mean
    if not torch.isfinite(share):
        raise FloatingPointError(f"{name}: non-finite loss")
    opt.zero_grad(set_to_none=True)
    (share * D.ddp_loss_scale()).backward()
    glob = D.all_reduce_sum(share.detach().to(torch.float64))  # stays on `device`
    if grad_clip > 0:
        nn.utils.clip_grad_norm_(student.parameters(), grad_clip)
    opt.step()
    return glob


@torch.no_grad()
def validate(student: nn.Module, data: CodeData, targets: Targets, rows: np.ndarray,
             device: torch.device, index=None) -> dict[str, float]:
    """Rank@1/10, MRR and mean cosine of ``rows``' predictions against the whole corpus."""
    pred = predict(student, data, rows, device)
    ranks = true_ranks(pred, targets.corpus, rows, k_max=10, index=index)
    cos = (pred * targets.corpus[torch.as_tensor(rows)]).sum(-1).mean()
    return {"val_rank_at_10": float((ranks <= 10).mean()),
            "val_rank_at_1": float((ranks <= 1).mean()),
            "val_mrr": float((1.0 / ranks).mean()), "val_mean_cosine": float(cos)}


class EarlyStopping:
    """Patience on a score that should rise: ``update(score, epoch)`` returns True when the
    score improved (save a checkpoint then); ``stop`` becomes True after ``patience``
    epochs without improvement."""

    def __init__(self, patience: int):
        if patience < 1:
            raise ValueError(f"patience must be >= 1, got {patience}")
        self.patience = patience
        self.best = -math.inf
        self.best_epoch = -1
        self.bad = 0

    def update(self, score: float, epoch: int) -> bool:
        if score > self.best:
            self.best, self.best_epoch, self.bad = score, epoch, 0
            return True
        self.bad += 1
        return False

    @property
    def stop(self) -> bool:
        return self.bad >= self.patience


def train_code(data: CodeData, hidden_size: int, loss: str, model_p, train_p,
               checkpoint: Path | None, *, targets: Targets, seed: int | None = None,
               lr: float | None = None, temperature: float | None = None,
               residual: bool = False, epochs: int | None = None,
               early_stopping: str | None = None,
               on_epoch: Callable[[dict[str, Any]], None] | None = None,
               log: Callable[[str], None] = print, progress: bool = True) -> dict[str, Any]:
    """Train one variant with one seed and keep one epoch's checkpoint by the early-stopping
    rule (module docstring).

    The process group (if any) must already be initialised by the caller (the stage).

    Args:
        data: :class:`CodeData`. targets: :func:`prepare_targets` output.
        hidden_size: teacher width ``H``.
        loss: registry name (``smoothl1``, ``cosine``, ``infonce``, ``infonce_hardneg``).
        model_p: :class:`contrastlab.params.code.ModelParams`.
        train_p: :class:`contrastlab.params.code.TrainParams`.
        checkpoint: where rank 0 saves the best state (``None``: not saved).
        seed, lr, temperature, epochs, early_stopping: override ``train_p`` (seed / lr /
            init_temperature / epochs / early_stopping: ``mrr_plateau`` or ``rank_at_10``).
        residual: start at the zero-shot map (see :class:`CodeStudent`).
        on_epoch: called on rank 0 with each epoch's history row.

    Returns:
        Summary: ``history`` (list of per-epoch dicts; a residual student's starts with an
        epoch-0 row, the zero-shot map before any step), ``best_epoch`` (the kept epoch; 0:
        the zero-shot map), ``best_val_rank_at_10`` (the kept epoch's), ``epochs_run``,
        ``time_s``, ``world_size``, ``steps``.

    Raises:
        FloatingPointError: the loss became NaN/inf.
        ValueError: no training or validation functions.
    """
    seed = train_p.seed if seed is None else seed
    lr = train_p.lr if lr is None else lr
    temperature = train_p.init_temperature if temperature is None else temperature
    n_epochs = train_p.epochs if epochs is None else epochs
    rule = train_p.early_stopping if early_stopping is None else early_stopping
    if rule not in STOP_RULES:
        raise ValueError(f"unknown early_stopping {rule!r}; use {' or '.join(STOP_RULES)}")
    stop_rule = STOP_RULES[rule]
    watch = stop_rule.score
    set_cpu_threads(train_p.threads)
    seed_everything(seed)
    world, rank = D.world_size(), D.rank()
    dev = pick_device(train_p.device)
    if dev.type == "cuda" and world > 1:
        dev = torch.device("cuda", torch.cuda.current_device())
    tr, va = data.rows("train"), data.rows("val")
    if len(tr) == 0 or len(va) == 0:
        raise ValueError("code training needs train and val functions (check the split)")
    cap = getattr(train_p, "max_train", None)
    if cap is not None and len(tr) > cap:  # one seeded subset for every seed and variant
        tr = np.sort(np.random.default_rng(train_p.seed).choice(tr, cap, replace=False))
    b = train_p.batch_size
    gb = b * world
    steps = len(tr) // gb
    if steps == 0:
        raise ValueError(f"{len(tr)} training functions < global batch {gb}")
    loss_fn = get_loss(loss)
    student = CodeStudent(hidden_size, loss, model_p.d_model, model_p.n_layers, model_p.n_heads,
                          model_p.ffn, model_p.dropout, temperature, residual,
                          targets.sig_space).to(dev)
    model: nn.Module = student
    if world > 1:
        model = nn.parallel.DistributedDataParallel(
            student, device_ids=[dev.index] if dev.type == "cuda" else None)
    opt = torch.optim.AdamW(student.parameters(), lr=lr, weight_decay=train_p.weight_decay)
    total = steps * n_epochs
    warm = int(round(train_p.warmup_epochs * steps))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: warmup_cosine(s, warm, total))
    corpus_index = build_index(targets.corpus, train_p.device)
    trt = torch.as_tensor(tr)
    train_bodies_n = targets.corpus[trt]
    hard = None
    history: list[dict[str, Any]] = []
    stopper = EarlyStopping(train_p.patience)
    # keeps_all (rank 0): epoch -> (the rule's score, weights) of the plateau candidates
    states: dict[int, tuple[float, dict[str, Tensor]]] = {}
    t0 = time.time()
    step = 0

    def _record(epoch: int, train_loss: float, lr_now: float, te: float | None) -> bool:
        """Validate, append the history row, keep the checkpoint (when improved; a keeps_all
        rule: every epoch's weights, picked after training); True when improved."""
        row = {"epoch": epoch, "train_loss": train_loss,
               **validate(student, data, targets, va, dev, corpus_index),
               "lr": lr_now, "temperature": float(student.log_temperature.detach().exp())
               if hasattr(student, "log_temperature") else float("nan"),
               "epoch_time_s": 0.0 if te is None else time.time() - te}
        history.append(row)
        if rank == 0 and on_epoch:
            on_epoch(row)
        # rank 0's score decides, so all ranks stop at the same epoch even if GPU search differs
        score = float(_from_rank0(torch.tensor([row[watch]], dtype=torch.float64),
                                  dev)[0])
        improved = stopper.update(score, epoch)
        if rank == 0 and checkpoint is not None:
            if stop_rule.keeps_all:
                # an epoch more than the plateau's tolerance below the best so far can never
                # join the final plateau (the best only rises): its weights are dropped
                states[epoch] = (score, {k: v.detach().to("cpu", copy=True)
                                         for k, v in student.state_dict().items()})
                for e in [e for e, (s, _) in states.items() if s < stopper.best - PLATEAU_SHARE]:
                    del states[e]
            elif improved:
                save_student(checkpoint, student, hidden_size=hidden_size, model_p=model_p,
                             epoch=epoch, val=row)
        return improved

    if residual:  # epoch 0 = the zero-shot map itself, which early stopping may keep
        _record(0, float("nan"), 0.0, None)
    for epoch in tqdm(range(n_epochs), desc=f"train {loss} seed {seed}", unit="epoch",
                      disable=rank != 0 or not progress):
        te = time.time()
        if takes_hard_negatives(loss) and epoch % train_p.hardneg_refresh == 0:
            q = train_bodies_n if epoch == 0 else predict(student, data, tr, dev)
            hard = torch.as_tensor(mine_hard_negatives(q, train_bodies_n, data.dup_group[tr],
                                                       train_p.hardneg_k, train_p.device))
            hard = _from_rank0(hard, dev)  # every rank uses rank 0's negatives
        g = torch.Generator().manual_seed(seed * 1000 + epoch)
        perm = torch.randperm(len(tr), generator=g)
        model.train()
        run_loss = torch.zeros((), dtype=torch.float64, device=dev)
        for s in range(steps):
            local = perm[s * gb + rank * b: s * gb + (rank + 1) * b]
            run_loss += train_step(model, student, loss_fn, trt[local], data, targets, opt,
                                   device=dev, global_batch=gb, grad_clip=train_p.grad_clip,
                                   hard=hard, local=local, train_bodies_n=train_bodies_n)
            sched.step()
            step += 1
        if not _record(epoch + 1, float(run_loss.cpu() / steps),
                       float(opt.param_groups[0]["lr"]), te) and stopper.stop:
            if rank == 0:
                log(f"[{loss} seed {seed}] early stop at epoch {epoch + 1}: no "
                    f"{watch} gain for {stopper.bad} epochs (best {stopper.best:.4f} "
                    f"at epoch {stopper.best_epoch})")
            break
    kept = stopper.best_epoch
    if stop_rule.keeps_all:
        kept = int(stop_rule.pick([r["epoch"] for r in history], [r[watch] for r in history],
                                  len(va))["choice"])
        if states:
            student.load_state_dict(states[kept][1])
            save_student(checkpoint, student, hidden_size=hidden_size, model_p=model_p,
                         epoch=kept, val=next(r for r in history if r["epoch"] == kept))
    # the kept epoch's Rank@10 (-inf: no epoch ever scored, a NaN validation)
    kept_r10 = next((r["val_rank_at_10"] for r in history if r["epoch"] == kept), -math.inf)
    if rank == 0:
        log(f"[{loss} seed {seed}] kept epoch {kept} ({rule}; val R@10 {kept_r10:.2%}) of "
            f"{history[-1]['epoch'] if history else 0} run ({time.time() - t0:.0f}s)")
    return {"history": history, "best_epoch": kept,
            "best_val_rank_at_10": kept_r10,
            "epochs_run": int(history[-1]["epoch"]) if history else 0,
            "time_s": time.time() - t0, "world_size": world, "steps": step, "seed": seed}


def train_seeds(data: CodeData, hidden_size: int, loss: str, model_p, train_p,
                out_dir: str | Path, *, targets: Targets, seeds: list[int],
                lr: float | None = None, temperature: float | None = None,
                residual: bool = False, workers: int = 1,
                on_epoch: Callable[[int, dict[str, Any]], None] | None = None,
                log: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """:func:`train_code` for every seed of ``seeds``; checkpoints at
    :func:`checkpoint_path` ``(out_dir, seed)``.

    With ``workers > 1`` in one CPU process, ``min(workers, len(seeds))`` forked workers of
    ``train_p.threads`` threads; each seed is seeded on its own, so the results do not depend
    on ``workers``. Under ``torchrun`` or on a GPU the seeds run one after another.

    Args:
        on_epoch: ``on_epoch(seed, row)`` for every epoch's history row; with workers it is
            called in the parent after the seed finished, rows in epoch order.

    Returns:
        One :func:`train_code` summary per seed, in ``seeds`` order.

    Raises:
        Whatever :func:`train_code` raises for a seed (re-raised in the parent).
    """
    seeds = [int(s) for s in seeds]
    parallel = (workers > 1 and len(seeds) > 1 and D.world_size() == 1
                and pick_device(train_p.device).type == "cpu")
    if not parallel:
        out = []
        for s in seeds:
            out.append(train_code(data, hidden_size, loss, model_p, train_p,
                                  checkpoint_path(out_dir, s), targets=targets, seed=s, lr=lr,
                                  temperature=temperature, residual=residual, log=log,
                                  on_epoch=None if on_epoch is None
                                  else (lambda r, s=s: on_epoch(s, r))))
        return out
    set_cpu_threads(train_p.threads)  # no multi-thread OpenMP pool is inherited by the fork
    out = list(fork_map(lambda s: train_code(data, hidden_size, loss, model_p, train_p,
                                             checkpoint_path(out_dir, s), targets=targets,
                                             seed=s, lr=lr, temperature=temperature,
                                             residual=residual, log=log, progress=False),
                        seeds, workers))
    if on_epoch is not None:
        for s, summary in zip(seeds, out):
            for row in summary["history"]:
                on_epoch(s, row)
    return out


