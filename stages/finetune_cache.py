"""DVC stage ``finetune_cache``: token ids and frozen lower-layer states of every variant.

With ``finetune.layers = k`` the states after the ``L - k`` frozen blocks
(``output_hidden_states[L - k]``) are computed once per program and cached, so training runs
only the top ``k`` blocks (:mod:`contrastlab.finetune.encoder`). ``layers: all`` caches the
token ids only.

Output: ``data/finetune/cache/cache.safetensors`` (``ids``, ``lengths``, ``level``,
``states``; row order = ``variants.parquet``).
"""

from pathlib import Path

import pandas as pd

from _dvc import run

from contrastlab.cli import stage_parser
from contrastlab.finetune.run import build_cache, load_with_overrides
from contrastlab.io import save_safetensors
from contrastlab.utils import set_cpu_threads


def main(argv: list[str] | None = None) -> int:
    ap = stage_parser(__doc__, "--data", "--out")
    ap.add_argument("--override", action="append", default=[],
                    help="YAML merged over the params (e.g. presets/finetune-gpu.yaml)")
    args = ap.parse_args(argv)
    set_cpu_threads()
    p = load_with_overrides(args.params, args.override)
    df = pd.read_parquet(args.data)
    t = build_cache(p.finetune, df["text"].tolist())
    save_safetensors(Path(args.out), t)
    lens = t["lengths"].float()
    print(f"finetune_cache: {len(lens)} programs, level {int(t['level'][0])}, tokens mean "
          f"{lens.mean():.1f} max {int(lens.max())}")
    return 0


if __name__ == "__main__":
    run(main)
