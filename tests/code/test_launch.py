"""``python -m contrastlab.launch``: a failed torchrun worker ends in one ``error:`` line.

A stage script on two gloo workers fails with bad input (a NaN loss): the launcher prints
the worker's message once, no ``ChildFailedError`` traceback, and exits with status 2; a real
``train_code`` run on teacher states holding a NaN does the same.
"""

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

SCRIPT = '''
import os, sys, time
from contrastlab.cli import run_stage

def main():
    which = sys.argv[1]
    if which == "all" or os.environ.get("RANK") == which:
        raise FloatingPointError("infonce: non-finite loss at epoch 1 step 3")
    if which == "bug" and os.environ.get("RANK") == "1":
        raise RuntimeError("an unexpected bug")
    time.sleep(5)  # the other rank is still working when the agent stops it
    return 0

sys.exit(run_stage(main))
'''


def _launch(*args: str, timeout: int = 240) -> subprocess.CompletedProcess:
    env = {**os.environ, "CONTRASTLAB_MLFLOW": "0", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": str(ROOT / "src")}
    env.pop("CONTRASTLAB_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "contrastlab.launch", "--standalone",
                           "--nproc_per_node=2", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def _lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip()]


@pytest.mark.distributed
@pytest.mark.parametrize("which,expected", [
    # both ranks fail: the first by time is reported, whichever rank it is
    ("all", r"error: infonce: non-finite loss at epoch 1 step 3( \(rank 1\))?"),
    ("1", r"error: infonce: non-finite loss at epoch 1 step 3 \(rank 1\)"),
])
def test_bad_input_in_a_worker_is_one_line(tmp_path, which, expected):
    import re

    script = tmp_path / "stage.py"
    script.write_text(SCRIPT)
    r = _launch(str(script), which)
    assert r.returncode == 2
    lines = _lines(r.stderr)
    assert len(lines) == 1 and re.fullmatch(expected, lines[0]), r.stderr
    assert "ChildFailedError" not in r.stdout + r.stderr


@pytest.mark.distributed
def test_unexpected_worker_exception_keeps_its_traceback_and_one_launcher_line(tmp_path):
    script = tmp_path / "stage.py"
    script.write_text(SCRIPT)
    r = _launch(str(script), "bug")
    assert r.returncode == 1
    assert "RuntimeError: an unexpected bug" in r.stderr  # the worker's own traceback
    assert "ChildFailedError" not in r.stderr
    errors = [ln for ln in _lines(r.stderr) if ln.startswith("error:")]
    assert errors == [f"error: {script}: worker rank 1 failed with exit status 1 "
                      "(its traceback is above)"]


def test_worker_error_file_only_under_the_launcher(tmp_path, monkeypatch):
    from contrastlab.launch import LAUNCHER_ENV, report_worker_error

    f = tmp_path / "err.json"
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(f))
    monkeypatch.delenv(LAUNCHER_ENV, raising=False)
    assert not report_worker_error("x") and not f.exists()  # plain torchrun: print it
    monkeypatch.setenv(LAUNCHER_ENV, "1")
    monkeypatch.setenv("RANK", "0")
    assert report_worker_error("bad value") and '"message": "bad value"' in f.read_text()


@pytest.mark.slow
@pytest.mark.distributed
def test_train_code_nan_loss_under_torchrun_is_one_line(tmp_path):
    """Teacher states with a NaN body embedding make the first loss NaN on both ranks."""
    n, t, h = 48, 6, 16
    g = torch.Generator().manual_seed(0)
    ids = list(range(n))
    split = np.array(["train"] * 32 + ["val"] * 8 + ["test"] * 8)
    pd.DataFrame({"id": ids, "repo": [f"r{s}" for s in split], "split": split}).to_parquet(tmp_path / "splits.parquet")
    pd.DataFrame({"id": ids, "body_hash": [f"h{i}" for i in ids]}).to_parquet(tmp_path / "functions.parquet")

    def encode(sigs, bodies):
        emb = torch.randn(len(sigs), h, generator=g)
        emb[:] = float("nan")
        return [torch.randn(3, h, generator=g).half() for _ in sigs], emb

    write_teacher_states(tmp_path / "teacher", ids, [f"def f{i}():" for i in ids], ["pass"] * n,
                         encode, {"t": 1}, max_sig_tokens=t, hidden_size=h, shard_size=24,
                         log=lambda m: None)
    params = tmp_path / "params.yaml"
    params.write_text(
        "code:\n"
        "  variants: {infonce: {loss: infonce}}\n"
        "  model: {d_model: 16, n_layers: 1, n_heads: 2, ffn: 32, dropout: 0.0}\n"
        "  train: {batch_size: 4, epochs: 1, threads: 1, hardneg_k: 3, hardneg_refresh: 2, "
        "patience: 5, device: cpu}\n")
    r = _launch(str(ROOT / "stages" / "train_code.py"), "--variant", "infonce",
                "--params", str(params), "--splits", str(tmp_path / "splits.parquet"),
                "--teacher", str(tmp_path / "teacher"),
                "--models", str(tmp_path / "models"), "--plots", str(tmp_path / "plots"))
    assert r.returncode == 2, r.stderr[-3000:]
    errors = [ln for ln in _lines(r.stderr) if ln.startswith("error:")]
    assert len(errors) == 1 and "non-finite loss" in errors[0], r.stderr[-3000:]
    assert "Traceback" not in r.stderr and "ChildFailedError" not in r.stderr
    assert not (tmp_path / "models" / "infonce.pt").exists()
