"""Your own code submissions as problem x correctness-tier rows (the HumanEval builder's format).

Inputs (:func:`read_submissions`; user documentation and the full rules: docs/multilabel.md,
"Your own submissions"; an example in ``examples/submissions/``):

- a CSV or Parquet file with string columns ``problem`` and ``code``, optionally ``tier``
  (``PASS``/``PARTIAL``/``FAIL``: used as given, nothing executed) and ``submission`` (an id;
  default ``row<n>``, rows counted from 1 after the header);
- a folder ``<folder>/<problem>/<name>.py`` (id ``<problem>/<name>.py``; folders starting
  with ``.`` or ``__`` skipped); always tiered.

Rows without a tier run against every assertion of ``<tests>/<problem>.py`` (``check(candidate)``
plus a string ``ENTRY_POINT``; :func:`read_tests`) in :mod:`contrastlab.sandbox`, as HumanEval
variants do. Output rows have the keys :data:`ROW_KEYS` (``status`` ``"labelled"`` for rows used
as given); :func:`label_matrix` gives the multi-hot ``problem_<id>`` + ``tier_<tier>`` labels.
Every malformed input raises :class:`contrastlab.errors.InputError` naming the file (and row).
"""

from __future__ import annotations

import ast
import copy
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..sandbox import TIERS, _mentions, run_sandboxed
from .humaneval import split_assertions

__all__ = ["ROW_KEYS", "label_matrix", "labelled_rows", "load_submissions", "read_submissions",
           "read_tests", "tier_submissions"]

#: Keys of every output row, in order (HumanEval's record keys + ``submission``).
ROW_KEYS = ("task_id", "problem", "variant", "mutation", "source", "tier", "n_assertions",
            "n_passed", "passed", "errors", "status", "submission")
_NAME = re.compile(r"[A-Za-z0-9_.-]+")


def _table(path: Path):
    import pandas as pd

    suffix = path.suffix.lower()
    if suffix not in (".csv", ".parquet", ".pq"):
        raise InputError(f"{path}: submissions must be .csv, .parquet or a folder")
    try:
        if suffix == ".csv":
            return pd.read_csv(path, dtype=str, keep_default_na=False)
        return pd.read_parquet(path)
    except Exception as e:  # the reader's own message says what is wrong
        raise InputError(f"{path}: cannot read submissions: {type(e).__name__}: {e}") from None


def read_submissions(path: str | Path) -> list[dict]:
    """Submission rows from a CSV/Parquet file or a folder (layouts in the module docstring).

    Returns:
        ``[{"problem": str, "code": str, "tier": str | None, "submission": str}, ...]`` in
        file order (folders: problems and files in sorted name order). ``tier`` is ``None``
        for rows to be tiered.

    Raises:
        InputError: missing path, unreadable file, missing ``problem``/``code`` column, a row
            with an empty or malformed problem name, empty code, a non-string cell, or (with a
            ``tier`` column) a tier not in PASS/PARTIAL/FAIL; a folder without submissions.
            The message names the file and the row (1-based, header not counted).
    """
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: no such submissions file or folder")
    if path.is_dir():
        rows = []
        for sub in sorted(p for p in path.iterdir()
                          if p.is_dir() and not p.name.startswith((".", "__"))):
            if not _NAME.fullmatch(sub.name):
                raise InputError(f"{sub}: problem folder name must match [A-Za-z0-9_.-]+")
            for f in sorted(sub.glob("*.py")):
                try:
                    code = f.read_text(encoding="utf-8")
                except (OSError, UnicodeDecodeError) as e:
                    raise InputError(f"{f}: cannot read submission: {e}") from None
                if not code.strip():
                    raise InputError(f"{f}: empty submission")
                rows.append({"problem": sub.name, "code": code, "tier": None,
                             "submission": f"{sub.name}/{f.name}"})
        if not rows:
            raise InputError(f"{path}: no submissions (expected <problem>/<name>.py files)")
        return rows
    df = _table(path)
    miss = [c for c in ("problem", "code") if c not in df.columns]
    if miss:
        raise InputError(f"{path}: missing column(s) {miss} (columns: {list(df.columns)[:10]})")
    if len(df) == 0:
        raise InputError(f"{path}: no rows")
    has_tier = "tier" in df.columns
    has_id = "submission" in df.columns
    rows = []
    for i, rec in enumerate(df.to_dict("records"), start=1):
        where = f"{path}: row {i}"
        cols = ("problem", "code") + ("tier",) * has_tier + ("submission",) * has_id
        for col in cols:
            v = rec[col]
            if v is None or (isinstance(v, float) and v != v):
                raise InputError(f"{where}: column {col!r} is missing (empty cell)")
            if not isinstance(v, str):
                raise InputError(f"{where}: column {col!r} holds {type(rec[col]).__name__} "
                                 f"{rec[col]!r}, not text")
        problem = rec["problem"].strip()
        if not _NAME.fullmatch(problem):
            raise InputError(f"{where}: problem {rec['problem']!r} is empty or not of the "
                             "form [A-Za-z0-9_.-]+")
        if not rec["code"].strip():
            raise InputError(f"{where}: empty code (problem {problem!r})")
        tier = None
        if has_tier:
            tier = rec["tier"].strip()
            if tier not in TIERS:
                raise InputError(f"{where}: tier {rec['tier']!r} is not one of {list(TIERS)}")
        sid = rec["submission"].strip() if has_id and rec["submission"].strip() else f"row{i}"
        rows.append({"problem": problem, "code": rec["code"], "tier": tier, "submission": sid})
    return rows


