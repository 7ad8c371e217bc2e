"""Comparison report: each track contributes a :class:`Section` of tables and figures.

A track module ``contrastlab.reporting.<track>`` exposes
``build_section(inputs: Inputs | Path, figures_dir: Path) -> Section | None`` (``None`` when
the track has not run); :mod:`.build` imports the track modules by name, this package none.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from .render import render_template

TRACKS: list[str] = ["graph", "code", "multilabel", "finetune"]
#: The name tables of the labels, citations and reference numbers (DVC deps, stage_deps.py).
DATA_DEPS = ("../losses/registry.yaml", "../losses/variants.yaml")


@dataclass(frozen=True)
class Inputs:
    """Where the report reads: the folders the ``report`` stage's command names (its DVC deps)
    and the repository ``root`` (``params.yaml``, ``presets/``)."""

    root: Path
    metrics: Path
    data: Path
    plots: Path
    tuned: Path

    @classmethod
    def of(cls, where: "Inputs | Path | str") -> "Inputs":
        """``where`` itself, or the standard layout under the repository root ``where``."""
        if isinstance(where, Inputs):
            return where
        rep = Path(where) / "reports"
        return cls(rep.parent, rep / "metrics", rep / "data", rep / "plots", rep / "tuned")


def load_params_of(root: Path):
    """The params of ``root/params.yaml`` (the project's own when ``root`` has none)."""
    from ..params import load_params
    from ..utils import repo_root

    pfile = Path(root) / "params.yaml"
    return load_params(pfile if pfile.exists() else repo_root() / "params.yaml")


def log_span(values: Sequence[float]) -> str:
    """``1e-4..1e3``: the decades of a log grid's ends (a caption's view of a params grid)."""
    return "..".join(f"1e{round(math.log10(v))}" for v in (min(values), max(values)))


def key_values(items) -> str:
    """``k=v, ...`` of ``(key, value)`` pairs, floats with 3 significant digits."""
    return ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in items)


def params_titles(params, track: str) -> dict[str, str]:
    """``{variant: row label}`` of ``params.<track>.variants``, in params order: its loss's
    registry title, then `` (<variant>)`` when the variant is not named after its loss."""
    from ..losses.registry import title

    return {name: title(v.loss) if name == v.loss else f"{title(v.loss)} ({name})"
            for name, v in getattr(params, track).variants.items()}


def short_label(track: str, name: str) -> str:
    """Short label of a row of ``track``: the ``short`` of its ``losses/variants.yaml`` entry
    (or of a registered loss of that name); the name itself when neither knows it."""
    from ..errors import InputError
    from ..losses.registry import variant_spec

    try:
        return variant_spec(track, name).short or name
    except (InputError, KeyError):
        return name


def params_shorts(params, track: str) -> dict[str, str]:
    """``{variant: short label}`` of ``params.<track>.variants`` (the short counterpart of
    :func:`params_titles`)."""
    from ..losses.registry import track_variants

    known = track_variants(track)
    return {name: short_label(track, name) if name == v.loss or name in known
            else f"{short_label(track, v.loss)} ({name})"
            for name, v in getattr(params, track).variants.items()}


