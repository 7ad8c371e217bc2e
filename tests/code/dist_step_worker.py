"""Worker for test_distributed: one train_step on a fixed global batch; rank 0 saves the
global loss and the gradients (run with plain python or torchrun)."""

from __future__ import annotations

import os
import sys

import numpy as np
import torch

from contrastlab import distributed as D
from contrastlab.losses import get_loss
from contrastlab.training.code import (CodeData, CodeStudent, mine_hard_negatives,
                                       prepare_targets, train_step)

N, T, H, G = 48, 6, 16, 8


def main(out: str, loss: str) -> None:
    info = D.init_distributed("cpu")
    g = torch.Generator().manual_seed(0)
    states = torch.randn(N, T, H, generator=g).half()
    mask = torch.arange(T)[None, :] < torch.randint(2, T + 1, (N, 1), generator=g)
    body = torch.randn(N, H, generator=g) + 3.0
    split = np.array(["train"] * 32 + ["val"] * 8 + ["test"] * 8)
    data = CodeData(states, mask, body, split, np.arange(N), np.array(["r"] * N))
    targets = prepare_targets(data, "mean")
    torch.manual_seed(1)
    student = CodeStudent(H, loss, 16, 1, 2, 32, 0.0)
    model = student
    if info.distributed:
        model = torch.nn.parallel.DistributedDataParallel(student)
    opt = torch.optim.SGD(student.parameters(), lr=0.0)
    tr = torch.as_tensor(data.rows("train"))
    local_all = torch.arange(G)  # the global batch = training rows 0..G-1
    b = G // info.world_size
    local = local_all[info.rank * b:(info.rank + 1) * b]
    hard = torch.as_tensor(mine_hard_negatives(targets.corpus[tr], targets.corpus[tr],
                                               data.dup_group[tr.numpy()], 3, "cpu"))
    glob = train_step(model, student, get_loss(loss), tr[local], data, targets, opt,
                      device=info.device, global_batch=G, hard=hard, local=local,
                      train_bodies_n=targets.corpus[tr])
    if info.is_main:
        torch.save({"loss": float(glob), "grads": {n: p.grad.clone() for n, p in
                                                   student.named_parameters() if p.grad is not None}}, out)
    if info.world_size == 1:
        D.cleanup()
        return
    exit_without_teardown()


def exit_without_teardown() -> None:
    """Wait for every rank, then leave without gloo's teardown, which aborted once at exit
    under load (a torch race after the results were written); the tests check the step, not
    the teardown."""
    import torch.distributed as dist

    dist.barrier()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
