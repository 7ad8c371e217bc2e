"""Nearest indexed submissions of new code: ``python -m contrastlab.query``.

Usage::

    python -m contrastlab.query --index data/finetune/index --code my_solution.py -k 5
    python -m contrastlab.query --index data/finetune/index --codes submissions.jsonl -k 5
    python -m contrastlab.query --index data/code/biencoder/biencoder_infonce/index \
        --signature "def f(a, b)" -k 5

``--codes`` reads many submissions: a ``.jsonl`` file (one JSON object per line with
``code`` or ``source``, and optionally ``id``) or a ``.json`` list of such objects. For each
submission the ``k`` nearest indexed submissions are printed with their problem, tier
(PASS / PARTIAL / FAIL) and cosine similarity; ``--json`` prints the same as JSON.

The index folder is written by the ``finetune_evaluate`` stage
(:func:`contrastlab.finetune.index.write_index`). ``--signature`` (repeatable) searches a
fine-tuned code index instead (``train_biencoder@<row>``,
:func:`contrastlab.biencoder.index.write_code_index`): the ``k`` bodies of the corpus nearest
to each signature, with repository, path, qualified name and cosine similarity. Bad input (a
missing, empty, binary, non-UTF-8 or oversized file, a directory where a file belongs, code
that is not valid Python, an index folder that is not one, ``-k`` not an integer in
1..10000) ends with one line, ``error: ...``, and exit status 2.
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

__all__ = ["main", "read_codes"]


def read_codes(path: str | Path) -> list[tuple[str, str]]:
    """``[(id, code)]`` from a ``.jsonl`` / ``.json`` file (module docstring).

    Raises:
        InputError: the file is missing, empty, binary, not UTF-8 or too large
            (:func:`contrastlab.cli.read_text_file`), unreadable JSON, a record without
            ``code``/``source``, a code that is empty or not valid Python, or no record.
    """
    path = Path(path)
    text = read_text_file(path, "--codes file")
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
        python_source(code, f"{path}: record {i}")
        out.append((str(r.get("id", i)), code))
    return out


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
        raise argparse.ArgumentTypeError(f"{p}: no such index folder (written by the "
                                         "finetune_evaluate stage)")
    if not p.is_dir():
        raise argparse.ArgumentTypeError(f"{p}: not a folder (--index takes the index folder)")
    return value


def main(argv: list[str] | None = None) -> int:
    ap = ArgParser(prog="python -m contrastlab.query", description=__doc__,
                   formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", required=True, type=_index_dir, help="index folder (write_index)")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--code", type=text_file("--code file"), help="one Python file")
    src.add_argument("--codes", type=text_file("--codes file"),
                     help=".jsonl or .json file of submissions")
    src.add_argument("--signature", action="append",
                     help="a function signature (repeatable): search a code index for its body")
    ap.add_argument("-k", type=_k, default=5, help=f"neighbours per query (1..{MAX_K})")
    ap.add_argument("--json", action="store_true", help="print JSON")
    args = ap.parse_args(argv)
    if args.signature:
        return _signatures(args)
    if args.code:
        text = read_text_file(args.code, "--code file")
        queries = [(args.code, python_source(text, args.code))]
    else:
        queries = read_codes(args.codes)
    from .finetune.index import search_codes

    res = search_codes(args.index, [c for _, c in queries], args.k)
    if args.json:
        print(json.dumps([{"query": q, "neighbours": r} for (q, _), r in zip(queries, res)], indent=1))
        return 0
    for (qid, _), hits in zip(queries, res):
        print(f"query {qid}:")
        for h in hits:
            print(f"  {h['rank']:>2}. {h['similarity']:.4f}  problem {h['problem']:<6} "
                  f"tier {h['tier']:<7} id {h['id']}")
    return 0


def _signatures(args) -> int:
    from .biencoder.index import search_signatures

    if any(not q.strip() for q in args.signature):
        raise InputError("--signature is empty")
    res = search_signatures(args.index, args.signature, args.k)
    if args.json:
        print(json.dumps([{"query": q, "neighbours": r} for q, r in zip(args.signature, res)], indent=1))
        return 0
    for q, hits in zip(args.signature, res):
        print(f"signature {q!r}:")
        for h in hits:
            print(f"  {h['rank']:>2}. {h['similarity']:.4f}  {h.get('repo', '?')}:{h.get('path', '?')} "
                  f"{h.get('qualname', '')}  {h['signature'].splitlines()[-1] if h['signature'] else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(run_stage(main))
