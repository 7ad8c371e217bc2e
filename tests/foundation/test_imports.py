"""The import graph of ``src/contrastlab``: no circles, no upward imports (issue 39).

The graph is built with :mod:`ast` from every ``import`` / ``from ... import`` in every
module, wherever it stands: module level, inside functions (lazy imports) and under
``if TYPE_CHECKING:`` alike. An import names the deepest module it reaches
(``from contrastlab.tracking import runs`` -> ``contrastlab.tracking.runs``;
``from contrastlab.tracking import Tracker`` -> the package ``contrastlab.tracking``). The
parent packages that Python runs on the way are not edges of their own (a package's
``__init__`` re-exporting its submodules would otherwise close a circle with every
submodule that imports a sibling). ``importlib.import_module("contrastlab.x")`` counts as an
import of ``contrastlab.x``, and ``import_module(f"contrastlab.pkg.{name}")`` as an import of
every module of ``contrastlab.pkg`` (as scripts/stage_deps.py reads them). The loss
registry's imports of the loss modules named in ``losses/registry.yaml`` are data, not
code, and are not in the graph.

Layering, lowest floor first. A module may import its own unit (top-level subpackage or
root module) and any unit on a lower floor or the same floor, never a higher one; units are
the top-level subpackages and root modules of ``contrastlab``:

0. foundation: ``errors``, ``io``, ``utils``, ``invocation``, ``progress``, ``timings``,
   ``distributed``, ``metrics`` (array metrics the data layer needs too), ``sandbox*``
   (plain helpers; no contrastlab package above them)
1. ``losses`` (the loss registry and loss functions)
2. ``models`` (encoders, the code student and its checkpoints, graph feature propagation),
   ``tuning`` (generic Optuna studies: search spaces, storage, the study loop)
3. ``params`` (the validated params.yaml schema; search spaces from ``tuning``)
4. ``tracking`` (MLflow runs)
5. ``data`` (loading and building data sets and the code track's stage inputs)
6. ``evaluation`` (metrics, statistics, probes, retrieval, the baselines' evaluation)
7. ``training`` (training loops and the training / tuning stages' drivers)
8. ``finetune``
9. ``biencoder``
10. ``reporting``
11. entry points: ``cli``, ``launch``, ``query`` and the package ``__init__``

Separately, neither the modules nor the units may import each other in a circle (units on
one floor included, e.g. ``models`` <-> ``tuning``).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"
PACKAGE = "contrastlab"

FLOORS: list[set[str]] = [
    {"errors", "io", "utils", "invocation", "progress", "timings", "distributed", "metrics",
     "sandbox", "sandbox_isolation", "sandbox_programs"},
    {"losses"},
    {"models", "tuning"},
    {"params"},
    {"tracking"},
    {"data"},
    {"evaluation"},
    {"training"},
    {"finetune"},
    {"biencoder"},
    {"reporting"},
    {"cli", "launch", "query", ""},
]
FLOOR = {unit: i for i, units in enumerate(FLOORS) for unit in units}


def modules(src: Path = SRC) -> dict[str, Path]:
    """``{dotted name: file}`` of every module of the package (a package by its ``__init__``)."""
    out = {}
    for p in sorted((src / PACKAGE).rglob("*.py")):
        parts = list(p.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def import_graph(src: Path = SRC) -> dict[str, dict[str, int]]:
    """``{module: {imported module: line}}`` over every import statement of every module."""
    mods = modules(src)

    def deepest(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, dict[str, int]] = {}
    for mod, path in mods.items():
        is_pkg = path.name == "__init__.py"
        here = mod.split(".") if is_pkg else mod.split(".")[:-1]
        edges: dict[str, int] = {}
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here[:len(here) - (node.level - 1)]
                    full = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    full = node.module or ""
                targets = [f"{full}.{a.name}" for a in node.names]
            if isinstance(node, ast.Call) and _called(node) == "import_module" and node.args:
                targets = _dynamic(node.args[0], mods)
            for t in targets:
                if t == PACKAGE or t.startswith(PACKAGE + "."):
                    dst = deepest(t)
                    if dst and dst != mod:
                        edges.setdefault(dst, node.lineno)
        graph[mod] = edges
    return graph


def _called(call: ast.Call) -> str | None:
    fn = call.func
    return fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", None)


def _dynamic(arg: ast.expr, mods) -> list[str]:
    """Modules an ``importlib.import_module(arg)`` may import: the constant's module, or for
    an f-string with a constant ``contrastlab.pkg.`` prefix every module of that package."""
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return [arg.value]
    if isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant):
        prefix = str(arg.values[0].value)
        return [m for m in mods if m.startswith(prefix) and "." not in m[len(prefix):]]
    return []


def unit(mod: str) -> str:
    """The top-level subpackage or root module ``mod`` belongs to (``""``: the package)."""
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else ""


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


GRAPH = import_graph()


def test_graph_sees_lazy_and_dynamic_imports():
    # tracking.runs imports tracker at module level; reporting.build imports tracking lazily
    # and the track modules by name (importlib)
    assert f"{PACKAGE}.tracking.tracker" in GRAPH[f"{PACKAGE}.tracking.runs"]
    assert any(unit(d) == "tracking" for d in GRAPH[f"{PACKAGE}.reporting.build"])
    assert f"{PACKAGE}.reporting.graph" in GRAPH[f"{PACKAGE}.reporting.build"]


def test_graph_sees_type_checking_imports(tmp_path):
    pkg = tmp_path / PACKAGE
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                              "    from .b import B\n")
    (pkg / "b.py").write_text("def f():\n    from . import a\n")
    graph = import_graph(tmp_path)
    assert f"{PACKAGE}.b" in graph[f"{PACKAGE}.a"] and f"{PACKAGE}.a" in graph[f"{PACKAGE}.b"]
    assert cycles({m: set(e) for m, e in graph.items()}) == [[f"{PACKAGE}.a", f"{PACKAGE}.b"]]


def test_every_unit_has_a_floor():
    missing = sorted({unit(m) for m in GRAPH} - set(FLOOR))
    assert not missing, f"give these units a floor in FLOORS: {missing}"


def test_no_module_circles():
    found = cycles({m: set(e) for m, e in GRAPH.items()})
    assert not found, "modules importing each other in a circle:\n" + "\n".join(
        " <-> ".join(c) for c in found)


def test_no_package_circles():
    units: dict[str, set[str]] = defaultdict(set)
    for m, edges in GRAPH.items():
        units[unit(m)].update(unit(d) for d in edges if unit(d) != unit(m))
    found = cycles(dict(units))
    assert not found, "packages importing each other in a circle:\n" + "\n".join(
        " <-> ".join(c) for c in found)


def test_no_upward_imports():
    bad = [f"{m}:{line} imports {d} (floor {FLOOR[unit(d)]} > {FLOOR[unit(m)]})"
           for m, edges in sorted(GRAPH.items()) for d, line in sorted(edges.items())
           if unit(d) in FLOOR and unit(m) in FLOOR and FLOOR[unit(d)] > FLOOR[unit(m)]]
    assert not bad, "imports from a lower floor to a higher one:\n" + "\n".join(bad)


def test_cycle_finder():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
