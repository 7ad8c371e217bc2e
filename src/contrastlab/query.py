"""Nearest indexed submissions of new code: ``python -m contrastlab.query``.

Usage::

    python -m contrastlab.query --index data/finetune/index --code my_solution.py -k 5
    python -m contrastlab.query --index data/finetune/index --codes submissions.jsonl -k 5
    python -m contrastlab.query --index data/code/biencoder/biencoder_infonce/index \
        --signature "def f(a, b)" -k 5

``--codes`` reads a ``.jsonl`` file (one JSON object per line with ``code`` or ``source``,
optionally ``id``) or a ``.json`` list of such objects; files may start with a UTF-8 BOM. Each
submission's ``k`` nearest indexed submissions are printed with problem, tier and cosine
similarity (``--json``: as JSON). Each submission is parsed and stripped of its docstrings in
a forked child under limits (:data:`PARSE_SECONDS`, :data:`PARSE_MEMORY`, :data:`PARSE_FRAMES`).
The index folder is written by ``finetune_index``
(:func:`contrastlab.finetune.index.write_index`).

``--signature`` (repeatable) searches a code-retrieval index (``train_biencoder@<row>``,
:func:`contrastlab.biencoder.index.write_code_index`): the ``k`` nearest bodies with repository,
path, qualified name and cosine, ranked by default by ``hybrid_biencoder``'s ``fusion_<row>``,
``w z(bm25) + (1 - w) z(cosine)`` over the corpus (:func:`search_fused`; ``k1``, ``b``, ``w``
from ``reports/metrics/code/hybrids_biencoder.json``, bodies from ``--functions``);
``--dense`` ranks by the cosine alone. Bad input ends with one line, ``error: ...``, exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .cli import ArgParser, python_source, read_text_file, run_stage, text_file
from .errors import InputError

#: Largest ``-k``.
MAX_K = 10_000
#: Parsing limits of a submission (:func:`check_sources`): wall seconds, bytes of memory beyond
#: what the child starts with, and frames of Python's recursion limit the child leaves unused
#: (so the encoder's own docstring stripping, a few frames deeper, never meets the limit).
PARSE_SECONDS, PARSE_MEMORY, PARSE_FRAMES = 10.0, 512 << 20, 100
#: The repository (source checkout): its committed code metrics and the pipeline's functions.
ROOT = Path(__file__).resolve().parents[2]
METRICS, FUNCTIONS = ROOT / "reports/metrics/code", ROOT / "data/code/functions.parquet"

__all__ = ["main", "read_codes", "check_sources", "search_fused"]


def _read(path: str | Path, what: str) -> str:
    """:func:`contrastlab.cli.read_text_file` less a UTF-8 byte-order mark (Python runs such files)."""
    return read_text_file(path, what).removeprefix("\ufeff")


def read_codes(path: str | Path) -> list[tuple[str, str]]:
    """``[(id, code)]`` from a ``.jsonl`` / ``.json`` file (module docstring).

    Raises:
        InputError: the file is missing, empty, binary, not UTF-8 or too large
            (:func:`contrastlab.cli.read_text_file`), unreadable JSON, a record without
            ``code``/``source``, a code that is empty or does not parse
            (:func:`check_sources`), or no record.
    """
    path = Path(path)
    text = _read(path, "--codes file")
    try:
        if path.suffix == ".jsonl":
            recs = [json.loads(line) for line in text.splitlines() if line.strip()]
        else:
            recs = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"{path}: not valid JSON: {e}") from None
    if not isinstance(recs, list) or not recs:
        raise InputError(f"{path}: expected a non-empty list of submissions")
    out = []
    for i, r in enumerate(recs):
        code = r.get("code", r.get("source")) if isinstance(r, dict) else None
        if not isinstance(code, str):
            raise InputError(f"{path}: record {i} has no 'code' (or 'source') string")
        if not code.strip():
            raise InputError(f"{path}: record {i}: the code is empty")
        out.append((str(r.get("id", i)), code))
    check_sources(path, [(f"{path}: record {i}", c) for i, (_, c) in enumerate(out)])
    return out


def check_sources(where: str | Path, sources: list[tuple[str, str]]) -> None:
    """Each ``(name, code)`` parses as Python and unparses without its docstrings (what the
    index's encoder reads, :func:`contrastlab.finetune.index.prepare_code`), checked in a forked
    child under the ``PARSE_*`` limits, so no input can exhaust this process's stack, time or
    memory (Linux: the memory limit is ``RLIMIT_AS``).

    Raises:
        InputError: the first code that does not parse (its line), or that is too large or
            deeply nested to parse within the limits; or the child ran past ``PARSE_SECONDS``
            (named by ``where``) or died.
    """
    import multiprocessing as mp

    from .finetune.data import strip_docstrings  # imported here, so the child imports nothing

    def child(conn):
        import resource

        sys.setrecursionlimit(sys.getrecursionlimit() - PARSE_FRAMES)
        cap = int(Path("/proc/self/statm").read_text().split()[0]) * resource.getpagesize() + PARSE_MEMORY
        hard = resource.getrlimit(resource.RLIMIT_AS)[1]
        resource.setrlimit(resource.RLIMIT_AS, (cap if hard < 0 else min(cap, hard), hard))
        for name, code in sources:
            try:
                try:
                    strip_docstrings(code)
                except (InputError, ValueError):  # a syntax error: the message names its line
                    python_source(code, name)
            except InputError as e:
                return conn.send(str(e))
            except (RecursionError, MemoryError) as e:
                return conn.send(f"{name}: too large or too deeply nested to parse ({type(e).__name__}; "
                                 f"the limits: {PARSE_MEMORY / 2**20:g} MiB, Python's recursion limit "
                                 f"less {PARSE_FRAMES} frames)")
        conn.send(None)

    recv, send = mp.Pipe(duplex=False)
    proc = mp.get_context("fork").Process(target=child, args=(send,))
    proc.start()
    send.close()
    try:
        msg = recv.recv() if recv.poll(PARSE_SECONDS) else (
            f"{where}: parsing took more than {PARSE_SECONDS:g} s (the limit of a submission)")
    except EOFError:  # the child died without a word
        msg = ""
    finally:
        proc.kill()
        proc.join()
    if msg is not None:
        raise InputError(msg or f"{where}: the parser died (exit status {proc.exitcode}): the code "
                         "is too large or too deeply nested")


def _metric(name: str, *keys):
    """``METRICS/<name>.json[keys...]``, the committed value (None when absent)."""
    try:
        v = json.loads((METRICS / f"{name}.json").read_text())
        for k in keys:
            v = v[k]
        return v
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _signature_help() -> str:
    """``--signature``'s help: the rows it reproduces and their test Rank@10, read now."""
    rows = [f"{n[7:]} {m['rank_at_10']:.1%} fused (w={m['weight']:g}, BM25 k1={m['bm25_k1']:g}, "
            f"b={m['bm25_b']:g}), {_metric(n[7:], 'rank_at_10') or float('nan'):.1%} --dense"
            for n, m in (_metric("hybrids_biencoder", "hybrids") or {}).items() if n.startswith("fusion_")]
    return ("a function signature (repeatable): the nearest bodies of a code-retrieval index, ranked "
            "by the pipeline's best retriever for the index's row, hybrid_biencoder's fusion_<row>, "
            "w z(BM25) + (1 - w) z(cosine) over the corpus (the bodies from --functions), or with "
            "--dense by the bi-encoder's cosine alone; test Rank@10 of each row, mean over its seeds "
            f"(the index holds the first), from {METRICS}: "
            + ("; ".join(rows) or "none committed")).replace("%", "%%")


def _index_meta(folder: str | Path) -> dict:
    """``meta.json`` of an index folder."""
    try:
        return json.loads((Path(folder) / "meta.json").read_text())
    except (OSError, ValueError):
        raise InputError(f"{folder}: no readable meta.json (not an index folder written by "
                         "finetune_index or train_biencoder)") from None


def search_fused(folder: str | Path, signatures: list[str], k: int, functions: str | Path,
                 fusion: dict) -> list[list[dict]]:
    """The ``k`` bodies of a code-retrieval index with the best ``w z(bm25) + (1 - w) z(cosine)``
    over the whole corpus, each signature scored as :func:`contrastlab.evaluation.code_hybrids.
    fuse_with_bm25` scores a query: ``BM25Scorer(bodies, k1, b).scores`` fused by ``fuse_scores``
    with the cosine of every body (:func:`contrastlab.biencoder.index.search_signatures`).

    Args:
        functions: the ``functions.parquet`` the index was built from (the bodies, by id).
        fusion: a ``fusion_<row>`` entry of ``hybrids_biencoder.json`` (``weight``,
            ``bm25_k1``, ``bm25_b``).

    Returns:
        Per signature, ``k`` hits of ``search_signatures`` (``similarity``: the cosine) with
        their fused ``score``, best first.

    Raises:
        InputError: ``functions`` is missing or does not hold the index's functions.
    """
    import numpy as np
    import pandas as pd

    from .biencoder.index import search_signatures
    from .models.code_baselines import BM25Scorer, fuse_scores

    rows = _index_meta(folder)["rows"]
    if not Path(functions).is_file():
        raise InputError(f"{functions}: no such functions file (extract_functions' output: the "
                         "bodies BM25 ranks); pass --functions, or --dense for the bi-encoder alone")
    fn = pd.read_parquet(functions, columns=["id", "signature", "body"]).drop_duplicates("id")
    fn = fn.set_index("id").reindex([r["id"] for r in rows])
    if fn["signature"].tolist() != [r["signature"] for r in rows]:
        raise InputError(f"{functions}: not the functions this index was built from")
    pos = {r["id"]: j for j, r in enumerate(rows)}
    dense = np.zeros((len(signatures), len(rows)), np.float32)
    for i, hits in enumerate(search_signatures(folder, signatures, len(rows))):
        dense[i, [pos[h["id"]] for h in hits]] = [h["similarity"] for h in hits]
    lex = BM25Scorer(fn["body"].tolist(), fusion["bm25_k1"], fusion["bm25_b"]).scores(signatures)
    fused = fuse_scores(lex, dense, fusion["weight"])
    top = np.argsort(-fused, 1, kind="stable")[:, :k]
    return [[{"rank": r + 1, "score": float(fused[i, j]), "similarity": float(dense[i, j]), **rows[j]}
             for r, j in enumerate(t)] for i, t in enumerate(top)]


def _k(value: str) -> int:
    """argparse ``type=`` of ``-k``: an integer in 1..MAX_K."""
    try:
        k = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"-k must be an integer, not {value!r}") from None
    if not 1 <= k <= MAX_K:
        raise argparse.ArgumentTypeError(f"-k must be between 1 and {MAX_K}, not {k}")
    return k


