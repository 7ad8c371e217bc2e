"""The GPU route of the bi-encoder (presets/code-biencoder-gpu.yaml) at smoke size on the CPU,
so it cannot rot while no GPU is at hand: params.yaml with the GPU preset merged, then shrunk
(a tiny random BERT, 3 steps, CPU, bf16 off, ``layers: all`` kept), and the stage entry point
``stages/train_biencoder.py`` run as ``dvc.yaml`` runs it, through ``python -m
contrastlab.launch`` on 2 gloo ranks. Checked: the one summary line and the outputs come from
rank 0; the metrics name the search that ran (``faiss-cpu IndexFlatIP``) and the 2 processes;
every parameter of the saved tower (embeddings and every block; not BERT's unused pooler)
moved; and the run equals one process on the same global batch (loss, embeddings, ranks).
Also: FAISS's search equals the exact torch inner product, both GPU presets apply to
params.yaml as scripts/preset.py writes it, and ``finetune_encoder``'s ``relaunch`` runs a
plain stage script on N ranks (``finetune.nproc``; ``auto`` is 1 process without CUDA)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from _stagerun import run_stage_here

ROOT = Path(__file__).resolve().parents[2]
ROW = "biencoder_infonce_hardneg"  # mines hard negatives: FAISS in training and in scoring
N = 16  # functions: 10 train, 3 val, 3 test


def test_faiss_index_equals_exact_inner_product():
    from contrastlab.biencoder.run import score_row
    from contrastlab.biencoder.train import faiss_index, index_label
    from contrastlab.evaluation.retrieval import search

    g = torch.Generator().manual_seed(0)
    c = torch.nn.functional.normalize(torch.randn(50, 8, generator=g), dim=1)
    q = torch.nn.functional.normalize(torch.randn(7, 8, generator=g), dim=1)
    assert index_label("cpu") == "faiss-cpu IndexFlatIP"
    s, i = search(faiss_index(c, "cpu"), q, 5)
    ts, ti = torch.topk(q @ c.T, 5, dim=1)
    np.testing.assert_array_equal(i, ti.numpy())
    np.testing.assert_allclose(s, ts.numpy(), atol=1e-6)
    true = np.arange(7) * 3
    s64, t64 = q.double() @ c.double().T, (q.double() * c[true].double()).sum(1, keepdim=True)
    clear = ((s64 - t64).abs() > 1e-5).sum(1).numpy() == 49  # no other body within float error
    s64[np.arange(7), true] = -np.inf  # the body itself is not above itself
    exact = 1 + (s64 > t64).sum(1).numpy()
    assert clear.sum() >= 5  # (a near-tie's order depends on the BLAS kernel and thread count)
    got = score_row(q, c, true, 3, "cpu")
    np.testing.assert_array_equal(got[clear], exact[clear])  # deeper than k: counted


def test_gpu_presets_apply_to_params_yaml(tmp_path):
    """As ``python scripts/preset.py`` writes them (in place, then read back by DVC and the stages)."""
    from contrastlab.params import load_params
    from contrastlab.params.presets import apply_to_text, read_override

    text = (ROOT / "params.yaml").read_text()
    for name in ("code-biencoder-gpu", "finetune-gpu"):
        text = apply_to_text(text, *read_override(ROOT / f"presets/{name}.yaml"))
    (tmp_path / "params.yaml").write_text(text)
    p = load_params(tmp_path / "params.yaml")
    be, ft = p.code.biencoder, p.finetune
    assert (be.layers, be.nproc, be.bf16, be.device, be.steps, be.tune.trials) == (
        "all", "auto", "auto", "cuda", 1000, 8)
    assert (ft.layers, ft.nproc, ft.bf16, ft.device) == ("all", "auto", "auto", "cuda")


def _stage_relaunch():
    sys.path.insert(0, str(ROOT / "stages"))
    from finetune_encoder import relaunch

    return relaunch


def test_finetune_nproc_auto_is_one_process_without_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    relaunch = _stage_relaunch()
    assert relaunch("s.py", [], "auto") is None and relaunch("s.py", [], 1) is None  # runs in place
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert relaunch("s.py", [], 2) is None  # already a torchrun worker


@pytest.mark.distributed
@pytest.mark.slow
def test_relaunch_runs_a_plain_stage_on_n_ranks(tmp_path):
    """How ``stages/finetune_encoder.py`` honours ``finetune.nproc`` with its cmd unchanged."""
    script = tmp_path / "stage.py"
    script.write_text(f"import os, sys\nsys.path.insert(0, {str(ROOT / 'stages')!r})\n"
                      "from finetune_encoder import relaunch\n"
                      "rc = relaunch(__file__, sys.argv[1:], 2)\nif rc is not None:\n    sys.exit(rc)\n"
                      "open(sys.argv[1] + os.environ['RANK'], 'w').write(os.environ['WORLD_SIZE'])\n")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT / "src")}
    env.pop("WORLD_SIZE", None)
    r = subprocess.run([sys.executable, str(script), str(tmp_path / "rank")], env=env,
                       capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr[-2000:]
    assert [(tmp_path / f"rank{k}").read_text() for k in (0, 1)] == ["2", "2"]


def _inputs(d: Path) -> dict[str, str]:
    from safetensors.torch import save_file

    from contrastlab.biencoder.data import build_cache
    from contrastlab.params import load_params
    from contrastlab.params.presets import merge, read_override
    from test_biencoder import save_tiny_model  # this folder

    save_tiny_model(d / "model")
    sigs = [f"def f{i}(x{i}, n):" for i in range(N)]
    bodies = [f"return x{i} * {i} + n" if i % 2 else f"return [x{i}] * n" for i in range(N)]
    split = ["train"] * 10 + ["val"] * 3 + ["test"] * 3
    pd.DataFrame({"id": range(N), "signature": sigs, "body": bodies, "repo": [f"r{i % 4}" for i in range(N)],
                  "path": "m.py", "qualname": [f"f{i}" for i in range(N)]}
                 ).to_parquet(d / "functions.parquet")
    pd.DataFrame({"id": range(N), "split": split, "repo_group": [f"r{i % 4}" for i in range(N)],
                  "dup_group": range(N)}).to_parquet(d / "splits.parquet")
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    raw = merge(raw, read_override(ROOT / "presets/code-biencoder-gpu.yaml")[0])
    assert raw["code"]["biencoder"]["layers"] == "all" and raw["code"]["biencoder"]["nproc"] == "auto"
    smoke = dict(model=str(d / "model"), max_length=32, steps=3, batch_size=4, sub_batch=4,
                 batch_size_encode=8, hardneg_refresh=2, hardneg_k=2, device="cpu", bf16="off",
                 seeds=[0], threads=1, nproc=2)
    for name, world in (("two", 2), ("one", 1)):  # one process: the same global batch of 8
        be = {**raw["code"]["biencoder"], **smoke, "nproc": world, "batch_size": 8 // world}
        (d / f"{name}.yaml").write_text(yaml.safe_dump({"code": {**raw["code"], "biencoder": be}}))
    b = load_params(d / "two.yaml").code.biencoder
    save_file(build_cache(b, sigs, bodies), str(d / "cache.safetensors"))
    return {"functions": d / "functions.parquet", "splits": d / "splits.parquet",
            "cache": d / "cache.safetensors"}


def _stage_args(d: Path, name: str, inputs: dict) -> list[str]:
    o = d / name
    return ["stages/train_biencoder.py", "--params", str(d / f"{name}.yaml"), "--row", ROW,
            *[x for k, v in inputs.items() for x in (f"--{k}", str(v))], "--tuned", str(o / "tuned"),
            "--models", str(o / "models"), "--metrics", str(o / "metrics"), "--data", str(o / "data"),
            "--plots", str(o / "plots")]


def _stage(d: Path, name: str, inputs: dict, launcher: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "CONTRASTLAB_MLFLOW": "0", "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT / 'stages'}"}
    r = subprocess.run([sys.executable, *launcher, *_stage_args(d, name, inputs)], cwd=ROOT,
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    return r


@pytest.mark.slow
@pytest.mark.distributed
def test_gpu_preset_route_on_two_gloo_ranks(tmp_path):
    from safetensors.torch import load_file

    from contrastlab.biencoder.data import make_encoder
    from contrastlab.finetune.encoder import FinetuneEncoder
    from contrastlab.params import load_params

    sys.path.insert(0, str(Path(__file__).parent))
    inputs = _inputs(tmp_path)
    two = _stage(tmp_path, "two", inputs, ["-m", "contrastlab.launch", "--standalone", "--nproc_per_node=2"])
    script, *args = _stage_args(tmp_path, "one", inputs)  # the one-process run in this process
    one = run_stage_here(ROOT / script, args, ROOT, {"CONTRASTLAB_MLFLOW": "0", "HF_HUB_OFFLINE": "1"})
    assert one.returncode == 0, one.stdout[-2000:] + one.stderr[-3000:]
    assert two.stdout.count(f"train_biencoder {ROW}:") == 1  # rank 0 alone reports and writes
    m = json.loads((tmp_path / "two/metrics" / f"{ROW}.json").read_text())
    m1 = json.loads((tmp_path / "one/metrics" / f"{ROW}.json").read_text())
    assert m["index"] == m1["index"] == "faiss-cpu IndexFlatIP"
    assert (m["nproc"], m1["nproc"], m["layers"], m["batch_size"]) == (2, 1, "all", 4)
    assert m["per_seed"][0]["tokens"] == m1["per_seed"][0]["tokens"]  # both ranks' pairs counted
    assert not list((tmp_path / "two").rglob("*.tmp*"))
    # every layer trained: each parameter of the saved signature tower moved
    be = load_params(tmp_path / "two.yaml").code.biencoder
    start = {n: p for n, p in make_encoder(be).named_parameters() if ".pooler." not in n}  # unused
    tower = FinetuneEncoder.load(tmp_path / "two/models" / ROW / "index/model")
    moved = {n: float((p.detach() - start[n].detach()).abs().max()) for n, p in tower.named_parameters()
             if n in start}
    assert len(moved) == len(start) and any("embeddings" in n for n in moved)
    assert min(moved.values()) > 0, [n for n, v in moved.items() if v == 0]
    # 2 ranks x 4 pairs = 1 process x 8 pairs
    c2, c1 = (pd.read_csv(tmp_path / f"{k}/plots" / f"{ROW}.csv") for k in ("two", "one"))
    np.testing.assert_allclose(c2["loss"], c1["loss"], rtol=1e-4)
    e2, e1 = (load_file(str(tmp_path / f"{k}/models" / ROW / "embeddings.safetensors"))
              for k in ("two", "one"))
    torch.testing.assert_close(e2["body"], e1["body"], atol=1e-4, rtol=1e-3)
    r2, r1 = (pd.read_csv(tmp_path / f"{k}/data" / f"{ROW}_ranks.csv") for k in ("two", "one"))
    assert r2["rank"].tolist() == r1["rank"].tolist()
