"""DVC stage ``biencoder_cache``: token ids and frozen lower-layer states of every signature
and body for the bi-encoder (``code.biencoder``).

With ``layers = k`` the states after the ``L - k`` frozen blocks are computed once here
(float16), so that every study trial and every seed of every row trains and evaluates only
the top ``k`` blocks (:mod:`contrastlab.biencoder.data`). ``layers: all`` caches token ids only.

Output: ``data/code/biencoder/cache.safetensors`` (row order = function id).
"""

from pathlib import Path

from _dvc import run

from contrastlab.biencoder.data import build_cache, load_pairs
from contrastlab.cli import stage_parser
from contrastlab.io import save_safetensors
from contrastlab.params import load_params
from contrastlab.utils import set_cpu_threads


def main(argv: list[str] | None = None) -> int:
    ap = stage_parser(__doc__, "--functions", "--splits", "--out")
    args = ap.parse_args(argv)
    be = load_params(args.params).code.biencoder
    set_cpu_threads(be.threads)
    pairs = load_pairs(args.functions, args.splits)
    t = build_cache(be, pairs.signatures, pairs.bodies)
    save_safetensors(Path(args.out), t)
    print(f"biencoder_cache: {len(pairs.ids)} functions, level {int(t['level'][0])}, tokens "
          f"{int(t['sig_lengths'].sum())} signature + {int(t['body_lengths'].sum())} body")
    return 0


if __name__ == "__main__":
    run(main)
