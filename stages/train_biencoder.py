"""DVC stage ``train_biencoder@<row>``: the row's final runs (``code.biencoder.seeds``) with
its study's choices (``reports/tuned/code/<row>.json``), scored on the test repositories
against every body of the corpus.

Launched through ``python -m contrastlab.launch --nproc_per_node=N`` (torchrun); this stage
owns the process group: every rank trains (negatives gathered across ranks), rank 0 scores
and writes. Outputs: ``reports/metrics/code/<row>.json``, ``reports/data/code/<row>_ranks.csv``
and ``<row>_rank_curve.csv``, ``reports/plots/code_biencoder/<row>.csv`` (loss and
temperature per step), ``data/code/biencoder/<row>/`` (embeddings of every seed and the query
index of the first seed, ``python -m contrastlab.query --signature``).
"""

from pathlib import Path

from safetensors.torch import load_file

from _dvc import run

from contrastlab.biencoder.data import load_pairs
from contrastlab.biencoder.train import load_cache
from contrastlab.biencoder.outputs import write_row_outputs
from contrastlab.biencoder.run import run_row
from contrastlab.cli import stage_parser
from contrastlab.distributed import cleanup, init_distributed
from contrastlab.params import load_params
from contrastlab.tuning import read_tuned
from contrastlab.utils import set_cpu_threads


def main(argv: list[str] | None = None) -> int:
    ap = stage_parser(__doc__, "--row", "--functions", "--splits", "--cache", "--tuned", "--models",
                      "--metrics", "--data", "--plots")
    args = ap.parse_args(argv)
    code = load_params(args.params).code
    be = code.biencoder
    set_cpu_threads(be.threads)
    info = init_distributed(be.device)
    try:
        pairs = load_pairs(args.functions, args.splits)
        sig_inp, body_inp = load_cache(load_file(args.cache))
        tuned = Path(args.tuned) / f"{args.row}.json"
        choices = read_tuned(tuned) if tuned.exists() else {}  # no study run: the declared row
        res = run_row(be, args.row, pairs, sig_inp, body_inp, tuned=choices, k_max=code.evaluate.k_max)
        if info.is_main:
            m = write_row_outputs(be, args.row, res, pairs, bool(choices), metrics_dir=args.metrics,
                                  data_dir=args.data, plots_dir=args.plots, models_dir=args.models,
                                  k_max=code.evaluate.k_max)
            print(f"train_biencoder {args.row}: test R@10 {m['rank_at_10']:.2%} MRR {m['mrr']:.4f} "
                  f"(val {m['val_rank_at_10']:.2%}, {m['n_seeds']} seeds)")
    finally:
        cleanup()
    return 0


if __name__ == "__main__":
    run(main)
