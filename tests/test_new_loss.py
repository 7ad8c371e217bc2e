"""A new loss, added as the README says (one file + one registry entry + one params key) in a
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
from _stagerun import StageResult, StageServer
from conftest import dvc_stage_cmd, yaml_dump, yaml_load

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


def add_loss(root: Path, module: str, code: str, entry: str) -> None:
    """Step 1: one file in src/contrastlab/losses/. Step 2: one entry in registry.yaml."""
    (root / "src/contrastlab/losses" / f"{module}.py").write_text(textwrap.dedent(code).lstrip())
    with open(root / "src/contrastlab/losses/registry.yaml", "a") as f:
        f.write(entry.strip() + "\n")


def edit_params(root: Path, edit) -> None:
    p = root / "params.yaml"
    raw = yaml_load(p.read_text())
    edit(raw)
    p.write_text(yaml_dump(raw))


_SERVERS: dict[Path, StageServer] = {}


@pytest.fixture(autouse=True)
def _stage_servers():
    """Each test's stage interpreters (one per project copy), ended with the test."""
    yield
    while _SERVERS:
        _SERVERS.popitem()[1].close()


def run(root: Path, script: str, *args: str, ok: bool = True) -> StageResult:
    """``python script args...`` in the copy ``root`` (its ``src`` on ``PYTHONPATH``), run by the
    copy's one stage interpreter (tests/_stagerun.py: the imports paid once per test; each call
    reads the files the test edited before it): its exit status, stdout and stderr."""
    if root not in _SERVERS:
        _SERVERS[root] = StageServer(root, {
            **os.environ, "PYTHONPATH": str(root / "src"), "CONTRASTLAB_MLFLOW": "0",
            "CONTRASTLAB_TIMINGS": str(root / "reports/timings"), "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1"})
    r = _SERVERS[root].run(script, *args)
    if ok:
        assert r.returncode == 0, f"{script} {args}:\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
    return r


def run_chain(root: Path, *steps: list[str]) -> None:
    """Several stages (each ``dvc_stage_cmd``-style) one after another, as they would run one by
    one; every one must succeed."""
    for step in steps:
        run(root, *step)


def closure(root: Path, stage: str) -> list[str]:
    return run(root, "scripts/stage_deps.py", "--show", stage).stdout.split()


def loss_files(root: Path, track: str, variant: str) -> list[str]:
    """The files of ``data/loss_code.yaml`` (written by validate_params) for one variant."""
    doc = yaml_load((root / "data/loss_code.yaml").read_text())
    loss = doc["variants"][track][variant]["loss"]
    return next(g[loss]["files"] for g in doc["needs"].values() if loss in g) if loss else []


