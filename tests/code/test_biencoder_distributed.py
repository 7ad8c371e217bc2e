"""Distributed bi-encoder fine-tuning: one step of contrastlab.biencoder.train_biencoder under
torchrun with 2 gloo processes (each rank takes its slice of the global batch, bodies gathered
with gradient as negatives, gradients averaged over ranks) equals 1 process on the whole
batch: the logged loss, every parameter gradient and the learnable temperature's gradient,
on both ranks. InfoNCE with one shared tower, InfoNCE with mined hard negatives with two."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from _stagerun import load_script

ROOT = Path(__file__).resolve().parents[2]
WORKER = str(Path(__file__).with_name("biencoder_dist_worker.py"))
CASES = [("infonce", "shared"), ("infonce_hardneg", "separate")]  # as the worker's


def _run(cmd: list[str]) -> None:
    env = {**os.environ, "CONTRASTLAB_MLFLOW": "0", "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": str(ROOT / "src")}
    r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]


@pytest.fixture(scope="module")
def steps(tmp_path_factory):
    """Prefixes of the 1-process and the 2-process results (every case, one launch each)."""
    d = tmp_path_factory.mktemp("biencoder_dist")
    one, two = d / "one", d / "two"
    threads = torch.get_num_threads()
    with pytest.MonkeyPatch.context() as mp:  # the inputs and the one-process reference here
        mp.syspath_prepend(str(Path(WORKER).parent))  # the worker imports its test module
        mp.setenv("CONTRASTLAB_MLFLOW", "0")
        mp.setenv("HF_HUB_OFFLINE", "1")
        worker = load_script(WORKER)
        try:
            worker.prepare(d)
            worker.step(d, str(one))
        finally:
            torch.set_num_threads(threads)
    _run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
          WORKER, "step", str(d), str(two)])
    return one, two


@pytest.mark.slow
@pytest.mark.distributed
@pytest.mark.parametrize("loss,towers", CASES)
def test_two_process_step_equals_one_process(steps, loss, towers):
    one, two = steps
    a = torch.load(f"{one}.{loss}-{towers}.rank0")
    assert a["world"] == 1
    # non-trivial gradients: the temperature's and each tower's (an attention key bias alone
    # gets none: softmax ignores a shift shared by a query's logits)
    assert abs(float(a["grads"]["loss.log_temperature"])) > 1e-3
    for tower in ("sig.",) if towers == "shared" else ("sig.", "body."):
        norm = sum(float(g.norm() ** 2) for n, g in a["grads"].items() if n.startswith(tower)) ** 0.5
        assert norm > 1e-3, tower
    for r in range(2):
        b = torch.load(f"{two}.{loss}-{towers}.rank{r}")
        assert b["world"] == 2
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-5, abs=1e-6), f"rank {r}"
        assert set(b["grads"]) == set(a["grads"])
        for name, ga in a["grads"].items():
            torch.testing.assert_close(b["grads"][name], ga, atol=1e-6, rtol=1e-4, msg=f"rank {r}: {name}")
