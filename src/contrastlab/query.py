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
to each signature, with repository, path, qualified name and cosine similarity. Exit status
2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .cli import run_stage
from .errors import InputError

__all__ = ["main", "read_codes"]


def read_codes(path: str | Path) -> list[tuple[str, str]]:
    """``[(id, code)]`` from a ``.jsonl`` / ``.json`` file (module docstring).

    Raises:
        InputError: unreadable JSON, a record without ``code``/``source``, or no record.
        FileNotFoundError: the file is missing.
    """
    path = Path(path)
    text = path.read_text(encoding="utf-8")
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
        out.append((str(r.get("id", i)), code))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m contrastlab.query", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", required=True, help="index folder (write_index)")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--code", help="one Python file")
    src.add_argument("--codes", help=".jsonl or .json file of submissions")
    src.add_argument("--signature", action="append",
                     help="a function signature (repeatable): search a code index for its body")
    ap.add_argument("-k", type=int, default=5)
    ap.add_argument("--json", action="store_true", help="print JSON")
    args = ap.parse_args(argv)
    if args.k < 1:
        raise InputError("-k must be >= 1")
    if args.signature:
        return _signatures(args)
    from .finetune.index import search_codes

    if args.code:
        queries = [(args.code, Path(args.code).read_text(encoding="utf-8"))]
    else:
        queries = read_codes(args.codes)
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