# ---------------------------------------------------------------- graph track
@pytest.mark.slow
def test_new_two_view_loss_reaches_the_graph_table(tmp_path):
    root = copy_project(tmp_path / "proj")
    add_loss(root, "dcl", DCL_PY,
             'dcl: {target: "contrastlab.losses.dcl:dcl_loss", needs: views, family: selfsup, '
             'title: DCL (decoupled)}')

    def one_key(raw):  # step 3: one params key (a variant naming the loss, with its knobs)
        raw["graph"]["variants"]["dcl"] = {"loss": "dcl", "temperature": 0.5, "sigma": 0.5}

    def tiny(raw):  # test-speed settings, not part of the recipe
        g = raw["graph"]
        g["train"].update(epochs=3, batch_nodes=512)
        g["final"] = {"seeds": [0, 1], "ablation_seeds": []}
        g["tune"].update(seeds=[100], trials=2, startup_trials=1)
        g["model"] = {"hidden_dim": 16, "out_dim": 16, "proj_dim": 16, "activation": "prelu"}
        g["probe"]["c_grid"] = [1.0]
        g["probe"]["notebook_steps"] = 5

    edit_params(root, tiny)
    # before the params key: the stage refuses the unknown variant
    assert run(root, *dvc_stage_cmd("train_graph@dcl", root), ok=False).returncode == 2
    edit_params(root, one_key)

    # validation: the knobs are the loss's keyword arguments, checked generically
    run(root, *dvc_stage_cmd("validate_params", root))
    edit_params(root, lambda r: r["graph"]["variants"]["dcl"].update(sigmaa=1.0))
    bad = run(root, *dvc_stage_cmd("validate_params", root), ok=False)
    assert bad.returncode == 2 and "graph.variants.dcl.sigmaa" in bad.stderr and "sigma" in bad.stderr
    edit_params(root, lambda r: r["graph"]["variants"]["dcl"].pop("sigmaa"))

    # DVC dependencies: the loss file reaches the new variant's stages (through its digest in
    # data/loss_code.yaml) and no other variant's
    assert "src/contrastlab/losses/dcl.py" in loss_files(root, "graph", "dcl")
    assert "src/contrastlab/losses/dcl.py" not in loss_files(root, "graph", "ntxent")
    assert "src/contrastlab/losses/dcl.py" in closure(root, "validate_params")
    run(root, "scripts/stage_deps.py", "--write")
    run(root, "scripts/stage_deps.py")

    # tuning (two trials over the search space the variant inherits from graph.tune.search),
    # final training (3 steps, 2 seeds) with its test evaluation, then the report
    run_chain(root, [*dvc_stage_cmd("fetch_graph", root), "--vendor",
                     str(ROOT / "data/vendor/planetoid/Cora")],
              dvc_stage_cmd("tune_graph@dcl", root), dvc_stage_cmd("train_graph@dcl", root))
    tuned = json.loads((root / "reports/tuned/graph/dcl.json").read_text())
    assert tuned["n_complete"] == 2 and set(tuned["space"]) == set(
        yaml_load((root / "params.yaml").read_text())["graph"]["tune"]["search"])
    m = json.loads((root / "reports/metrics/graph/dcl.json").read_text())
    assert m["n_seeds"] == 2 and m["loss"] == "dcl" and 0.0 < m["logreg_acc_mean"] <= 1.0
    curve = (root / "reports/plots/graph/dcl.csv").read_text().splitlines()
    assert len(curve) == 1 + 3
    timing = root / "reports/timings/graph/dcl.json"  # as contrastlab.timings writes it
    timing.parent.mkdir(parents=True, exist_ok=True)
    timing.write_text('{"time_s": 1.5}')
    run(root, *dvc_stage_cmd("report", root))
    md = (root / "reports/comparison.md").read_text()
    # the row carries its short label (title up to " ("), the legend spells it out
    row = next(line for line in md.splitlines() if line.startswith("| DCL |"))
    assert f"{m['logreg_acc_mean']:.3f}" in row and "**DCL**: DCL (decoupled)" in md
    assert "DCL (decoupled)" in (root / "reports/index.html").read_text()
    # wall times change on every run and stay out of the hashed page: a rerun with other
    # times rewrites the same bytes, and the new times land in reports/timings/stage_times.md
    page = (root / "reports/index.html").read_bytes()
    assert "| graph | dcl | 1.5 |" in (root / "reports/timings/stage_times.md").read_text()
    timing.write_text('{"time_s": 4321.5}')
    run(root, *dvc_stage_cmd("report", root))
    assert (root / "reports/comparison.md").read_text() == md
    assert (root / "reports/index.html").read_bytes() == page
    assert "| graph | dcl | 4321.5 |" in (root / "reports/timings/stage_times.md").read_text()


# ---------------------------------------------------------------- multi-label track
@pytest.mark.slow
def test_new_multilabel_loss_reaches_the_multilabel_tables(tmp_path):
    root = copy_project(tmp_path / "proj")
    add_loss(root, "jaccard", JACCARD_PY,
             'jaccard: {target: "contrastlab.losses.jaccard:jaccard_supcon_loss", '
             'needs: multilabels, family: multilabel, title: Jaccard SupCon}')

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
    run(root, *dvc_stage_cmd("validate_params", root))
    # its own knob, validated against its signature
    edit_params(root, lambda r: r["multilabel"]["variants"].update(
        jaccard={"temperature": 0.1, "kwargs": {"min_jaccard": 0.2}}))
    run(root, *dvc_stage_cmd("validate_params", root))
    edit_params(root, lambda r: r["multilabel"]["variants"]["jaccard"]["kwargs"].update(weighting="x"))
    bad = run(root, *dvc_stage_cmd("validate_params", root), ok=False)
    assert "multilabel.variants.jaccard.kwargs.weighting" in bad.stderr
    edit_params(root, lambda r: r["multilabel"]["variants"]["jaccard"]["kwargs"].pop("weighting"))

    assert loss_files(root, "multilabel", "jaccard") == ["src/contrastlab/losses/jaccard.py"]
    assert "src/contrastlab/losses/jaccard.py" not in loss_files(root, "multilabel", "any")

    run_chain(root, dvc_stage_cmd("build_multilabel@yeast", root),
              *[argv for loss in ("jaccard", "any")  # the new loss and one it is compared with
                for argv in (dvc_stage_cmd(f"tune_multilabel@{loss}", root),  # same protocol: tuned first
                             dvc_stage_cmd("train_multilabel", root, dataset="yeast", loss=loss))])
    m = json.loads((root / "reports/metrics/multilabel/yeast_jaccard.json").read_text())
    assert m["n_seeds"] == 1 and 0.0 < m["micro_f1"] <= 1.0 and "time_s" not in m
    run(root, *dvc_stage_cmd("report", root))
    md = (root / "reports/comparison.md").read_text()
    rows = [line for line in md.splitlines() if line.startswith("| Jaccard SupCon")]
    assert rows and f"{100 * m['micro_f1']:.2f}" in rows[0]


