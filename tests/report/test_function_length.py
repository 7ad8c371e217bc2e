"""Issue #57: no function in ``src/contrastlab/reporting/`` is over 60 lines (ast-based:
``end_lineno - lineno + 1``, decorators excluded, nested functions counted on their own)."""

from __future__ import annotations

import ast
from pathlib import Path

import contrastlab.reporting

LIMIT = 60
PACKAGE = Path(contrastlab.reporting.__file__).parent


def long_functions(folder: Path = PACKAGE, limit: int = LIMIT) -> list[str]:
    """``path:line name (n lines)`` of every function or method over ``limit`` lines."""
    out = []
    for f in sorted(folder.glob("*.py")):
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > limit:
                    out.append(f"{f.name}:{node.lineno} {node.name} ({n} lines)")
    return out


def test_no_reporting_function_over_60_lines():
    assert long_functions() == [], (
        f"functions over {LIMIT} lines in {PACKAGE} (split them):\n" + "\n".join(long_functions()))


def test_the_check_sees_a_long_function(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(LIMIT))
    (tmp_path / "m.py").write_text(f"def f():\n{body}\n")
    assert long_functions(tmp_path) == [f"m.py:1 f ({LIMIT + 1} lines)"]
    assert long_functions(tmp_path, LIMIT + 1) == []