def read_tests(tests_dir: str | Path, problems: list[str]) -> dict[str, tuple[list[str], str]]:
    """Each problem's assertions and entry point from ``<tests_dir>/<problem>.py``.

    Nothing is executed: ``ENTRY_POINT`` is read from the syntax tree and ``check`` is split
    into one program per assertion (:func:`contrastlab.data.humaneval.split_assertions`),
    in order; an assert after a candidate call that does not call it itself (it tests the
    program's effects) is kept as a program of all the statements before it (their asserts as
    expressions) and itself; ``assert <constant>`` is dropped.

    Returns:
        ``{problem: (assertion programs, entry point)}``.

    Raises:
        InputError: a missing test file, one that does not parse, has no ``check`` with an
            assertion on ``candidate``, has an assert with no candidate call in or before it
            (line named), or no string ``ENTRY_POINT``; names the file.
    """
    tests_dir = Path(tests_dir)
    out = {}
    for prob in dict.fromkeys(problems):
        f = tests_dir / f"{prob}.py"
        if not f.is_file():
            raise InputError(f"{f}: no test file for problem {prob!r}")
        try:
            src = f.read_text(encoding="utf-8")
            tree = ast.parse(src)
        except (OSError, UnicodeDecodeError, SyntaxError) as e:
            raise InputError(f"{f}: cannot read the test: {type(e).__name__}: {e}") from None
        entry = [s.value.value for s in tree.body if isinstance(s, ast.Assign)
                 and any(isinstance(t, ast.Name) and t.id == "ENTRY_POINT" for t in s.targets)
                 and isinstance(s.value, ast.Constant) and isinstance(s.value.value, str)]
        if not entry or not entry[-1].isidentifier():
            raise InputError(f"{f}: needs a module-level ENTRY_POINT = \"<function name>\"")
        try:
            split = iter(split_assertions(src))
        except ValueError as e:
            raise InputError(f"{f}: {e}") from None
        chk = next(s for s in tree.body if isinstance(s, ast.FunctionDef) and s.name == "check")
        units = []
        for i, st in enumerate(chk.body):
            if not any(isinstance(n, ast.Assert) for n in ast.walk(st)) or (
                    isinstance(st, ast.Assert) and isinstance(st.test, ast.Constant)):
                continue
            if _mentions(st, "candidate"):
                units.append(next(split))
            elif not any(_mentions(p, "candidate") for p in chk.body[:i]):
                raise InputError(f"{f}: line {st.lineno}: assert tests nothing of the program "
                                 "(no candidate call in or before it); remove it or call "
                                 "candidate first")
            else:  # the program's effects: everything before it, then the assert
                fn = copy.deepcopy(chk)
                fn.body[i + 1:] = []
                fn.body[:i] = [_Unassert().visit(p) for p in fn.body[:i]]
                mod = ast.Module([s for s in tree.body if s is not chk] + [fn], [])
                units.append(ast.unparse(ast.fix_missing_locations(mod)))
        if not units:
            raise InputError(f"{f}: check(candidate) has no assert that calls candidate")
        out[prob] = (units, entry[-1])
    return out


class _Unassert(ast.NodeTransformer):
    def visit_Assert(self, node: ast.Assert) -> ast.AST:
        return ast.Expr(node.test)


def _row(problem: str, variant: int, code: str, tier: str, submission: str, *,
         passed: list[bool], errors: list[str], status: str) -> dict:
    return {"task_id": problem, "problem": problem, "variant": variant, "mutation": "submission",
            "source": code, "tier": tier, "n_assertions": len(passed),
            "n_passed": int(sum(passed)), "passed": passed, "errors": errors, "status": status,
            "submission": submission}


