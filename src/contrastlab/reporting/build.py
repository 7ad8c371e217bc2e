"""The whole report, as stage ``report`` builds it (callable from a notebook):
:func:`build_report`."""

from __future__ import annotations

import importlib
import json
import os
from pathlib import Path
from typing import Sequence

from ..io import write_text
from ..params import flatten
from ..timings import timings_dir
from . import TRACKS, Inputs, Section, render_markdown, style
from . import coverage_rule as rule
from .headline import attach, headline_metrics
from .html import render_html
from .provenance import (collect_provenance, metrics_summary, provenance_section, stamp_sections,
                         write_stage_times)

__all__ = ["build_report", "collect_sections", "track_run", "write_summary", "ANSWER"]


#: The top-level key of each track's headline numbers in ``summary.json`` (sorts first).
ANSWER = "answer"


def numeric(d: dict) -> dict:
    """The numeric entries of a flat dict (names and flags are no MLflow metrics)."""
    return {k: v for k, v in d.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def write_summary(path: Path, summary: dict) -> None:
    """``summary.json`` atomically: :data:`ANSWER` first, then the tracks; keys sorted below
    the top level (equal inputs, equal bytes)."""
    def srt(x):
        return {k: srt(x[k]) for k in sorted(x)} if isinstance(x, dict) else x

    top = {k: srt(summary[k]) for k in sorted(summary, key=lambda k: (k != ANSWER, k))}
    write_text(path, json.dumps(top, indent=2) + "\n")


def track_run(track: str, *, stage: str):
    """The MLflow run of this pipeline invocation in ``track``'s experiment (the parent of the
    track's variant runs, :func:`contrastlab.tracking.invocation_run`), where the report logs
    the track's :data:`ANSWER` numbers; yields a :class:`contrastlab.tracking.Tracker`."""
    from ..tracking import invocation_run

    return invocation_run(track, stage=stage)


def collect_sections(root: Inputs | Path, figures_dir: Path,
                     tracks: Sequence[str] = TRACKS) -> list[Section]:
    """Every available track's section from ``root`` (:class:`~contrastlab.reporting.Inputs`
    or a repository root); tracks whose module or metrics are missing are skipped. Every table
    then follows the coverage rule (:func:`contrastlab.reporting.coverage_rule.apply`)."""
    cov = rule.load(Inputs.of(root).metrics)
    sections = []
    for t in tracks:
        try:
            mod = importlib.import_module(f"contrastlab.reporting.{t}")
        except ModuleNotFoundError as e:
            if e.name == f"contrastlab.reporting.{t}":
                continue
            raise
        s = mod.build_section(root, figures_dir)
        if s is not None:
            for table in s.tables:  # the ° rule, for every track's tables (coverage_rule)
                rule.apply(table, s.track, cov)
            sections.append(s)
    return sections


def build_report(params, out_dir: str | Path, metrics_dir: str | Path | None = None, *,
                 data_dir: str | Path | None = None, plots_dir: str | Path | None = None,
                 tuned_dir: str | Path | None = None) -> dict:
    """Render every track's comparison into ``out_dir``: ``index.html`` and ``comparison.md``
    (figures under ``figures/``), ``summary.json`` (:data:`ANSWER` first, then the metrics of
    ``params.report.headline``) and the stage-time table to the timings folder. Logs one MLflow
    run in ``contrastlab-report`` and each track's answer to its parent run (:func:`track_run`).

    ``metrics_dir``, ``data_dir``, ``plots_dir``, ``tuned_dir``: the folders the sections read
    (default ``<out_dir>/metrics``, ...). Returns the summary written to ``summary.json``.
    """
    from ..tracking import variant_run
    from ..utils import git_commit, repo_root

    out = Path(out_dir)
    dirs = {"metrics": metrics_dir, "data": data_dir, "plots": plots_dir, "tuned": tuned_dir}
    inputs = Inputs(Path(repo_root()), **{k: Path(v) if v else out / k for k, v in dirs.items()})
    figures = out / "figures"
    figures.mkdir(parents=True, exist_ok=True)
    with variant_run("report", "report", params.report, stage="report") as tracker:
        prov = collect_provenance(params, git_commit(inputs.root))
        style.apply()
        sections, heads = _sections(inputs, figures, prov)
        _write_pages(sections, params, prov, out)
        summary = {**({ANSWER: heads} if heads else {}),
                   **metrics_summary(inputs.metrics, params.report.headline)}
        write_summary(out / "summary.json", summary)
        _log(tracker, summary, out)
        if (times := write_stage_times(timings_dir(), prov.header())) is not None:
            tracker.log_artifact(times)
        tracker.log_artifact(figures, "figures")
    return summary


def _sections(inputs: Inputs, figures: Path, prov) -> tuple[list[Section], dict]:
    """The page's sections (headlines first, provenance last) and ``{track: headline numbers}``."""
    sections = collect_sections(inputs, figures)
    for s in sections:
        attach(s, figures)
    heads = {s.track: {**headline_metrics(s.comparison), "title": s.title}
             for s in sections if s.comparison is not None and headline_metrics(s.comparison)}
    stamp_sections(sections, prov)
    notes = [f"**{s.title}.** {s.headline}" for s in sections if s.headline]
    lead = [Section("headlines", "Headlines", notes=notes)] if notes else []
    return [*lead, *sections, provenance_section(prov)], heads


def _write_pages(sections: list[Section], params, prov, out: Path) -> None:
    """``index.html`` (first: a missing figure stops before anything is replaced), then
    ``comparison.md``."""
    digits = params.report.digits
    for s in sections:
        for t in s.tables:  # bare floats with report.digits decimals
            t.rows = [[f"{v:.{digits}f}" if isinstance(v, float) else v for v in row]
                      for row in t.rows]
        for f in [*s.lead, *s.figures]:
            f.path = Path(os.path.relpath(Path(f.path).resolve(), out.resolve()))
    page = render_html(sections, title=params.report.title, header=prov.header(), base_dir=out)
    write_text(out / "index.html", page)
    write_text(out / "comparison.md", render_markdown(sections, prov.header()))


def _log(tracker, summary: dict, out: Path) -> None:
    tracker.log_metrics(numeric(flatten(summary)))
    for track, h in summary.get(ANSWER, {}).items():
        with track_run(track, stage="report") as parent:
            parent.log_metrics({f"{ANSWER}.{k}": v for k, v in numeric(h).items()})
            parent.set_tags({f"{ANSWER}.{k}": v for k, v in h.items() if isinstance(v, str)})
    for f in ("index.html", "comparison.md"):
        tracker.log_artifact(out / f)
