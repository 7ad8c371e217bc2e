"""Code checkpoints are byte-reproducible, and the forked seed workers change nothing.

DVC hashes ``data/code/models/<variant>``: a rerun with nothing changed must write the same
bytes, whatever the temporary file's name or ``code.train.workers``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from contrastlab.params.code import ModelParams, TrainParams
from contrastlab.training.code import (CodeData, CodeStudent, checkpoint_path, load_student,
                                       predict, prepare_targets, read_checkpoint, save_student,
                                       train_seeds)

MP = ModelParams(d_model=8, n_layers=1, n_heads=2, ffn=16, dropout=0.0)


def _data(n: int = 48, t: int = 3, h: int = 8) -> CodeData:
    g = torch.Generator().manual_seed(3)
    body = torch.randn(n, h, generator=g)
    sig = body[:, None, :].repeat(1, t, 1) + 2.0 * torch.randn(n, t, h, generator=g)
    split = ["train"] * 28 + ["val"] * 10 + ["test"] * 10
    return CodeData(sig.to(torch.float16), torch.ones(n, t, dtype=torch.bool), body,
                    np.array(split), np.arange(n), np.array([f"r{i % 6}" for i in range(n)]))


def _digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def test_equal_weights_give_equal_bytes_and_the_student_round_trips(tmp_path):
    data = _data()
    t = prepare_targets(data, "whiten")
    torch.manual_seed(0)
    st = CodeStudent(8, "infonce", 8, 1, 2, 16, 0.0, residual=True, sig_space=t.sig_space)
    row = {"epoch": 2, "val_rank_at_10": 0.5, "train_loss": float("nan"), "epoch_time_s": 3.2}
    a, b = tmp_path / "a" / "seed0.safetensors", tmp_path / "b" / "seed0.safetensors"
    save_student(a, st, hidden_size=8, model_p=MP, epoch=2, val=row)
    save_student(b, st, hidden_size=8, model_p=MP, epoch=2, val=row)
    assert a.read_bytes() == b.read_bytes()
    assert not list(a.parent.glob(".*"))  # the temporary file is gone
    sd, meta = read_checkpoint(a)
    assert meta["epoch"] == 2 and meta["sig_kind"] == "whiten" and meta["residual"] is True
    assert meta["val"]["train_loss"] is None and "epoch_time_s" not in meta["val"]
    back = load_student(a)
    rows = np.arange(len(data.split))
    torch.testing.assert_close(predict(back, data, rows, torch.device("cpu")),
                               predict(st.eval(), data, rows, torch.device("cpu")))
    # one weight changed -> other bytes
    with torch.no_grad():
        st.predictor.out.bias[0] += 1e-3
    save_student(b, st, hidden_size=8, model_p=MP, epoch=2, val=row)
    assert a.read_bytes() != b.read_bytes()


def test_a_file_that_is_not_a_checkpoint_is_a_clear_error(tmp_path):
    bad = tmp_path / "seed0.safetensors"
    bad.write_bytes(b"not a checkpoint at all")
    with pytest.raises(ValueError, match="not a safetensors checkpoint"):
        read_checkpoint(bad)
    with pytest.raises(FileNotFoundError, match="run train_code"):
        read_checkpoint(tmp_path / "missing.safetensors")


@pytest.mark.slow
def test_forked_seed_workers_write_the_same_checkpoints_as_one_process(tmp_path):
    data = _data()
    targets = prepare_targets(data, "mean")
    tp = TrainParams(epochs=3, batch_size=8, patience=3, lr=0.01, warmup_epochs=0.0,
                     device="cpu", threads=1, seeds=[0, 1, 2])
    quiet = dict(log=lambda *_: None)
    seen: list[tuple[int, int]] = []
    one = train_seeds(data, 8, "infonce_hardneg", MP, tp, tmp_path / "one", targets=targets,
                      seeds=[0, 1, 2], residual=True, workers=1, **quiet)
    three = train_seeds(data, 8, "infonce_hardneg", MP, tp, tmp_path / "three",
                        targets=targets, seeds=[0, 1, 2], residual=True, workers=3,
                        on_epoch=lambda s, r: seen.append((s, int(r["epoch"]))), **quiet)
    def same(x: dict) -> str:  # NaN-safe comparison of the summaries, wall times dropped
        return json.dumps({k: v if k != "history" else
                           [{c: y for c, y in r.items() if c != "epoch_time_s"} for r in v]
                           for k, v in x.items() if k != "time_s"}, sort_keys=True)

    assert [same(s) for s in one] == [same(s) for s in three]
    assert _digests(tmp_path / "one") == _digests(tmp_path / "three")
    assert sorted(p.name for p in (tmp_path / "three").iterdir()) == [
        checkpoint_path(".", s).name for s in (0, 1, 2)]
    # every seed's epochs reached the parent's on_epoch, seeds in order
    assert seen == [(s, int(r["epoch"])) for s, x in zip([0, 1, 2], three)
                    for r in x["history"]]
