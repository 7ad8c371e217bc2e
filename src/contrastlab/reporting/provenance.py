"""Provenance for the comparison report: which params and commit produced each table
(:func:`collect_provenance`, :func:`stamp_sections`), and how long each stage took
(:func:`stage_timings`, written beside the timings, out of every hashed output).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from itertools import groupby
from operator import itemgetter
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from ..invocation import current
from ..io import write_text
from ..params import Params, params_hash
from ..timings import TIMINGS_DIR
from . import Section, Table, markdown_table

__all__ = ["Provenance", "collect_provenance", "stamp_sections", "stage_timings",
           "provenance_section", "write_stage_times", "metrics_summary", "STAGE_TIMES"]

#: File name of the stage-time table inside the timings folder (not a DVC output).
STAGE_TIMES = "stage_times.md"


@dataclass
class Provenance:
    """What produced a report: git commit, per-section params hashes, DVC experiment name."""

    git_commit: str
    params_hashes: dict[str, str] = field(default_factory=dict)
    dvc_exp_name: str | None = None

    def table_note(self, track: str) -> str:
        """One sentence for a table's note: ``Params `graph` hash `…`, git commit `…`.``"""
        h = self.params_hashes.get(track)
        parts = [f"params `{track}` hash `{h}`" if h else "params: none",
                 f"git commit `{self.git_commit}`",
                 *([f"DVC experiment `{self.dvc_exp_name}`"] if self.dvc_exp_name else [])]
        return "Produced by " + ", ".join(parts) + "."

    def header(self) -> str:
        """One line for the top of the report."""
        exp = f" in DVC experiment `{self.dvc_exp_name}`" if self.dvc_exp_name else ""
        return f"Generated from git commit `{self.git_commit}`{exp}."


def collect_provenance(params: Params, commit: str) -> Provenance:
    """Provenance of a report built from ``params`` at git ``commit``: the
    :func:`contrastlab.params.params_hash` of each section, the DVC experiment's name."""
    hashes = {name: params_hash(getattr(params, name)) for name in type(params).model_fields}
    return Provenance(commit, hashes, current().experiment)


def stamp_sections(sections: Sequence[Section], prov: Provenance) -> None:
    """Append the provenance sentence to every table's note and one line to each section (in place)."""
    for s in sections:
        note = prov.table_note(s.track)
        line = f"Params hash of `{s.track}`: `{prov.params_hashes.get(s.track, 'none')}`."
        if line not in s.notes:
            s.notes.insert(0, line)
        for t in s.tables:  # unless the table states its own (e.g. a preset's table)
            if "Produced by " not in (t.note or ""):
                t.note = f"{t.note or ''} {note}".strip()


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _runs(metrics_dir: Path, tracks: Sequence[str] | None = None) -> Iterator[tuple[str, str, dict]]:
    """``(track, name, metrics)`` of every ``metrics_dir/<track>/**/<name>.json`` (tracks sorted
    unless given; an unreadable file or one that is no JSON object reads as ``{}``)."""
    metrics_dir = Path(metrics_dir)
    if not metrics_dir.is_dir():
        return
    names = sorted(p.name for p in metrics_dir.iterdir() if p.is_dir()) if tracks is None else tracks
    for tr in names:
        d = metrics_dir / tr
        for f in sorted(d.rglob("*.json")) if d.is_dir() else ():
            try:
                data: Any = json.loads(f.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                data = None
            yield tr, f.relative_to(d).with_suffix("").as_posix(), data if isinstance(data, dict) else {}


def metrics_summary(metrics_dir: Path, headline: Mapping[str, Sequence[str]] | None = None
                    ) -> dict[str, dict[str, dict[str, float]]]:
    """The headline metrics of ``metrics_dir/<track>/**/<variant>.json`` as
    ``{track: {variant: {metric: value}}}`` (``summary.json``, the only declared DVC metrics).

    ``headline``: per track, the metric names to keep (a track not named is left out);
    ``None`` keeps every numeric metric but wall times (``time_s``). Unreadable files and
    non-numeric values are skipped; multi-label files (``<dataset>_<variant>.json``) are
    averaged over the data sets.
    """
    out: dict[str, dict[str, dict[str, float]]] = {}
    for tr, name, data in _runs(metrics_dir):
        if headline is None:
            vals = {k: v for k, v in data.items() if _is_num(v) and "time_s" not in k}
        elif tr in headline:
            vals = {k: data[k] for k in headline[tr] if k in data and _is_num(data[k])}
        else:
            continue
        if vals:
            out.setdefault(tr, {})[name] = vals
    if "multilabel" in out:  # <dataset>_<variant> files: one column per variant, mean over data sets
        per: dict[str, dict[str, list[float]]] = {}
        for name, vals in out["multilabel"].items():
            variant = name.split("_", 1)[-1]
            for k, v in vals.items():
                per.setdefault(variant, {}).setdefault(k, []).append(float(v))
        out["multilabel"] = {v: {k: round(sum(xs) / len(xs), 6) for k, xs in m.items()}
                             for v, m in per.items()}
    return out


def stage_timings(metrics_dir: Path, tracks: Sequence[str] | None = None) -> Table | None:
    """Wall time [s] of every stage that wrote ``time_s`` into
    ``metrics_dir/<track>/**/*.json`` (``tracks``: these folders only), a total row per track;
    ``None`` when no file has a numeric ``time_s``."""
    rows: list[list[Any]] = []
    grand = 0.0
    for tr, runs in groupby(_runs(metrics_dir, tracks), key=itemgetter(0)):
        times = [(name, d["time_s"]) for _, name, d in runs if _is_num(d.get("time_s"))]
        rows += [[tr, name, f"{t:.1f}"] for name, t in times]
        total = sum(t for _, t in times)
        if len(times) > 1:
            rows.append([tr, f"total ({len(times)} stages)", f"{total:.1f}"])
        grand += total
    if not rows:
        return None
    return Table("Stage wall time", ["track", "variant", "time_s [s]"], rows,
                 note=f"`time_s` (wall seconds) from each stage's timings file "
                      f"`reports/timings/<track>/<name>.json` (not DVC-tracked: it changes on every "
                      f"run); sum over all stages {grand:.1f} s.")


def provenance_section(prov: Provenance) -> Section:
    """The last section, ``Run: provenance``: the params hash of every ``params.yaml`` section
    (wall times change on every run: they go to :func:`write_stage_times`' file)."""
    notes = ["Params hashes (`contrastlab.params.params_hash` of each `params.yaml` section): "
             + ", ".join(f"`{k}` `{v}`" for k, v in prov.params_hashes.items()) + ".",
             f"Stage wall times: `{TIMINGS_DIR}/{STAGE_TIMES}` (written with this page, "
             "not hashed by DVC and ignored by git: they change on every run)."]
    return Section(track="run", title="Run: provenance", notes=notes)


def write_stage_times(timings: Path, header: str = "") -> Path | None:
    """Write :func:`stage_timings` of the timings folder as Markdown to
    ``<timings>/stage_times.md``; ``None`` (nothing written) without any ``time_s``."""
    table = stage_timings(timings)
    if table is None:
        return None
    path = Path(timings) / STAGE_TIMES
    head = f"# {table.title}\n\n" + (f"{header}\n\n" if header else "")
    write_text(path, head + markdown_table(table) + "\n")
    return path
