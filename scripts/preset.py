"""Apply a preset (an override file of a few lines) to ``params.yaml`` in place; not a DVC
stage, one command:

    python scripts/preset.py presets/code-seed-scale.yaml    # Qwen2.5-Coder-3B L18, 8 GPUs
    python scripts/preset.py presets/code-seed-corpus.yaml   # MiniLM, corpus >= 49,631 bodies
    git checkout params.yaml                                # back to the defaults

Only the values the preset sets change; every other line of params.yaml, comments included,
stays as it is. The result is validated before params.yaml is atomically replaced
(:mod:`contrastlab.params.presets`).
"""

import argparse
import sys
from pathlib import Path

from contrastlab.cli import ArgParser, params_file, run_stage
from contrastlab.io import atomic_path
from contrastlab.params import load_params
from contrastlab.params.presets import apply_to_text, read_override


def main(argv: list[str] | None = None) -> int:
    ap = ArgParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("preset", type=params_file,
                    help="an override file, e.g. presets/code-seed-scale.yaml")
    ap.add_argument("--params", default="params.yaml", type=params_file)
    args = ap.parse_args(argv)
    over, replace = read_override(args.preset)
    params = Path(args.params)
    new = apply_to_text(params.read_text(encoding="utf-8"), over, replace)
    with atomic_path(params, suffix=".yaml") as tmp:
        tmp.write_text(new, encoding="utf-8")
        load_params(tmp)  # validate before replacing params.yaml
    print(f"{params}: {', '.join(over)} set from {args.preset}")
    return 0


if __name__ == "__main__":
    sys.exit(run_stage(main))
