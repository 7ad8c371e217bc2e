"""DVC stage ``multilabel_weights@<dataset>``: the Sim-Dis weights K^s K^d by relation R1..R5.

Measured on the training labels (:func:`contrastlab.evaluation.simdis_relations.relation_weights`:
relation types R1..R5, Eq. 8-12; weights, Eq. 14-15). Writes a histogram table
``reports/data/multilabel/<dataset>_simdis_weights.csv`` (relation, bin_left, bin_right,
count) and per-relation summaries ``<dataset>_simdis_relations.json``.
"""

from pathlib import Path

from _dvc import run

from contrastlab.cli import stage_parser
from contrastlab.evaluation.simdis_relations import relation_weights
from contrastlab.io import write_csv, write_json


def main(argv: list[str] | None = None) -> int:
    ap = stage_parser(__doc__, "--data-dir", "--out-dir")
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--max-samples", type=int, default=1500)
    ap.add_argument("--bins", type=int, default=20)
    args = ap.parse_args(argv)
    from safetensors.torch import load_file

    path = Path(args.data_dir) / args.dataset / "data.safetensors"
    if not path.exists():
        raise FileNotFoundError(f"{path}: missing (run build_multilabel@{args.dataset} first)")
    table, summary = relation_weights(load_file(str(path))["y_train"], args.max_samples, args.bins)
    write_csv(Path(args.out_dir) / f"{args.dataset}_simdis_weights.csv", table)
    write_json(Path(args.out_dir) / f"{args.dataset}_simdis_relations.json", summary)
    print(f"{args.dataset}: " + ", ".join(f"R{r} {summary[f'R{r}_fraction']:.3f}" for r in range(1, 6)))
    return 0


if __name__ == "__main__":
    run(main)
