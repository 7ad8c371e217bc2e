"""DVC stage ``default_code@<variant>``: the loss's declared configuration (params.yaml's lr
and initial temperature, trial 0 of its study) trained on the final seeds and tested, so the
report can set default against tuned on validation and on test. A variant without a search
space (the from-scratch ablations) has nothing to compare: its final run is its default, and
the stage writes a JSON that says so (:func:`contrastlab.training.code_final.run_default`).
Writes ``reports/metrics/code/default/<variant>.json`` and
``reports/data/code/default/<variant>_ranks.csv`` (both in git). The checkpoints are not
outputs (nothing reads them; a fresh clone then need not retrain the six variants to restore
them): they are trained in a temporary folder and deleted, unless ``--models DIR`` keeps them
under ``DIR/<variant>``.
"""

from pathlib import Path

from _dvc import run

from contrastlab.cli import stage_parser
from contrastlab.io import write_csv, write_json
from contrastlab.params import load_params
from contrastlab.training.code_final import run_default


def main(argv: list[str] | None = None) -> int:
    ap = stage_parser(__doc__, "--splits", "--teacher", "--metrics", "--ranks")
    ap.add_argument("--variant", required=True)
    ap.add_argument("--models", default=None, metavar="PATH",
                    help="keep the checkpoints under PATH/<variant> (default: not kept)")
    args = ap.parse_args(argv)
    out, ranks = run_default(load_params(args.params).code, args.variant, args.splits,
                             args.teacher, args.models)
    write_json(Path(args.metrics) / f"{args.variant}.json", out)
    write_csv(Path(args.ranks) / f"{args.variant}_ranks.csv", ranks)
    if out["searched"]:
        print(f"default_code@{args.variant}: lr {out['lr']:g}, τ0 {out['temperature']:g}: val "
              f"R@10 {out['val_rank_at_10']:.2%}, test R@10 {out['rank_at_10']:.2%}")
    return 0


if __name__ == "__main__":
    run(main)
