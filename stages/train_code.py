"""DVC stage ``train_code@<variant>``: SigPredictor on frozen teacher states.

Launched as ``python -m torch.distributed.run --standalone --nproc_per_node=N
stages/train_code.py --variant V`` (N = ``code.train.nproc``; plain ``python`` works too).
This stage owns the process group (initialised here, destroyed at the end). It trains one
model per seed of ``code.train.seeds`` (``code.train.workers`` of them at once in forked CPU
workers; see :func:`contrastlab.training.code.train_seeds`) with the variant's hyperparameters: the tuned
choices of ``--tuned DIR``/``<V>.json`` when given (``tune_code@<V>`` writes
``reports/tuned/code/<V>.json``), else the variant's ``lr`` / ``temperature``, else ``code.train``'s. Writes
``data/code/models/<V>/seed<k>.safetensors`` + ``summary.json`` and the per-epoch history of every
seed ``reports/plots/code/<V>.csv``. MLflow (rank 0 only): the variant's one run
(``contrastlab.tracking.variant_run``, shared with ``evaluate_code@<V>``, which adds the test
metrics) holding the variant's settings, the teacher states as its dataset, one nested run
per seed with the per-epoch curves, the checkpoints as logged models and the history CSV.
"""

from _dvc import run

from contrastlab.cli import stage_parser
from contrastlab.params import load_params
from contrastlab.training.code_final import run_final


def main(argv: list[str] | None = None) -> int:
    ap = stage_parser(__doc__, "--splits", "--teacher", "--models", "--plots")
    ap.add_argument("--variant", required=True)
    ap.add_argument("--tuned", default=None,
                    help="folder of tune_code's <variant>.json to train with the tuned choices")
    args = ap.parse_args(argv)
    run_final(load_params(args.params).code, args.variant, args.tuned, args.splits, args.teacher, args.models, args.plots)
    return 0


if __name__ == "__main__":
    run(main)
