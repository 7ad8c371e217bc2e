"""The DVC deps of every stage cover the import closure of its script (scripts/stage_deps.py)."""

from __future__ import annotations

import importlib.util
import shutil
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


def _tool():
    spec = importlib.util.spec_from_file_location("stage_deps", ROOT / "scripts" / "stage_deps.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["stage_deps"] = mod
    spec.loader.exec_module(mod)
    return mod


sd = _tool()


def _copy_project(tmp: Path) -> Path:
    for d in ("src", "stages"):
        shutil.copytree(ROOT / d, tmp / d, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copy2(ROOT / "dvc.yaml", tmp / "dvc.yaml")
    return tmp


def test_every_stage_covers_its_import_closure():
    gaps = sd.missing(ROOT)
    assert gaps == {}, "dvc.yaml misses imports (run python scripts/stage_deps.py --write):\n" + \
        "\n".join(f"{k}: {v}" for k, v in gaps.items())


def test_removing_a_dependency_is_detected(tmp_path):
    root = _copy_project(tmp_path)
    doc = yaml.safe_load((root / "dvc.yaml").read_text())
    st = doc["stages"]["train_multilabel"]
    st["deps"] = [d for d in st["deps"] if d != "src/contrastlab/losses/supcon.py"]
    (root / "dvc.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    gaps = sd.missing(root)
    assert gaps == {"train_multilabel": ["src/contrastlab/losses/supcon.py"]}
    assert sd.main(["--root", str(root)]) == 1
    # --write restores it and keeps the data deps
    sd.write(root)
    assert sd.missing(root) == {}
    deps = yaml.safe_load((root / "dvc.yaml").read_text())["stages"]["train_multilabel"]["deps"]
    assert "src/contrastlab/losses/supcon.py" in deps and "data/multilabel/${item.dataset}" in deps


def test_a_loss_module_is_a_dependency_only_of_the_tracks_using_it():
    req = sd.required(ROOT)
    sel = "src/contrastlab/losses/selfsup.py"
    users = {s for s, files in req.items() if sel in files}
    assert "train_graph" in users
    assert not users & {"train_code", "train_multilabel", "evaluate_code", "fetch_repos"}
    assert "src/contrastlab/losses/regression.py" in req["train_code"]
    assert "src/contrastlab/losses/simdis.py" in req["train_multilabel"]


def _write(root: Path, rel: str, text: str) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(textwrap.dedent(text))


def test_closure_rules_on_a_synthetic_project(tmp_path):
    r = tmp_path
    _write(r, "src/contrastlab/__init__.py", "")
    _write(r, "src/contrastlab/a/__init__.py", "from .b import f\n")
    _write(r, "src/contrastlab/a/b.py", "from ..c import g\n")
    _write(r, "src/contrastlab/c.py", "def g():\n    from .d import h\n")
    _write(r, "src/contrastlab/d.py", "")
    _write(r, "src/contrastlab/unused.py", "")
    _write(r, "src/contrastlab/losses/__init__.py", "from .registry import get_loss\n")
    _write(r, "src/contrastlab/losses/registry.py", """
        LOSSES = {
            "x": LossSpec("contrastlab.losses.xmod:x_loss", "views", "selfsup", "X"),
            "y": LossSpec("contrastlab.losses.ymod:y_loss", needs="labels", family="s", title="Y"),
        }
        """)
    _write(r, "src/contrastlab/losses/xmod.py", "")
    _write(r, "src/contrastlab/losses/ymod.py", "")
    _write(r, "src/contrastlab/train.py", """
        from .losses import get_loss
        LOSS_NEEDS = ("labels",)
        def run():
            return get_loss("y")
        """)
    _write(r, "src/contrastlab/bad.py", "from .losses import get_loss\nget_loss('x')\n")
    _write(r, "stages/helper.py", "import contrastlab.d\n")
    _write(r, "stages/one.py", "from contrastlab.a import b\nfrom helper import x\n")
    _write(r, "stages/two.py", "from contrastlab import train\n")
    _write(r, "stages/three.py", "import contrastlab.bad\n")
    an = sd.Analyzer(r)
    one = {p.as_posix() for p in an.closure([r / "stages/one.py"]).files}
    assert one == {"stages/one.py", "stages/helper.py", "src/contrastlab/__init__.py",
                   "src/contrastlab/a/__init__.py", "src/contrastlab/a/b.py",
                   "src/contrastlab/c.py", "src/contrastlab/d.py"}
    two = {p.as_posix() for p in an.closure([r / "stages/two.py"]).files}
    assert "src/contrastlab/losses/ymod.py" in two and "src/contrastlab/losses/xmod.py" not in two
    with pytest.raises(sd.DepsError, match="LOSS_NEEDS"):
        an.closure([r / "stages/three.py"])
    # stages are found from their cmd, templated or not
    _write(r, "dvc.yaml", """
        stages:
          s1:
            cmd: python -m torch.distributed.run --nproc_per_node=${n} stages/one.py --v ${key}
            deps: [stages/one.py, stages/helper.py, src/contrastlab]
          s2:
            foreach: [a, b]
            do:
              cmd: python stages/two.py
              deps: [stages/two.py, data/x]
        """)
    gaps = sd.missing(r)
    assert set(gaps) == {"s2"} and "src/contrastlab/losses/ymod.py" in gaps["s2"]
    sd.write(r)
    assert sd.missing(r) == {}
    assert "data/x" in yaml.safe_load((r / "dvc.yaml").read_text())["stages"]["s2"]["do"]["deps"]


def test_lazy_package_attributes_count_only_when_used(tmp_path):
    """Imports inside a package ``__init__``'s ``__getattr__`` count for a file importing a
    name the package does not define, not for every importer of the package."""
    r = tmp_path
    _write(r, "src/contrastlab/__init__.py", "")
    _write(r, "src/contrastlab/p/__init__.py", """
        from .reg import get
        def __getattr__(name):
            from . import heavy
            return getattr(heavy, name)
        """)
    _write(r, "src/contrastlab/p/reg.py", "")
    _write(r, "src/contrastlab/p/heavy.py", "")
    _write(r, "stages/a.py", "from contrastlab.p import get\n")
    _write(r, "stages/b.py", "from contrastlab.p import big_thing\n")
    an = sd.Analyzer(r)
    a = {p.as_posix() for p in an.closure([r / "stages/a.py"]).files}
    b = {p.as_posix() for p in an.closure([r / "stages/b.py"]).files}
    assert "src/contrastlab/p/heavy.py" not in a and "src/contrastlab/p/reg.py" in a
    assert "src/contrastlab/p/heavy.py" in b


def test_every_stage_depends_on_the_params_gate():
    stages = sd.load_stages(ROOT)
    gate = sd.gate(stages)
    assert gate == "data/params_ok.json"
    for name, st in stages.items():
        if name != sd.GATE_STAGE:
            assert sd.covered(gate, sd._dep_paths(sd._body(st))), name
