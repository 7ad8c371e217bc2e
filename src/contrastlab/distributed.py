"""torchrun / DDP helpers: process-group setup and cross-rank gathering of embeddings.

``all_gather_with_grad`` concatenates the ranks' tensors in rank order through
``torch.distributed.nn.functional.all_gather``; in backward each rank receives the sum over
ranks of its slice's gradients. With the global loss a mean over ``G`` anchors, rank ``r``
computes ``L_r = (1/G) sum_{i in r} l_i`` (``G`` by ``all_reduce_sum`` of the local counts),
so ``sum_r L_r = L``; since DDP averages parameter gradients over ``W`` ranks, a step
backpropagates ``W * L_r`` (:func:`ddp_loss_scale`) to get exactly ``dL/dtheta``.
``contrastlab.losses.distributed_loss`` / ``distributed_infonce_loss`` do all of it.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class DistInfo:
    """Where this process sits in the job."""

    rank: int
    world_size: int
    local_rank: int
    device: torch.device
    backend: str | None

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def init_distributed(device: str = "auto") -> DistInfo:
    """Initialise the default process group when launched by ``torchrun``.

    Uses NCCL on CUDA and gloo on CPU. Without torchrun's environment (``WORLD_SIZE``
    unset or 1) nothing is initialised and a single-process :class:`DistInfo` is returned.

    Args:
        device: ``auto`` (CUDA when available), ``cpu`` or ``cuda``.
    """
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    use_cuda = torch.cuda.is_available() if device == "auto" else device.startswith("cuda")
    dev = torch.device(f"cuda:{local}") if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(dev)
    backend = None
    if world > 1:
        backend = "nccl" if use_cuda else "gloo"
        if not dist.is_initialized():
            dist.init_process_group(backend=backend)
    return DistInfo(rank=rank, world_size=world, local_rank=local, device=dev, backend=backend)


def cleanup() -> None:
    """Destroy the process group if one was initialised."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def _active() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def world_size() -> int:
    return dist.get_world_size() if _active() else 1


def rank() -> int:
    return dist.get_rank() if _active() else 0


def ddp_loss_scale() -> int:
    """Factor W to multiply a rank's share of the global loss by before ``backward`` under DDP."""
    return world_size()


def _gather_sizes(n: int, device: torch.device) -> list[int]:
    t = torch.tensor([n], device=device, dtype=torch.long)
    out = [torch.zeros_like(t) for _ in range(world_size())]
    dist.all_gather(out, t)
    return [int(x.item()) for x in out]


def _padded(x: torch.Tensor) -> tuple[list[int], torch.Tensor]:
    """Every rank's row count and ``x`` zero-padded to the largest (what the collectives need)."""
    sizes = _gather_sizes(x.shape[0], x.device)
    m = max(sizes)
    return sizes, x if x.shape[0] == m else torch.cat([x, x.new_zeros((m - x.shape[0], *x.shape[1:]))])


def all_gather_with_grad(x: torch.Tensor) -> torch.Tensor:
    """Concatenate ``x`` from all ranks along dim 0 (rank order), keeping the gradient path.

    Ranks may hold different numbers of rows (the tensors are padded for the collective and
    trimmed afterwards). Single process: returns ``x`` itself.

    Args:
        x: ``[n_r, ...]`` on this rank; the trailing shape and dtype must match across ranks.

    Returns:
        ``[sum_r n_r, ...]``; backward sums each rank's slice gradient over all ranks.
    """
    if not _active():
        return x
    import torch.distributed.nn.functional as dnf

    sizes, xp = _padded(x)
    with warnings.catch_warnings():
        # deprecated in favour of the functional collectives, whose backward is not yet a
        # drop-in on gloo; it still has the summing backward documented above
        warnings.simplefilter("ignore", FutureWarning)
        parts = dnf.all_gather(xp)
    return torch.cat([p[:n] for p, n in zip(parts, sizes)], dim=0)


@torch.no_grad()
def all_gather_no_grad(x: torch.Tensor) -> torch.Tensor:
    """Like :func:`all_gather_with_grad` without autograd (labels, indices, targets)."""
    if not _active():
        return x
    sizes, xp = _padded(x)
    parts = [torch.empty_like(xp) for _ in sizes]
    dist.all_gather(parts, xp.contiguous())
    return torch.cat([p[:n] for p, n in zip(parts, sizes)], dim=0)


def rank_offset(n_local: int, device: torch.device | None = None) -> int:
    """Index of this rank's first row in the gathered tensor (0 in a single process)."""
    if not _active():
        return 0
    sizes = _gather_sizes(n_local, device or torch.device("cpu"))
    return sum(sizes[: rank()])


def all_reduce_sum(x: torch.Tensor) -> torch.Tensor:
    """Sum a tensor over ranks without autograd (counts, metric sums). Returns a new tensor."""
    y = x.detach().clone()
    if _active():
        dist.all_reduce(y, op=dist.ReduceOp.SUM)
    return y


def average_gradients(params) -> None:
    """Average ``params``' gradients over ranks (all-reduce sum, then divide by W); a no-op in
    one process. For trainers without DDP whose ranks backpropagate W times their loss share."""
    w = world_size()
    if w > 1:
        for p in params:
            if p.grad is not None:
                dist.all_reduce(p.grad)
                p.grad /= w
