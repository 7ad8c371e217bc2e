"""Function extraction with ``ast`` only (repository code is never imported or run).

One record per ``def`` / ``async def`` (methods and nested functions too): repository, path,
qualified name (``Class.method``, ``outer.<locals>.inner``), signature (decorators and the
header up to the colon, plus the docstring when ``include_docstring``), dedented body
without the docstring, 1-based inclusive line span, hash of the whitespace-normalised body.

Skipped and counted per reason (``skipped_paths``: ``{reason: ["<repo>/<path>", ...]}``):
``not_regular_file``, ``os_error``, ``undecodable`` (PEP 263 / BOM via
``tokenize.detect_encoding``, else UTF-8), ``unparsable``, ``test_file`` (``skip_tests``),
``empty_body``, ``too_short``, ``too_long`` and ``duplicate_body`` (the first in (repository,
path, line) order kept; deduplicated before splitting, so the split cannot leak a body).
"""

from __future__ import annotations

import ast
import hashlib
import io
import re
import stat
import textwrap
import tokenize
from collections import Counter, defaultdict
from itertools import accumulate
from pathlib import Path
from typing import Any, Iterator

import numpy as np
from ..progress import tqdm

__all__ = ["normalise_ws", "body_hash", "extract_file", "extract_repositories", "read_source"]

_WS = re.compile(r"\s+")


def normalise_ws(text: str) -> str:
    """Collapse every whitespace run to one space and strip the ends."""
    return _WS.sub(" ", text).strip()


def body_hash(body: str) -> str:
    """SHA-1 (hex) of the whitespace-normalised body: equal for bodies that differ only in spacing."""
    return hashlib.sha1(normalise_ws(body).encode("utf-8")).hexdigest()


def _offsets(source: str) -> list[int]:
    """Character offset of the start of each line (index 0 = line 1)."""
    return [0, *accumulate(len(line) for line in source.splitlines(keepends=True))]


def _is_docstring(stmt: ast.stmt) -> bool:
    return (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
            and isinstance(stmt.value.value, str))


def _char(offs: list[int], lines: list[str], lineno: int, col_byte: int) -> int:
    """Character offset of (1-based line, UTF-8 byte column) as given by ``ast``."""
    line = lines[lineno - 1]
    col = len(line.encode("utf-8")[:col_byte].decode("utf-8", errors="ignore"))
    return offs[lineno - 1] + col


#: Nodes whose children may include statements (and so function definitions).
_HOLDS_STATEMENTS = (ast.stmt, ast.excepthandler, ast.match_case)


def extract_file(source: str, include_docstring: bool = False) -> Iterator[dict[str, Any]]:
    """Yield one record per function in ``source`` (no length filtering here).

    Args:
        source: Python source text.
        include_docstring: put the docstring with the signature (else it is dropped).

    Yields:
        dicts with ``qualname, signature, body, lineno, end_lineno`` (``body`` is ``""``
        when the function has nothing but a docstring).

    Raises:
        SyntaxError, ValueError: ``source`` does not parse.
    """
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    offs = _offsets(source)

    def visit(node: ast.AST, prefix: str) -> Iterator[dict[str, Any]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                qual = f"{prefix}{child.name}"
                yield _record(child, qual)
                yield from visit(child, f"{qual}.<locals>.")
            elif isinstance(child, ast.ClassDef):
                yield from visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, _HOLDS_STATEMENTS):
                # a def can only sit in a statement list; expressions (most of the tree)
                # never hold one, so they are not walked
                yield from visit(child, prefix)

    def _record(fn: ast.FunctionDef | ast.AsyncFunctionDef, qual: str) -> dict[str, Any]:
        start_line = min([fn.lineno] + [d.lineno for d in fn.decorator_list])
        start = offs[start_line - 1]  # whole first line; dedented below
        end = _char(offs, lines, fn.end_lineno, fn.end_col_offset)
        doc = fn.body[0] if _is_docstring(fn.body[0]) else None
        rest = fn.body[1:] if doc is not None else list(fn.body)
        if doc is not None and include_docstring:
            sig_end = _char(offs, lines, doc.end_lineno, doc.end_col_offset)
        else:
            first = doc if doc is not None else rest[0]
            sig_end = _char(offs, lines, first.lineno, first.col_offset)
        sig = textwrap.dedent(source[start:sig_end]).rstrip()
        body = ""
        if rest:
            body_start = _char(offs, lines, rest[0].lineno, rest[0].col_offset)
            lead = source[offs[rest[0].lineno - 1]:body_start]
            # keep the first statement's indentation so dedent keeps relative indentation;
            # a one-line def (``def f(): return 1``) has its header replaced by spaces
            lead = lead if not lead.strip() else " " * len(lead)
            body = textwrap.dedent(lead + source[body_start:end]).strip("\n")
        return {"qualname": qual, "signature": sig, "body": body,
                "lineno": start_line, "end_lineno": fn.end_lineno}

    yield from visit(tree, "")


