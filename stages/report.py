"""DVC stage ``report``: render every track's comparison into ``reports/``
(:func:`contrastlab.reporting.build.build_report`).

Writes ``reports/comparison.md`` (Markdown, figures linked) and ``reports/index.html``
(self-contained: figures embedded, opens offline), both from the same sections: first a
``Headlines`` section (each track's two-sentence headline: what won, by how much against the
strongest baseline, with its CI and test, and the take-away), then one section per track
whose metrics exist (its comparison figure, ``reports/figures/<track>_comparison.svg``/
``.png``, its headline and the legend of the short row labels first, everything else under
a collapsed "Details"), and last the ``Run`` section (git commit, params hash per
``params.yaml`` section, stage times). Every table's note says which params hash and git
commit produced it. Also writes ``reports/summary.json``: ``answer.<track>`` (best loss,
strongest baseline, their values, difference, p) first, then each track's headline metrics
(``report.headline``) under short names, the pipeline's only declared DVC metrics (``dvc
exp show``). Logs one MLflow run ``report · <dvc exp name or commit>`` in
``contrastlab-report`` with the headline metrics and the report (``index.html``,
``comparison.md``, figures) as artifacts, and each track's ``answer`` to that track's parent
run (docs/report.md).
"""

from _dvc import run

from contrastlab.cli import stage_parser
from contrastlab.params import load_params
from contrastlab.reporting.build import build_report


def main(argv: list[str] | None = None) -> int:
    ap = stage_parser(__doc__, "--out-dir")
    ap.add_argument("--metrics-dir", default=None,
                    help="the tracks' metrics JSON (default: <out-dir>/metrics)")
    ap.add_argument("--data-dir", default=None, help="per-item data: ranks, draws (default: <out-dir>/data)")
    ap.add_argument("--plots-dir", default=None,
                    help="curves and tuning histories (default: <out-dir>/plots)")
    ap.add_argument("--tuned-dir", default=None, help="the studies' choices (default: <out-dir>/tuned)")
    args = ap.parse_args(argv)
    build_report(load_params(args.params), args.out_dir, args.metrics_dir, data_dir=args.data_dir,
                 plots_dir=args.plots_dir, tuned_dir=args.tuned_dir)
    return 0


if __name__ == "__main__":
    run(main)
