"""torchrun with 2 gloo processes equals 1 process on the first training step (loss and gradients)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from contrastlab.data.teacher_states import write_teacher_states

ROOT = Path(__file__).resolve().parents[2]
N, T, H = 48, 6, 16


def _data(tmp: Path) -> dict[str, str]:
    g = torch.Generator().manual_seed(0)
    ids = list(range(N))
    split = np.array(["train"] * 32 + ["val"] * 8 + ["test"] * 8)
    pd.DataFrame({"id": ids, "repo": [f"r{s}" for s in split], "split": split}).to_parquet(tmp / "splits.parquet")
    pd.DataFrame({"id": ids, "body_hash": [f"h{i}" for i in ids]}).to_parquet(tmp / "functions.parquet")

    def encode(sigs, bodies):
        return ([torch.randn(2 + len(s) % (T - 1), H, generator=g).half() for s in sigs],
                torch.randn(len(sigs), H, generator=g))

    write_teacher_states(tmp / "teacher", ids, [f"def f{i}({'x,' * (i % 7)}):" for i in ids],
                         ["pass"] * N, encode, {"t": 1}, max_sig_tokens=T, hidden_size=H,
                         shard_size=20, log=lambda m: None)
    return {"--functions": str(tmp / "functions.parquet"), "--splits": str(tmp / "splits.parquet"),
            "--teacher": str(tmp / "teacher"), "--models": str(tmp / "models"),
            "--plots": str(tmp / "plots")}


def _params(tmp: Path, batch: int, epochs: int = 1) -> Path:
    p = tmp / f"params_{batch}_{epochs}.yaml"
    p.write_text(
        "code:\n"
        "  model: {d_model: 16, n_layers: 1, n_heads: 2, ffn: 32, dropout: 0.0}\n"
        f"  train: {{batch_size: {batch}, epochs: {epochs}, threads: 1, hardneg_k: 3, "
        "hardneg_refresh: 2, patience: 5, device: cpu}\n")
    return p


def _run(cmd: list[str]) -> None:
    env = {**os.environ, "CONTRASTLAB_MLFLOW": "0", "OMP_NUM_THREADS": "1"}
    r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stderr[-3000:]


@pytest.mark.slow
@pytest.mark.distributed
def test_two_process_first_step_equals_one_process(tmp_path):
    paths = _data(tmp_path)
    args = [x for kv in paths.items() for x in kv] + ["--variant", "infonce_hardneg"]
    script = str(ROOT / "stages" / "train_code.py")
    one, two = tmp_path / "one.pt", tmp_path / "two.pt"
    _run([sys.executable, script, *args, "--params", str(_params(tmp_path, 8)),
          "--dump-first-step", str(one)])
    _run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
          script, *args, "--params", str(_params(tmp_path, 4)), "--dump-first-step", str(two)])
    a, b = torch.load(one), torch.load(two)
    assert a["loss"] == pytest.approx(b["loss"], rel=1e-5, abs=1e-6)
    assert set(a["grads"]) == set(b["grads"]) and "log_temperature" in a["grads"]
    for name, ga in a["grads"].items():
        torch.testing.assert_close(b["grads"][name], ga, atol=1e-6, rtol=1e-4, msg=name)
    assert any(g.abs().sum() > 0 for g in a["grads"].values())
    # a whole 2-process run (hard-negative refresh, validation, early stopping, checkpoint)
    _run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
          script, *args, "--params", str(_params(tmp_path, 4, epochs=3))])
    hist = pd.read_csv(tmp_path / "plots" / "infonce_hardneg.csv")
    assert list(hist["epoch"]) == [1, 2, 3]
    assert (tmp_path / "models" / "infonce_hardneg.pt").exists()
