"""DVC stage ``tune_biencoder@<row>``: the row's study on the validation repositories
(``code.biencoder.tune``: the same trials and seeds for every row; trial 0 = the declared
row; objective: mean validation Rank@10 against the whole corpus).

Outputs: ``reports/tuned/code/<row>.json``, ``reports/plots/tune/code/<row>.csv``,
``reports/tune/code/<row>/`` (the journal; an interrupted study resumes).
"""

from safetensors.torch import load_file

from _dvc import run

from contrastlab.biencoder.data import load_pairs
from contrastlab.biencoder.train import load_cache
from contrastlab.biencoder.run import run_tuning
from contrastlab.cli import stage_parser
from contrastlab.params import load_params
from contrastlab.utils import set_cpu_threads


def main(argv: list[str] | None = None) -> int:
    ap = stage_parser(__doc__, "--row", "--functions", "--splits", "--cache", "--tuned", "--history",
                      "--journal")
    args = ap.parse_args(argv)
    be = load_params(args.params).code.biencoder
    set_cpu_threads(be.threads)
    pairs = load_pairs(args.functions, args.splits)
    sig_inp, body_inp = load_cache(load_file(args.cache))
    res = run_tuning(be, args.row, pairs, sig_inp, body_inp, args.tuned, args.history, args.journal)
    print(f"tune_biencoder {args.row}: best {res.best_params} val R@10 {res.best_value:.2%}")
    return 0


if __name__ == "__main__":
    run(main)