def read_source(path: Path) -> tuple[str | None, str]:
    """Read one Python file as text, honouring its declared encoding.

    Returns:
        ``(text, "")`` or ``(None, reason)`` with reason ``not_regular_file`` (directory,
        symbolic link, device, FIFO: never followed or opened), ``os_error`` (cannot be
        read) or ``undecodable`` (bad coding line, unknown codec, or bytes invalid in the
        declared encoding; UTF-8 when none is declared, PEP 263).
    """
    try:
        st = path.lstat()
    except OSError:
        return None, "os_error"
    if not stat.S_ISREG(st.st_mode):
        return None, "not_regular_file"
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:
        return None, "os_error"
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        return data.decode(encoding), ""
    except (SyntaxError, UnicodeDecodeError, LookupError):
        return None, "undecodable"


def _is_test_path(rel: str) -> bool:
    parts = rel.split("/")
    return any(p in {"tests", "test", "testing"} for p in parts[:-1]) or \
        parts[-1].startswith("test_") or parts[-1] == "conftest.py"


def _scan_repository(root: Path, opts: dict[str, Any]) -> list[tuple]:
    """Read and parse one repository's files (no cross-repository state): one event per file,
    in sorted path order: ``("skip", reason, rel)`` or ``("file", rel, records)`` where each
    record carries its length-filter ``reason`` (``None``: a candidate, with ``body_hash``).
    :func:`extract_repositories` has checked that ``root`` is a folder."""
    events: list[tuple] = []
    for f in sorted(root.rglob("*.py")):
        rel = f.relative_to(root).as_posix()
        why = ""
        if opts["skip_tests"] and _is_test_path(rel):
            why = "test_file"
        else:
            source, why = read_source(f)
        if not why:
            try:
                recs = list(extract_file(source, opts["include_docstring"]))
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                why = "unparsable"
        if why:
            events.append(("skip", why, rel))
            continue
        for r in recs:
            body = r["body"]
            n_lines = body.count("\n") + 1 if body else 0
            if not body.strip():
                r["reason"] = "empty_body"
            elif n_lines < opts["min_body_lines"]:
                r["reason"] = "too_short"
            elif n_lines > opts["max_body_lines"] or len(body) > opts["max_body_chars"]:
                r["reason"] = "too_long"
            else:
                r["reason"] = None
                r["body_hash"] = body_hash(body)
            if r["reason"] is not None:  # only candidates carry their text back
                r["signature"] = r["body"] = ""
        events.append(("file", rel, recs))
    return events


