"""DVC stage ``fetch_graph``: verify a Planetoid citation graph's raw files and prepare them.

``graph.dataset`` names the data set (``Cora`` | ``CiteSeer`` | ``PubMed``); its raw folder is
``graph.raw_dir`` (default ``data/vendor/planetoid/<dataset>``: ``SHA256SUMS`` plus ``raw/``
with the eight ``ind.<name>.*`` files). The files are checked against ``SHA256SUMS``, copied
to ``data/graph/planetoid/<dataset>/raw/`` (where ``torch_geometric.datasets.Planetoid``
reads them) and loaded once offline, which writes ``processed/``; the loaded graph must
match the public data set's statistics. With ``graph.source: download`` PyG's own loader
fetches the files instead (needs network).
"""

from _dvc import run

from contrastlab.cli import stage_parser
from contrastlab.data.planetoid import prepare_planetoid
from contrastlab.params import load_params


def main(argv: list[str] | None = None) -> int:
    ap = stage_parser(__doc__.split("\n\n")[0], "--out")
    ap.add_argument("--vendor", default=None, help="raw folder (default: graph.raw_dir)")
    args = ap.parse_args(argv)
    p = load_params(args.params).graph
    raw = args.vendor or p.raw_folder
    stats = prepare_planetoid(raw, args.out, p.dataset, source=p.source)
    print(f"{p.dataset}:", ", ".join(f"{k}={v}" for k, v in stats.items()))
    return 0


if __name__ == "__main__":
    run(main)