@dataclass(frozen=True)
class Cell:
    """One statistic of a report table: point estimate, 95 % CI, marks and source.
    ``str(cell)`` is its Markdown text; the HTML also carries the numbers (``data-*``).

    Attributes:
        value: point estimate in the metric's own unit (a fraction for accuracy, Rank@k,
            mAP, F1); ``None`` = missing (shown ``-``); ``low``, ``high``: its 95 % CI.
        scale: display factor (``100`` shows percent points).
        digits, ci_digits: decimals of the value and of the bounds (default ``digits``).
        bold: in the 95 % model confidence set (Hansen, Lunde & Nason 2011).

    Raises:
        ValueError: the estimate lies outside its CI, or ``low > high``.
    """

    value: float | None
    low: float | None = None
    high: float | None = None
    scale: float = 1.0
    digits: int = 2
    ci_digits: int | None = None
    bold: bool = False
    marks: tuple[str, ...] = ()
    show_ci: bool = True
    source: str = ""

    def __post_init__(self) -> None:
        if self.value is None or self.low is None or self.high is None:
            return
        if not (self.low <= self.high) or not (self.low - 1e-12 <= self.value <= self.high + 1e-12):
            raise ValueError(f"{self.source or 'cell'}: estimate {self.value!r} outside its CI "
                             f"[{self.low!r}, {self.high!r}]")

    @classmethod
    def from_stats(cls, st: dict, **kw: Any) -> "Cell":
        """A cell from a :func:`contrastlab.evaluation.stats.summarize` entry; keyword
        arguments set the display fields."""
        marks = tuple(m for m, k in (("↑", "beats_baseline"), ("↓", "below_baseline"))
                      if st.get(k))
        return cls(st["mean"], st.get("ci_low"), st.get("ci_high"),
                   bold=bool(st.get("in_mcs", st.get("tied_for_best"))), marks=marks, **kw)

    def text(self) -> str:
        """``mean [low, high]`` (bold when tied for best), then the marks; ``-`` when missing."""
        if self.value is None or (isinstance(self.value, float) and math.isnan(self.value)):
            return "-"
        k, d = self.scale, self.digits
        cd = self.digits if self.ci_digits is None else self.ci_digits
        txt = f"{k * self.value:.{d}f}"
        if self.show_ci and self.low is not None and self.high is not None:
            txt += f" [{k * self.low:.{cd}f}, {k * self.high:.{cd}f}]"
        if self.bold:
            txt = f"**{txt}**"
        return txt + "".join(f" {m}" for m in self.marks)

    __str__ = text

    def data(self) -> dict[str, str]:
        """The numbers as HTML ``data-*`` attributes (display scale applied)."""
        return {key: f"{self.scale * v:.6g}" for key, v in
                (("value", self.value), ("ci-low", self.low), ("ci-high", self.high))
                if v is not None}


@dataclass
class Table:
    """A table: ``columns`` names and ``rows`` of cells (:class:`Cell` for a statistic with
    its CI, else an already formatted str or a number)."""

    title: str
    columns: list[str]
    rows: list[list[Any]]
    note: str = ""


@dataclass
class Figure:
    """A PNG written by the track's section builder."""

    title: str
    path: Path
    caption: str = ""


@dataclass
class Section:
    """A track's part of the report. A track fills ``headline`` (its full paragraph),
    ``tables``, ``figures``, ``notes`` and ``comparison`` and calls :meth:`build`; the report
    stage (:func:`contrastlab.reporting.headline.attach`) then fills ``lead`` and ``legend``
    and replaces ``headline`` by the two sentences."""

    track: str
    title: str
    headline: str = ""
    tables: list[Table] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    comparison: Any = None
    lead: list[Figure] = field(default_factory=list)  # shown first, above the details
    legend: dict[str, str] = field(default_factory=dict)

    def build(self, figures_dir: Path) -> "Section":
        """Draw each :class:`Plot` of ``figures`` into ``figures_dir`` and drop the ``None``
        entries of ``notes``, ``tables`` and ``figures``; returns the section."""
        figures_dir = Path(figures_dir)
        figures_dir.mkdir(parents=True, exist_ok=True)
        figs = []
        for f in self.figures:
            if isinstance(f, Plot):
                path = figures_dir / f.file
                f = None if f.draw(path) is False else Figure(f.title, path, f.caption)
            if f is not None:
                figs.append(f)
        self.figures = figs
        self.notes = [n for n in self.notes if n]
        self.tables = [t for t in self.tables if t is not None]
        return self


@dataclass
class Plot:
    """A figure a track draws when its section is built: ``draw(path)`` writes the PNG
    ``<figures_dir>/<file>`` and returns ``False`` when it has nothing to draw (no figure)."""

    title: str
    file: str
    caption: str
    draw: Callable[[Path], Any]


def markdown_table(table: Table) -> str:
    """A :class:`Table` as ``comparison.md`` shows it (Markdown, with its title and note)."""
    md = render_markdown([Section("t", "t", tables=[table])])
    return md.split("## t\n\n", 1)[1].rstrip("\n")


def render_markdown(sections: Sequence[Section], header: str = "") -> str:
    """The whole ``comparison.md`` (``templates/report.md.j2``)."""
    return render_template("report.md.j2", sections=list(sections), header=header)
