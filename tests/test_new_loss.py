"""A new loss, added as the README says (one file + one registry line + one params key) in a
temporary copy of the project, goes through validation, training, evaluation and the report
of the track it fits, with the stage scripts a user runs (tiny settings, real data).

Graph track: a two-view loss (DCL, ``needs: views``). Multi-label track: a multi-label
supervised loss (Jaccard-weighted SupCon, ``needs: multilabels``). The code track's stages
need teacher states (a transformer forward pass over the corpus), so its part stops at
params validation and the dependency closure.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]

# ---------------------------------------------------------------- the user's loss files
DCL_PY = '''
"""Decoupled contrastive loss (Yeh et al. 2022, "Decoupled Contrastive Learning", Eq. 6;
with ``sigma > 0`` the DCW weighting of Eq. 7)."""

import torch
import torch.nn.functional as F


def dcl_loss(z1, z2, *, temperature: float = 0.1, sigma: float = 0.0):
    """``z1``, ``z2``: ``[N, D]`` float views. For each of the 2N anchors,
    ``-w * s_pos / t + log sum_{k != i, pos} exp(s_ik / t)`` (cosine similarities), mean.
    Raises ValueError for a non-positive temperature or mismatched shapes."""
    if temperature <= 0 or z1.shape != z2.shape:
        raise ValueError("temperature must be > 0 and z1, z2 of the same shape")
    n = z1.shape[0]
    z = F.normalize(torch.cat([z1, z2]), dim=1)
    sim = z @ z.T / temperature
    idx = torch.arange(2 * n, device=z.device)
    pos = (idx + n) % (2 * n)
    pos_sim = sim[idx, pos]
    drop = torch.eye(2 * n, dtype=torch.bool, device=z.device)
    drop[idx, pos] = True
    neg = torch.logsumexp(sim.masked_fill(drop, float("-inf")), dim=1)
    w = torch.ones_like(pos_sim)
    if sigma > 0:
        e = torch.exp(pos_sim.detach() * temperature / sigma)
        w = 2 - e / e.mean()
    return (-w * pos_sim + neg).mean()
'''

JACCARD_PY = '''
"""SupCon with positives weighted by the Jaccard similarity of the label sets (a multi-label
variant of Khosla et al. 2020, Eq. 2)."""

import torch


def jaccard_supcon_loss(features, labels, *, temperature: float = 0.07,
                        min_jaccard: float = 0.0):
    """``features``: ``[N, D]`` or ``[N, n_views, D]`` L2-normalised; ``labels``: ``[N, C]``
    multi-hot. Anchor i: ``-sum_p w_ip log softmax_ip / sum_p w_ip`` over ``p != i`` with
    ``w_ip = J(y_i, y_p)`` (0 below ``min_jaccard``); anchors without a positive are skipped;
    mean over anchors. Views are stacked as extra samples with their sample's labels."""
    if temperature <= 0:
        raise ValueError("temperature must be > 0")
    if features.dim() == 3:
        v = features.shape[1]
        features = features.transpose(0, 1).reshape(-1, features.shape[-1])
        labels = labels.repeat(v, 1)
    y = labels.float()
    inter = y @ y.T
    union = y.sum(1, keepdim=True) + y.sum(1) - inter
    w = torch.where(union > 0, inter / union.clamp_min(1), torch.zeros_like(inter))
    w = torch.where(w >= min_jaccard, w, torch.zeros_like(w))
    eye = torch.eye(len(y), dtype=torch.bool, device=y.device)
    w = w.masked_fill(eye, 0.0)
    logits = (features @ features.T / temperature).masked_fill(eye, float("-inf"))
    logp = torch.log_softmax(logits, dim=1).masked_fill(eye, 0.0)
    has = w.sum(1) > 0
    per = -(w * logp).sum(1)[has] / w.sum(1)[has]
    return per.mean() if has.any() else features.sum() * 0.0
'''

MSE_PY = '''
"""Mean squared error between predictions and targets (a regression baseline)."""

import torch


def mse_loss(pred, target, *, reduction: str = "mean"):
    """``pred``, ``target``: ``[B, D]``; ``reduction`` ``"mean"`` | ``"sum"``."""
    d = ((pred - target) ** 2).sum(-1)
    return d.mean() if reduction == "mean" else d.sum()