def extract_repositories(repos_dir: Path, names: list[str], *, include_docstring: bool = False,
                         min_body_lines: int = 3, max_body_lines: int = 40,
                         max_body_chars: int = 2500, skip_tests: bool = True,
                         max_functions_per_repo: int | None = None,
                         seed: int = 42, workers: int = 1) -> tuple["Any", dict[str, Any]]:
    """Extract, filter and deduplicate the functions of fetched repositories.

    Args:
        repos_dir: folder with one subfolder per repository (``fetch_repos`` output).
        names: repository names, processed in sorted order.
        include_docstring, min_body_lines, max_body_lines, max_body_chars, skip_tests:
            see the module docstring.
        max_functions_per_repo: keep at most this many per repository (a seeded sample,
            taken after deduplication, kept in file order).
        seed: seed of that sample.
        workers: repositories read and parsed at once in forked processes (the
            deduplication across repositories stays sequential, in sorted order, so the
            result does not depend on ``workers``).

    Returns:
        ``(df, stats)``: a pandas DataFrame with columns ``id, repo, path, qualname,
        signature, body, lineno, end_lineno, body_hash`` (``id`` = row number) and a stats
        dict (per-repository counts, counts per skip reason, and ``skipped_paths``: the
        skipped files per file-level reason, as ``<repo>/<path>`` in sorted order).

    Raises:
        FileNotFoundError: a repository folder is missing.
    """
    import pandas as pd

    opts = {"include_docstring": include_docstring, "min_body_lines": min_body_lines,
            "max_body_lines": max_body_lines, "max_body_chars": max_body_chars,
            "skip_tests": skip_tests}
    names = sorted(names)
    for name in names:  # fail before any work
        if not (repos_dir / name).is_dir():
            raise FileNotFoundError(f"{repos_dir / name}: repository folder missing "
                                    "(run fetch_repos)")
    rows: list[dict[str, Any]] = []
    skips: Counter = Counter()
    skipped_paths: dict[str, list[str]] = defaultdict(list)
    per_repo: dict[str, Counter] = defaultdict(Counter)
    seen: dict[str, str] = {}

    def scan(name: str) -> list[tuple]:
        return _scan_repository(repos_dir / name, opts)

    if workers <= 1 or len(names) <= 1:
        scans = map(scan, names)
    else:  # imported here: torch (via utils) only when workers fork
        from ..utils import fork_map

        scans = fork_map(scan, names, workers)
    for name, events in zip(names, tqdm(scans, total=len(names), desc="extract functions",
                                        unit="repo")):
        kept: list[dict[str, Any]] = []
        for ev in events:
            per_repo[name]["files"] += 1
            if ev[0] == "skip":
                _, why, rel = ev
                skips[why] += 1
                per_repo[name][why] += 1
                skipped_paths[why].append(f"{name}/{rel}")
                continue
            _, rel, recs = ev
            for r in recs:
                per_repo[name]["functions_seen"] += 1
                reason = r.pop("reason")
                if reason is None:
                    h = r["body_hash"]
                    if h in seen:
                        reason = "duplicate_body" if seen[h] == name else "duplicate_body_across_repos"
                    else:
                        seen[h] = name
                if reason:
                    skips[reason] += 1
                    per_repo[name][reason] += 1
                    continue
                kept.append({"repo": name, "path": rel, **r})
        if max_functions_per_repo is not None and len(kept) > max_functions_per_repo:
            digest = int(hashlib.sha1(f"{seed}:{name}".encode()).hexdigest()[:8], 16)
            rng = np.random.default_rng(digest)
            pick = np.sort(rng.choice(len(kept), size=max_functions_per_repo, replace=False))
            skips["over_repo_cap"] += len(kept) - max_functions_per_repo
            per_repo[name]["over_repo_cap"] += len(kept) - max_functions_per_repo
            kept = [kept[i] for i in pick]
        per_repo[name]["kept"] = len(kept)
        rows.extend(kept)
    cols = ["repo", "path", "qualname", "signature", "body", "lineno", "end_lineno", "body_hash"]
    df = pd.DataFrame(rows, columns=cols)
    df.insert(0, "id", np.arange(len(df), dtype=np.int64))
    df = df.astype({"lineno": np.int64, "end_lineno": np.int64})
    stats = {
        "functions": int(len(df)),
        "repositories": int(df["repo"].nunique()) if len(df) else 0,
        "skipped": dict(sorted(skips.items())),
        "skipped_paths": {k: sorted(v) for k, v in sorted(skipped_paths.items())},
        "per_repository": {k: dict(sorted(v.items())) for k, v in sorted(per_repo.items())},
    }
    return df, stats
