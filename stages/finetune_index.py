"""DVC stage ``finetune_index``: the query index of the fine-tuned encoder.

Trains the first seed of the role ``finetune.index_variant`` (``src/contrastlab/losses/
variants.yaml``, ``roles:``) with its ``tune_finetune`` choices, as
``finetune_encoder@<variant>`` trains it, and writes the exact FAISS inner-product index of
that encoder's embeddings of every submission with the encoder itself
(:func:`contrastlab.finetune.final.run_index_variant`); logs the encoder to MLflow as a
``sentence_transformers`` model. Query it with ``python -m contrastlab.query --index
data/finetune/index --code f.py``.

Output: ``data/finetune/index/`` (``index.faiss``, ``meta.json``, ``model/``; DVC cache).
``--override FILE`` (repeatable) merges YAML over the params (the GPU route's preset).
"""

from _dvc import run

from contrastlab.cli import stage_parser
from contrastlab.finetune.final import run_index_variant
from contrastlab.utils import set_cpu_threads


def main(argv: list[str] | None = None) -> int:
    ap = stage_parser(__doc__, "--data", "--cache", "--index")
    ap.add_argument("--tuned-dir", default=None,
                    help="the rows' tune_finetune choices (default: none, the params as they are)")
    ap.add_argument("--override", action="append", default=[],
                    help="YAML merged over the params (e.g. presets/finetune-gpu.yaml)")
    args = ap.parse_args(argv)
    set_cpu_threads()
    uri = run_index_variant(args.params, args.data, args.cache, args.tuned_dir, args.index,
                            args.override)
    print(f"finetune_index: {args.index}" + (f", MLflow model {uri}" if uri else ""))
    return 0


if __name__ == "__main__":
    run(main)
