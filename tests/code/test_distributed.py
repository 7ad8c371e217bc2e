"""Distributed training of the code track: torchrun with 2 gloo processes equals 1 process
on one training step (loss and gradients), and collectives only see tensors on the
training device (the device the process group's backend serves)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from _stagerun import load_script
from contrastlab import distributed as D
from contrastlab.training import code as C

ROOT = Path(__file__).resolve().parents[2]
WORKER = str(Path(__file__).with_name("dist_step_worker.py"))


def _run(cmd: list[str]) -> None:
    env = {**os.environ, "CONTRASTLAB_MLFLOW": "0", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": str(ROOT / "src")}
    r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stderr[-3000:]


@pytest.mark.slow
@pytest.mark.distributed
@pytest.mark.parametrize("loss", ["infonce_hardneg", "smoothl1"])
def test_two_process_step_equals_one_process(tmp_path, loss):
    one, two = tmp_path / "one.pt", tmp_path / "two.pt"
    threads = torch.get_num_threads()
    try:  # the one-process reference in this process (its imports are this test's)
        load_script(WORKER).main(str(one), loss)
    finally:
        torch.set_num_threads(threads)
    _run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
          WORKER, str(two), loss])
    a, b = torch.load(one), torch.load(two)
    assert a["loss"] == pytest.approx(b["loss"], rel=1e-5, abs=1e-6)
    assert set(a["grads"]) == set(b["grads"])
    assert ("log_temperature" in a["grads"]) == (loss != "smoothl1")
    for name, ga in a["grads"].items():
        torch.testing.assert_close(b["grads"][name], ga, atol=1e-6, rtol=1e-4, msg=name)
    assert any(g.abs().sum() > 0 for g in a["grads"].values())


SERVES = {"gloo": {"cpu"}, "nccl": {"cuda"}, "cpu:gloo,cuda:nccl": {"cpu", "cuda"}}


def test_collectives_only_get_tensors_the_backend_serves(monkeypatch):
    """Fake 2-rank group whose backend serves only the training device's type: every
    collective of a training run (loss all-reduce, target all-gather, broadcasts of the
    hard negatives and of the early-stopping score) must receive a tensor on that device."""
    import torch.distributed as dist

    dev = torch.device("cpu")
    served = SERVES["gloo"]
    seen = []

    def check(t):
        seen.append(t.device.type)
        assert t.device.type in served, f"collective got a {t.device} tensor; backend serves {served}"

    def all_reduce(t, op=None):
        check(t)
        t.mul_(2)  # two identical ranks

    def all_gather(out, t):
        check(t)
        for o in out:
            o.copy_(t)

    def broadcast(t, src=0):
        check(t)

    monkeypatch.setattr(D, "_active", lambda: True)
    monkeypatch.setattr(dist, "get_world_size", lambda *a, **k: 2)
    monkeypatch.setattr(dist, "get_rank", lambda *a, **k: 0)
    monkeypatch.setattr(dist, "all_reduce", all_reduce)
    monkeypatch.setattr(dist, "all_gather", all_gather)
    monkeypatch.setattr(dist, "broadcast", broadcast)
    monkeypatch.setattr(torch.nn.parallel, "DistributedDataParallel", lambda m, **k: m)
    g = torch.Generator().manual_seed(0)
    n, t, h = 40, 5, 8
    data = C.CodeData(torch.randn(n, t, h, generator=g).half(), torch.ones(n, t, dtype=torch.bool),
                      torch.randn(n, h, generator=g), np.array(["train"] * 24 + ["val"] * 8 + ["test"] * 8),
                      np.arange(n), np.array(["r"] * n))
    from contrastlab.params.code import ModelParams, TrainParams

    targets = C.prepare_targets(data, "mean")
    C.train_code(data, h, "infonce_hardneg", ModelParams(d_model=8, n_layers=1, n_heads=2, ffn=16),
                 TrainParams(epochs=1, batch_size=4, device="cpu", hardneg_k=2), None,
                 targets=targets, progress=False, log=lambda m: None)
    assert {"cpu"} == set(seen) and len(seen) >= 4
    # the same check rejects a CPU tensor under an NCCL-only group (the bug this guards)
    served = SERVES["nccl"]
    with pytest.raises(AssertionError, match="backend serves"):
        D.all_reduce_sum(torch.zeros(()))
