"""AST helpers shared by the source-scanning tests (tests/ is on pytest's pythonpath)."""

from __future__ import annotations

import ast


def docstring_ids(tree: ast.AST) -> set[int]:
    """``id()`` of every docstring constant (module, class, function) in ``tree``: the scans
    skip them, so prose may name what code may not."""
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids
