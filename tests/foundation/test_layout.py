"""Code layout the project keeps: MLflow tracking split by concern, no class over about 100
lines (a newcomer reads one concern at a time)."""

from __future__ import annotations

import ast
from pathlib import Path

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
