"""DVC stage ``tune_finetune@<row>``: temperature and learning rates of one fine-tuning row
chosen on the validation submissions with the shared protocol
(:func:`contrastlab.finetune.tune.run_tuning`).

Every trained row (losses, BCE, the frozen + head baseline) gets ``finetune.tune.trials``
finished trials (Hyperband pruning after each seed); trial 0 is the row's declared
configuration; a trial trains one run per seed of ``finetune.tune.seeds`` and scores the
mean best validation retrieval mAP. ``frozen`` and ``tfidf`` have nothing to tune (a note is
written). Writes ``reports/tuned/finetune/<row>.json`` (read by ``finetune_encoder@<row>``),
the trial history ``reports/plots/tune/finetune/<row>.csv`` and the study journal
``reports/tune/finetune/<row>/journal.log`` (resumes after an interruption).
"""

from _dvc import run

from contrastlab.cli import stage_parser
from contrastlab.finetune.run import load_with_overrides
from contrastlab.finetune.tune import UNTRAINED_ROWS, run_tuning
from contrastlab.utils import set_cpu_threads


def main(argv: list[str] | None = None) -> int:
    import pandas as pd

    ap = stage_parser(__doc__, "--data", "--cache", "--tuned", "--history", "--journal")
    ap.add_argument("--variant", required=True)
    ap.add_argument("--override", action="append", default=[],
                    help="YAML merged over the params (e.g. presets/finetune-gpu.yaml)")
    args = ap.parse_args(argv)
    set_cpu_threads()
    ft = load_with_overrides(args.params, args.override).finetune
    cache = None
    if args.variant not in UNTRAINED_ROWS:
        from safetensors.torch import load_file

        cache = load_file(args.cache)
    res = run_tuning(ft, args.variant, pd.read_parquet(args.data), cache, args.tuned,
                     args.history, args.journal)
    if res is not None:
        print(f"tune_finetune@{args.variant}: best val mAP {res.best_value:.4f} with {res.best_params}")
    return 0


if __name__ == "__main__":
    run(main)