# ---------------------------------------------------------------- code track (validation only)
@pytest.mark.slow
def test_new_regression_loss_is_accepted_by_the_code_track(tmp_path):
    root = copy_project(tmp_path / "proj")
    add_loss(root, "mse", MSE_PY,
             'mse: {target: "contrastlab.losses.mse:mse_loss", needs: regression, '
             'family: retrieval, title: MSE}')
    edit_params(root, lambda r: r["code"]["variants"].update(mse={"loss": "mse"}))
    run(root, *dvc_stage_cmd("validate_params", root))
    assert loss_files(root, "code", "mse") == ["src/contrastlab/losses/mse.py"]
    assert "src/contrastlab/losses/mse.py" not in loss_files(root, "graph", "ntxent")
    # a graph variant cannot use it: the registry says what it needs
    edit_params(root, lambda r: r["graph"]["variants"].update(m={"loss": "mse"}))
    bad = run(root, *dvc_stage_cmd("validate_params", root), ok=False)
    assert "graph.variants.m.loss" in bad.stderr and "two-view" in bad.stderr


# ---------------------------------------------------------------- the suite on the recipe's copy
#: The suite's tests that read params.yaml, the loss and variant tables or dvc.yaml, run on
#: the copy after the recipe: the schema and its defaults, the one table of names, the
#: generated DVC deps and plots, the presets and the report (its synthetic sections, the sweep
#: and ``dvc exp show`` readers). Left out: the slow and browser tests (each has its own
#: copy or needs Chromium) and tests/report/test_plots_offline.py (renders ``dvc plots`` of
#: the checkout's git history, which a copy has not).
SUITE_ON_COPY = ["tests/foundation/test_params.py", "tests/foundation/test_names.py",
                 "tests/foundation/test_stage_deps.py", "tests/foundation/test_presets.py",
                 "tests/report", "--ignore=tests/report/test_plots_offline.py"]


@pytest.mark.slow
def test_recipe_passes_the_params_names_deps_and_report_tests_on_its_copy(tmp_path):
    """The documented recipe is complete: a graph loss with a knob of its own and a search
    space (its file, one registry entry, one params.yaml variant, then ``stage_deps.py
    --write`` as docs/usage.md says) leaves the suite's params, names, stage-deps, presets
    and report tests green on the copy, with nothing else edited (issue 39: the variant's
    values and space are written in params.yaml only, with no schema-side or variants.yaml
    copy to keep equal)."""
    root = copy_project(tmp_path / "proj")
    shutil.copytree(ROOT / "tests", root / "tests",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copytree(ROOT / "presets", root / "presets")
    shutil.copy2(ROOT / "pyproject.toml", root / "pyproject.toml")  # pytest's settings
    add_loss(root, "dcw", DCL_PY,
             'dcw: {target: "contrastlab.losses.dcw:dcl_loss", needs: views, family: selfsup, '
             'title: "DCW (decoupled, weighted)"}')

    # step 3, as a user edits the file (the preset tests rewrite its text in place): the
    # variant and its own knob at the end of graph.variants; its loss is its name and its
    # search space graph.tune.search plus its own knob (written once: only what differs)
    text = (root / "params.yaml").read_text()
    end = text.index("\n\n", text.index("\n  variants:\n", text.index("\ngraph:\n")))
    (root / "params.yaml").write_text(text[:end] + textwrap.indent(textwrap.dedent("""
        dcw:
          temperature: 0.5
          sigma: 0.5
          search:
        """), "    ") + "        sigma: {type: float, low: 0.1, high: 1.0}" + text[end:])
    run(root, "scripts/stage_deps.py", "--write")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.update(PYTHONPATH=str(root / "src"), CONTRASTLAB_MLFLOW="0", OMP_NUM_THREADS="1",
               MKL_NUM_THREADS="1")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                        "-m", "not slow and not browser", *SUITE_ON_COPY],
                       cwd=root, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-2000:]
    assert " passed" in r.stdout and " failed" not in r.stdout
    # the tests ran on the copy (its params.yaml has the new variant), not on the checkout
    assert "dcw" in yaml_load((root / "params.yaml").read_text())["graph"]["variants"]
    assert "reports/plots/graph/dcw.csv" in (root / "dvc.yaml").read_text()


