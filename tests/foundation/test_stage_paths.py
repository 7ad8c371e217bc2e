"""Paths live in dvc.yaml only: stage scripts hold no path defaults, and every path a stage's
``cmd`` passes is one of that stage's declared ``deps`` or ``outs`` (or a folder of them)."""

from __future__ import annotations

import ast
import shlex
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def _looks_like_path(v: str) -> bool:
    return "/" in v or v.endswith((".json", ".csv", ".parquet", ".safetensors", ".yaml"))


def _path_defaults(script: Path) -> list[str]:
    """``--opt=default`` for every ``add_argument`` of the script whose default is a path."""
    out = []
    for node in ast.walk(ast.parse(script.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
            for kw in node.keywords:
                if (kw.arg == "default" and isinstance(kw.value, ast.Constant)
                        and ast.literal_eval(node.args[0]) != "--params"  # DVC's params file
                        and isinstance(kw.value.value, str) and _looks_like_path(kw.value.value)):
                    out.append(f"{ast.literal_eval(node.args[0])}={kw.value.value}")
    return out


def test_no_stage_script_holds_a_path_default():
    found = {s.name: d for s in sorted((ROOT / "stages").glob("*.py")) if (d := _path_defaults(s))}
    assert found == {}, f"paths belong in dvc.yaml's cmd: {found}"


def test_the_checker_sees_a_path_default(tmp_path):
    f = tmp_path / "stage.py"
    f.write_text('import argparse\nap = argparse.ArgumentParser()\n'
                 'ap.add_argument("--data", default="data/x.parquet")\nap.add_argument("-k", default="5")\n')
    assert _path_defaults(f) == ["--data=data/x.parquet"]


def _entries(items) -> list[str]:
    return [next(iter(i)) if isinstance(i, dict) else str(i) for i in items or []]


def test_every_path_in_a_cmd_is_a_declared_dep_or_out():
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    gaps = {}
    n_paths = 0
    for name, st in stages.items():
        body = st.get("do", st)
        argv = shlex.split(body["cmd"])
        declared = _entries(body.get("deps")) + _entries(body.get("outs"))
        for opt, val in zip(argv, argv[1:]):
            if not opt.startswith("--") or val.startswith("--") or not _looks_like_path(val):
                continue
            if val.startswith("stages/") and val.endswith(".py"):
                continue  # the stage script (after a launcher option): its code digest covers it
            n_paths += 1
            v = val.rstrip("/")
            if not any(d == v or d.startswith(v + "/") or v.startswith(d.rstrip("/") + "/")
                       for d in declared):
                gaps.setdefault(name, []).append(f"{opt} {val}")
    assert gaps == {}, f"cmd paths that are neither deps nor outs: {gaps}"
    assert n_paths > 60  # the stages do pass their paths in the cmd
