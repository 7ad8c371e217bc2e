"""Code layout the project keeps: MLflow tracking split by concern, no class over about 100
lines (a newcomer reads one concern at a time)."""

from __future__ import annotations

import ast
from pathlib import Path

from _astutil import docstring_ids

ROOT = Path(__file__).resolve().parents[2]
TRACKING = ROOT / "src" / "contrastlab" / "tracking"


def test_tracking_is_split_by_concern_and_no_class_is_long():
    files = {p.stem for p in TRACKING.glob("*.py")}
    assert {"store", "lifecycle", "tracker", "artifacts", "runs"} <= files
    long = []
    for p in TRACKING.glob("*.py"):
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > 110:
                long.append(f"{p.name}:{node.name} ({node.end_lineno - node.lineno + 1} lines)")
    assert not long, f"classes over 110 lines: {long}"


def test_public_tracking_api_is_importable_from_the_package():
    import contrastlab.tracking as t

    for name in t.__all__:
        assert getattr(t, name) is not None, name
    assert t.Tracker(None).active is False  # a no-op tracker


def dvc_couplings(src: str) -> list[str]:
    """What in one module's source ties it to DVC: an ``import dvc...`` or a string (not a
    docstring) naming a ``DVC_*`` environment variable."""
    import re

    tree, found = ast.parse(src), []
    docs = docstring_ids(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [f"import {a.name}" for a in node.names if a.name.split(".")[0] == "dvc"]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "dvc":
            found.append(f"from {node.module} import")
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str)
              and id(node) not in docs and re.search(r"\bDVC_[A-Z_]+", node.value)):
            found.append(f"line {node.lineno}: {node.value!r}")
    return found


def test_the_library_reads_no_dvc_variable_and_imports_no_dvc():
    """What DVC tells a stage reaches the library only through stages/_dvc.py."""
    assert dvc_couplings('import os\nx = os.environ.get("DVC_EXP_NAME")\n')  # the check bites
    assert dvc_couplings("from dvc.repo import Repo\n")
    assert not dvc_couplings('"""Reads DVC_ROOT? No: a docstring may name it."""\n')
    bad = {str(p.relative_to(ROOT)): c for p in (ROOT / "src" / "contrastlab").rglob("*.py")
           if (c := dvc_couplings(p.read_text(encoding="utf-8")))}
    assert not bad, bad
    assert dvc_couplings((ROOT / "stages" / "_dvc.py").read_text(encoding="utf-8"))