'''


# ---------------------------------------------------------------- the recipe, as a user does it
def copy_project(dst: Path) -> Path:
    """The project's code and pipeline files (not its data: the stages read ROOT's vendored data)."""
    ign = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for d in ("src", "stages", "scripts"):
        shutil.copytree(ROOT / d, dst / d, ignore=ign)
    for f in ("params.yaml", "dvc.yaml"):
        shutil.copy2(ROOT / f, dst / f)
    return dst


def add_loss(root: Path, module: str, code: str, registry_line: str) -> None:
    """Step 1: one file in src/contrastlab/losses/. Step 2: one line in LOSSES."""
    (root / "src/contrastlab/losses" / f"{module}.py").write_text(textwrap.dedent(code).lstrip())
    reg = root / "src/contrastlab/losses/registry.py"
    text = reg.read_text()
    head, sep, tail = text.partition("LOSSES: dict[str, LossSpec] = {\n")
    assert sep, "registry layout changed"
    body, close, rest = tail.partition("\n}\n")
    reg.write_text(head + sep + body + "\n    " + registry_line + close + rest)


def edit_params(root: Path, edit) -> None:
    p = root / "params.yaml"
    raw = yaml.safe_load(p.read_text())
    edit(raw)
    p.write_text(yaml.safe_dump(raw, sort_keys=False))


def run(root: Path, *args: str, ok: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(root / "src"), "CONTRASTLAB_MLFLOW": "0",
           "CONTRASTLAB_TIMINGS": str(root / "reports/timings"), "OMP_NUM_THREADS": "1",
           "MKL_NUM_THREADS": "1"}
    r = subprocess.run([sys.executable, *args], cwd=root, env=env, capture_output=True,
                       text=True, timeout=600)
    if ok:
        assert r.returncode == 0, f"{args}:\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
    return r


def closure(root: Path, stage: str) -> list[str]:
    return run(root, "scripts/stage_deps.py", "--show", stage).stdout.split()


# ---------------------------------------------------------------- graph track
@pytest.mark.slow
def test_new_two_view_loss_reaches_the_graph_table(tmp_path):
    root = copy_project(tmp_path / "proj")
    add_loss(root, "dcl", DCL_PY,
             '"dcl": LossSpec("contrastlab.losses.dcl:dcl_loss", "views", "selfsup", "DCL (decoupled)"),')

    def one_key(raw):  # step 3: one params key (a variant naming the loss, with its knobs)
        raw["graph"]["variants"]["dcl"] = {"loss": "dcl", "temperature": 0.5, "sigma": 0.5}

    def tiny(raw):  # test-speed settings, not part of the recipe
        g = raw["graph"]
        g["train"].update(epochs=3, batch_nodes=512)
        g["final"] = {"seeds": [0, 1], "ablation_seeds": []}
        g["tune"]["seeds"] = [100]
        g["model"] = {"hidden_dim": 16, "out_dim": 16, "proj_dim": 16, "activation": "prelu"}
        g["probe"]["c_grid"] = [1.0]
        g["probe"]["notebook_steps"] = 5

    edit_params(root, tiny)
    # before the params key: the stage refuses the unknown variant
    assert run(root, "stages/train_graph.py", "--variant", "dcl", ok=False).returncode == 2
    edit_params(root, one_key)

    # validation: the knobs are the loss's keyword arguments, checked generically
    run(root, "stages/validate_params.py")
    edit_params(root, lambda r: r["graph"]["variants"]["dcl"].update(sigmaa=1.0))
    bad = run(root, "stages/validate_params.py", ok=False)
    assert bad.returncode == 2 and "graph.variants.dcl.sigmaa" in bad.stderr and "sigma" in bad.stderr
    edit_params(root, lambda r: r["graph"]["variants"]["dcl"].pop("sigmaa"))

    # DVC dependencies: the loss file is a dependency of the graph training stage only
    assert "src/contrastlab/losses/dcl.py" in closure(root, "train_graph")
    assert "src/contrastlab/losses/dcl.py" not in closure(root, "train_multilabel")
    run(root, "scripts/stage_deps.py", "--write")
    run(root, "scripts/stage_deps.py")

    # tuning (nothing searched: the declared configuration, scored once on validation),
    # final training (3 steps, 2 seeds) with its test evaluation, then the report
    run(root, "stages/fetch_graph.py", "--vendor", str(ROOT / "data/vendor/planetoid/Cora"))
    run(root, "stages/tune_graph.py", "--variant", "dcl")
    run(root, "stages/train_graph.py", "--variant", "dcl")
    m = json.loads((root / "reports/metrics/graph/dcl.json").read_text())
    assert m["n_seeds"] == 2 and m["loss"] == "dcl" and 0.0 < m["logreg_acc_mean"] <= 1.0
    curve = (root / "reports/plots/graph/dcl.csv").read_text().splitlines()
    assert len(curve) == 1 + 3
    run(root, "stages/report.py")
    md = (root / "reports/comparison.md").read_text()
    row = next(line for line in md.splitlines() if line.startswith("| DCL (decoupled)"))
    assert f"{m['logreg_acc_mean']:.3f}" in row
    assert "DCL (decoupled)" in (root / "reports/index.html").read_text()


# ---------------------------------------------------------------- multi-label track
@pytest.mark.slow
def test_new_multilabel_loss_reaches_the_multilabel_tables(tmp_path):
    root = copy_project(tmp_path / "proj")
    add_loss(root, "jaccard", JACCARD_PY,
             '"jaccard": LossSpec("contrastlab.losses.jaccard:jaccard_supcon_loss", "multilabels", '
             '"multilabel", "Jaccard SupCon"),')

    def one_key(raw):  # step 3: name the loss in the track's list
        raw["multilabel"]["losses"].append("jaccard")

    def tiny(raw):
        ml = raw["multilabel"]
        ml["datasets"] = ["yeast"]
        ml["seeds"] = [0]
        ml["vendor_root"] = str(ROOT / "data/vendor/mulan")
        ml["data"]["yeast"] = {"max_train": 200, "max_test": 200}
        ml["train"].update(epochs=2, clf_epochs=2, workers=1, hidden=[32], enc_dim=16,
                           proj_dim=16, batch_size=64, max_steps=20, eval_every=10)
        ml["tune"].update(datasets=["yeast"], trials=1, startup_trials=1)

    edit_params(root, tiny)
    edit_params(root, one_key)
    run(root, "stages/validate_params.py")
    # its own knob, validated against its signature
    edit_params(root, lambda r: r["multilabel"]["variants"].update(
        jaccard={"temperature": 0.1, "kwargs": {"min_jaccard": 0.2}}))
    run(root, "stages/validate_params.py")
    edit_params(root, lambda r: r["multilabel"]["variants"]["jaccard"]["kwargs"].update(weighting="x"))
    bad = run(root, "stages/validate_params.py", ok=False)
    assert "multilabel.variants.jaccard.kwargs.weighting" in bad.stderr
    edit_params(root, lambda r: r["multilabel"]["variants"]["jaccard"]["kwargs"].pop("weighting"))

    assert "src/contrastlab/losses/jaccard.py" in closure(root, "train_multilabel")
    assert "src/contrastlab/losses/jaccard.py" not in closure(root, "train_graph")

    run(root, "stages/build_multilabel.py", "--dataset", "yeast")
    for loss in ("jaccard", "any"):  # the new loss and one it is compared with
        run(root, "stages/tune_multilabel.py", "--variant", loss)  # same protocol: tuned first
        run(root, "stages/train_multilabel.py", "--dataset", "yeast", "--loss", loss)
    m = json.loads((root / "reports/metrics/multilabel/yeast_jaccard.json").read_text())
    assert m["n_seeds"] == 1 and 0.0 < m["micro_f1"] <= 1.0 and "time_s" not in m
    run(root, "stages/report.py")
    md = (root / "reports/comparison.md").read_text()
    rows = [line for line in md.splitlines() if line.startswith("| Jaccard SupCon")]
    assert rows and f"{100 * m['micro_f1']:.2f}" in rows[0]


# ---------------------------------------------------------------- code track (validation only)
def test_new_regression_loss_is_accepted_by_the_code_track(tmp_path):
    root = copy_project(tmp_path / "proj")
    add_loss(root, "mse", MSE_PY,
             '"mse": LossSpec("contrastlab.losses.mse:mse_loss", "regression", "retrieval", "MSE"),')
    edit_params(root, lambda r: r["code"]["variants"].update(mse={"loss": "mse"}))
    run(root, "stages/validate_params.py")
    assert "src/contrastlab/losses/mse.py" in closure(root, "train_code")
    assert "src/contrastlab/losses/mse.py" not in closure(root, "train_graph")
    # a graph variant cannot use it: the registry says what it needs
    edit_params(root, lambda r: r["graph"]["variants"].update(m={"loss": "mse"}))
    bad = run(root, "stages/validate_params.py", ok=False)
    assert "graph.variants.m.loss" in bad.stderr and "two-view" in bad.stderr