# ---------------------------------------------------------------- what DVC reruns
def _dvc_status(root: Path) -> dict:
    # DVC's own `dvc status`, each params file parsed once (tests/_dvc_cached.py)
    r = subprocess.run([sys.executable, str(ROOT / "tests/_dvc_cached.py"), "status", "--json"],
                       cwd=root, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout or "{}")


def _changed(before: dict, after: dict) -> set[str]:
    return {s for s in set(before) | set(after) if before.get(s) != after.get(s)}


@pytest.mark.slow
def test_adding_a_graph_loss_leaves_the_other_stages_up_to_date(tmp_path):
    """Deps follow use: in a copy of the project with its dvc.lock, adding a graph loss (file,
    registry entry, params variant, ``stage_deps.py --write``, then the params gate that
    ``dvc repro`` runs first) changes the status of the new variant's stages, the gate and the
    graph stages that read every two-view loss, and of nothing else; editing the two-view
    losses' file then reruns the graph variants and no stage of another track."""
    root = copy_project(tmp_path / "proj")
    shutil.copy2(ROOT / "dvc.lock", root / "dvc.lock")
    (root / ".dvc").mkdir()
    shutil.copy2(ROOT / ".dvc/config", root / ".dvc/config")
    (root / "data").mkdir()
    for f in ("data/params_ok.json", "data/loss_code.yaml"):
        shutil.copy2(ROOT / f, root / f)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    # fewer stage instances for speed (DVC re-reads the params files once per stage); the
    # statuses are compared before and after, so this edit itself cancels out
    edit_params(root, lambda r: r["multilabel"].update(datasets=["yeast"]))
    before = _dvc_status(root)

    add_loss(root, "dcl", DCL_PY,
             'dcl: {target: "contrastlab.losses.dcl:dcl_loss", needs: views, family: selfsup, '
             'title: DCL (decoupled)}')
    edit_params(root, lambda r: r["graph"]["variants"].update(dcl={"loss": "dcl"}))
    run(root, "scripts/stage_deps.py", "--write")
    run(root, *dvc_stage_cmd("validate_params", root))
    changed = _changed(before, _dvc_status(root))
    new = {s for s in changed if s.endswith("@dcl")}
    assert {"tune_graph@dcl", "train_graph@dcl", "default_graph@dcl"} <= new
    assert changed - new <= {"validate_params", "baselines_graph", "report"}, changed - new
    assert "validate_params" in changed

    # editing the file of NT-Xent, MixCo and MoCHi changes the digests of those variants
    # (the keys the status above follows) and of no variant of another track
    old = yaml_load((root / "data/loss_code.yaml").read_text())["variants"]
    with open(root / "src/contrastlab/losses/selfsup.py", "a") as f:
        f.write("\n# an edit\n")
    run(root, *dvc_stage_cmd("validate_params", root))
    new_ = yaml_load((root / "data/loss_code.yaml").read_text())["variants"]
    moved = {f"{t}.{v}" for t in new_ for v in new_[t] if new_[t][v] != old[t].get(v)}
    # ... and of the graph fine-tuning rows pre-trained with one of them (they train that loss)
    fts = yaml_load((root / "params.yaml").read_text())["graph"].get("finetune") or {}
    ft = {f"graph.{n}" for n, r in fts.items() if r["pretrain"] in ("ntxent", "mixco", "mochi")}
    assert moved == {"graph.ntxent", "graph.mixco", "graph.mochi"} | ft