def _variants(rows: list[dict]) -> list[int]:
    seen: dict[str, int] = {}
    out = []
    for r in rows:
        out.append(seen.get(r["problem"], 0))
        seen[r["problem"]] = out[-1] + 1
    return out


def labelled_rows(rows: list[dict]) -> list[dict]:
    """Rows of :func:`read_submissions` that carry a tier, as output rows (nothing executed:
    ``n_assertions`` 0, ``passed``/``errors`` empty, ``status`` ``"labelled"``).

    Raises:
        InputError: a row without a tier.
    """
    out = []
    for r, v in zip(rows, _variants(rows)):
        if r["tier"] is None:
            raise InputError(f"submission {r['submission']!r}: no tier, so it must be tiered")
        out.append(_row(r["problem"], v, r["code"], r["tier"], r["submission"], passed=[],
                        errors=[], status="labelled"))
    return out


def tier_submissions(rows: list[dict], tests_dir: str | Path, *, workers: int = 1,
                     **sandbox) -> list[dict]:
    """Tier every row in the sandbox against its problem's test (ignores a given ``tier``).

    Args:
        rows: from :func:`read_submissions`.
        tests_dir: folder of ``<problem>.py`` test files (:func:`read_tests`).
        workers: submissions run in parallel (threads; each assertion is one sandboxed process).
        **sandbox: limits passed to :func:`contrastlab.sandbox.run_sandboxed` (``timeout_s``,
            ``cpu_s``, ``memory_mb``, ``mode``, ...).

    Returns:
        Output rows (keys :data:`ROW_KEYS`), in input order.

    Raises:
        InputError: a test file is missing or malformed (see :func:`read_tests`).
        contrastlab.sandbox.SandboxUnavailable: bubblewrap cannot start and ``mode`` is not
            ``"process"``.
    """
    tests = read_tests(tests_dir, [r["problem"] for r in rows])

    def one(r):
        units, entry = tests[r["problem"]]
        return run_sandboxed(r["code"], units, entry, **sandbox)

    with ThreadPoolExecutor(max(1, int(workers))) as pool:
        results = list(pool.map(one, rows))
    return [_row(r["problem"], v, r["code"], res.tier, r["submission"], passed=res.passed,
                 errors=res.errors, status=res.status)
            for r, v, res in zip(rows, _variants(rows), results)]


def load_submissions(path: str | Path, tests_dir: str | Path | None = None, *,
                     workers: int = 1, **sandbox) -> list[dict]:
    """Rows of ``path`` with tiers: given tiers are used as they are (no execution), the other
    rows are tiered in the sandbox against ``tests_dir`` (:func:`tier_submissions`).

    Returns:
        Output rows (keys :data:`ROW_KEYS`), in input order.

    Raises:
        InputError: malformed input (:func:`read_submissions`, :func:`read_tests`), or rows to
            tier and no ``tests_dir``.
        contrastlab.sandbox.SandboxUnavailable: see :func:`tier_submissions`.
    """
    rows = read_submissions(path)
    if all(r["tier"] is not None for r in rows):
        return labelled_rows(rows)
    if tests_dir is None:
        raise InputError(f"{path}: rows without a tier need a folder of test files (tests_dir)")
    return tier_submissions(rows, tests_dir, workers=workers, **sandbox)


def label_matrix(rows: list[dict]) -> tuple[np.ndarray, list[str]]:
    """Multi-hot labels ``problem_<id>`` (in order of first appearance) + ``tier_PASS``,
    ``tier_PARTIAL``, ``tier_FAIL``, as ``stages/build_multilabel.py`` builds for HumanEval.

    Returns:
        ``(y, names)``: ``y`` uint8 of shape (len(rows), n_problems + 3), exactly two ones per
        row; ``names`` the column names.

    Raises:
        InputError: a row whose tier is not one of PASS/PARTIAL/FAIL.
    """
    problems = list(dict.fromkeys(r["problem"] for r in rows))
    names = [f"problem_{p}" for p in problems] + [f"tier_{t}" for t in TIERS]
    col = {n: i for i, n in enumerate(names)}
    y = np.zeros((len(rows), len(names)), dtype=np.uint8)
    for i, r in enumerate(rows):
        if r["tier"] not in TIERS:
            raise InputError(f"rows[{i}] (submission {r.get('submission')!r}): tier "
                             f"{r['tier']!r} is not one of {list(TIERS)}")
        y[i, col[f"problem_{r['problem']}"]] = 1
        y[i, col[f"tier_{r['tier']}"]] = 1
    return y, names