def _index_dir(value: str) -> str:
    """argparse ``type=`` of ``--index``: an existing folder."""
    p = Path(value)
    if not p.exists():
        raise argparse.ArgumentTypeError(f"{p}: no such index folder (written by "
                                         "finetune_index or train_biencoder)")
    if not p.is_dir():
        raise argparse.ArgumentTypeError(f"{p}: not a folder (--index takes the index folder)")
    return value


def main(argv: list[str] | None = None) -> int:
    ap = ArgParser(prog="python -m contrastlab.query", description=__doc__,
                   formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", required=True, type=_index_dir,
                    help="index folder: finetune_index's (submissions: --code, --codes) or "
                         "train_biencoder@<row>'s (code retrieval: --signature)")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--code", type=text_file("--code file"),
                     help="one Python file (a submissions index, finetune_index)")
    src.add_argument("--codes", type=text_file("--codes file"),
                     help=".jsonl or .json file of submissions (a submissions index)")
    src.add_argument("--signature", action="append", help=_signature_help())
    ap.add_argument("--dense", action="store_true",
                    help="with --signature: rank by the bi-encoder's cosine alone (train_biencoder@<row>)")
    ap.add_argument("--functions", default=str(FUNCTIONS),
                    help="with --signature: the functions parquet of the index (default: %(default)s)")
    ap.add_argument("-k", type=_k, default=5, help=f"neighbours per query (1..{MAX_K})")
    ap.add_argument("--json", action="store_true", help="print JSON")
    args = ap.parse_args(argv)
    if args.dense and not args.signature:
        ap.error("--dense goes with --signature (a code-retrieval index)")
    if args.signature:
        if any(not q.strip() for q in args.signature):
            raise InputError("--signature is empty")
        queries = [(q, q) for q in args.signature]
    elif args.code:
        queries = [(args.code, _read(args.code, "--code file"))]
        check_sources(args.code, queries)
    else:
        queries = read_codes(args.codes)
    meta = _index_meta(args.index)
    row = meta.get("row", "?")
    if (meta.get("kind") == "code") != bool(args.signature):
        raise InputError("this index is " + (
            f"a code-retrieval index (train_biencoder@{row}): use --signature" if not args.signature
            else f"a submissions index (finetune_index, variant {meta.get('variant', '?')}): "
                 "use --code or --codes"))
    if not args.signature:
        from .finetune.index import search_codes

        res = search_codes(args.index, [c for _, c in queries], args.k)
    elif args.dense:
        from .biencoder.index import search_signatures

        res, how = search_signatures(args.index, args.signature, args.k), f"cosine of {row}"
    else:
        fusion = _metric("hybrids_biencoder", "hybrids", f"fusion_{row}")
        if fusion is None:
            raise InputError(f"{METRICS / 'hybrids_biencoder.json'}: no fusion_{row} (run "
                             "hybrid_biencoder); --dense ranks by the bi-encoder alone")
        res = search_fused(args.index, args.signature, args.k, args.functions, fusion)
        how = f"fusion_{row} score, w={fusion['weight']:g}"
    if args.json:
        print(json.dumps([{"query": q, "neighbours": r} for (q, _), r in zip(queries, res)], indent=1))
        return 0
    for (q, _), hits in zip(queries, res):
        print(f"signature {q!r} ({how}):" if args.signature else f"query {q}:")
        for h in hits:
            print(f"  {h['rank']:>2}. {h.get('score', h['similarity']):7.4f}  " + (
                f"{h.get('repo', '?')}:{h.get('path', '?')} {h.get('qualname', '')}  "
                f"{h['signature'].splitlines()[-1] if h['signature'] else ''}" if args.signature else
                f"problem {h['problem']:<6} tier {h['tier']:<7} id {h['id']}"))
    return 0


if __name__ == "__main__":
    sys.exit(run_stage(main))
