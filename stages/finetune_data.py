"""DVC stage ``finetune_data``: HumanEval variants tiered in the sandbox, with the two splits.

Variants (canonical + AST mutants) and tiers come from :mod:`contrastlab.data.humaneval`
with the sandbox limits and variant counts of ``multilabel.humaneval`` (the tiers are those
of the multi-label track's HumanEval build); splits from
:func:`contrastlab.finetune.data.make_splits` with ``finetune.data``.

Outputs: ``data/finetune/humaneval/variants.parquet`` (``id``, ``problem``, ``tier``,
``mutation``, ``variant``, ``source``, ``text`` = the source the encoder reads, ``split``)
and ``reports/data/finetune/humaneval_dataset.json`` (counts per split and tier).
"""

from pathlib import Path

from _dvc import run

from contrastlab.cli import stage_parser
from contrastlab.finetune.build import build_variants
from contrastlab.io import write_json, write_parquet
from contrastlab.params import load_params


def main(argv: list[str] | None = None) -> int:
    ap = stage_parser(__doc__, "--out", "--report")
    args = ap.parse_args(argv)
    p = load_params(args.params)
    df, stats = build_variants(p.finetune, p.multilabel.humaneval)
    write_parquet(Path(args.out) / "variants.parquet", df)
    write_json(args.report, stats)
    print(f"finetune_data: {len(df)} variants, splits {stats['splits']}")
    return 0


if __name__ == "__main__":
    run(main)
