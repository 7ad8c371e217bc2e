"""DVC stage ``report``: render every track's comparison into ``reports/``.

Writes ``reports/comparison.md`` (Markdown, figures linked) and ``reports/index.html``
(self-contained: figures embedded, opens offline), both from the same sections: first a
``Headlines`` section (each track's headline: the best variant with its CI, the variants
tied with it, the gap to the strongest baseline), then one section per track whose metrics
exist, and last the ``Run`` section (git commit, params hash per ``params.yaml`` section,
stage times). Every table's note says which params hash and git commit produced it. Also writes
``reports/summary.json``: each track's headline metrics (``report.headline``) under short
names, the pipeline's only declared DVC metrics (``dvc exp show``). Logs one MLflow run
``report · <dvc exp name or commit>`` in ``contrastlab-report`` with the headline metrics
and the report (``index.html``, ``comparison.md``, figures) as artifacts.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from contrastlab.cli import run_stage, stage_parser
from contrastlab.io import write_json, write_text
from contrastlab.params import load_params
from contrastlab.reporting import collect_sections, headline_section, render_markdown
from contrastlab.reporting import style
from contrastlab.reporting.html import render_html
from contrastlab.reporting.provenance import (collect_provenance, metrics_summary,
                                              provenance_section, stage_timings,
                                              stamp_sections)
from contrastlab.params import flatten
from contrastlab.timings import timings_dir
from contrastlab.tracking import variant_run
from contrastlab.utils import git_commit, repo_root


def main(argv: list[str] | None = None) -> int:
    ap = stage_parser(__doc__, "--out-dir")
    ap.add_argument("--metrics-dir", default=None,
                    help="where the tracks' metrics JSON are (default: <out-dir>/metrics)")
    args = ap.parse_args(argv)
    params = load_params(args.params)
    root = repo_root()
    out = Path(args.out_dir)
    metrics = Path(args.metrics_dir) if args.metrics_dir else out / "metrics"
    figures = out / "figures"
    figures.mkdir(parents=True, exist_ok=True)
    with variant_run("report", "report", params.report, stage="report") as tracker:
        prov = collect_provenance(params, git_commit(root))
        style.apply()  # page-width figures, legible fonts (reporting/style.py)
        sections = collect_sections(root, figures)
        stamp_sections(sections, prov)
        # The answer first (one headline per track), provenance and stage times at the end.
        sections = [*headline_section(sections), *sections,
                    provenance_section(prov, stage_timings(timings_dir()))]
        digits = params.report.digits
        for s in sections:
            for t in s.tables:  # bare floats shown with report.digits decimals in both files
                t.rows = [[f"{v:.{digits}f}" if isinstance(v, float) else v for v in row]
                          for row in t.rows]
            for f in s.figures:
                f.path = Path(os.path.relpath(Path(f.path).resolve(), out.resolve()))
        # HTML first: a missing figure stops the stage before anything is replaced.
        page = render_html(sections, title=params.report.title, header=prov.header(),
                           base_dir=out)
        write_text(out / "index.html", page)
        write_text(out / "comparison.md", render_markdown(sections, prov.header()))
        summary = metrics_summary(metrics, params.report.headline)
        write_json(out / "summary.json", summary)
        tracker.log_metrics(flatten(summary))
        for f in ("index.html", "comparison.md"):
            tracker.log_artifact(out / f)
        tracker.log_artifact(figures, "figures")
    return 0


if __name__ == "__main__":
    sys.exit(run_stage(main))
