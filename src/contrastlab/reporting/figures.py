"""The report's first figure per track, from the track's table as a :class:`Comparison` (one
:class:`Panel` per data set or split, one :class:`Row` per table row), usually built with
:func:`rows_from_stats` from :func:`contrastlab.evaluation.stats.summarize`;
:func:`forest_figure` draws it (95 % model confidence set filled, Hansen, Lunde & Nason 2011),
:mod:`contrastlab.reporting.headline` states it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from . import style

__all__ = ["Row", "Panel", "Comparison", "rows_from_stats", "forest_figure", "legend",
           "shorten_labels", "KINDS"]

#: Row kinds: marker, face when in the model confidence set, colour (redundant with the marker).
KINDS = {"loss": ("o", "tab:blue", "contrastive loss"),
         "baseline": ("s", "0.25", "baseline"),
         "hybrid": ("D", "tab:orange", "hybrid"),
         "published": ("|", "0.35", "published (not rerun)")}


@dataclass
class Row:
    """One row of a track's comparison: ``kind`` of :data:`KINDS`; ``estimate``, ``low``,
    ``high`` in the metric's unit (a fraction for accuracy, Rank@k); ``delta``, ``p`` (Holm),
    ``beats`` / ``below``: against the ``strongest`` baseline; ``p_floor``: the smallest ``p``
    its draws and family allow."""

    key: str
    short: str
    title: str
    kind: str
    estimate: float
    low: float | None = None
    high: float | None = None
    in_mcs: bool = False
    strongest: bool = False
    delta: float | None = None
    p: float | None = None
    beats: bool = False
    below: bool = False
    delta_low: float | None = None
    delta_high: float | None = None
    p_floor: float | None = None


@dataclass
class Panel:
    """The rows of one table (one data set or split); ``title`` empty for a single table."""

    title: str
    rows: list[Row]

    def get(self, kind: str) -> list[Row]:
        return [r for r in self.rows if r.kind == kind]

    def best_loss(self) -> Row | None:
        return max(self.get("loss"), key=lambda r: r.estimate, default=None)

    def baseline(self) -> Row | None:
        return next((r for r in self.rows if r.strongest), None)

    def top(self) -> Row | None:
        return max((r for r in self.rows if r.kind != "published"), key=lambda r: r.estimate,
                   default=None)


@dataclass
class Comparison:
    """A track's headline comparison (its first figure, headline and summary).

    Attributes:
        primary: index of the panel the headline and summary read; ``None``: every panel
            (the differences combined by a Wilcoxon signed-rank test, Demsar 2006, 3.1.3).
        noun: what a panel is (``data set``), for ``primary=None``.
        lead: other figures shown with the first one.
        secondary: with ``primary`` set, another panel whose best loss the take-away states.
        more: further panels whose best loss the summary (``answer.<track>.more``) and the
            README's table state after the secondary's, not the headline.
    """

    metric: str
    panels: list[Panel]
    unit: str = "%"
    scale: float = 100.0
    digits: int = 1
    test: str = "paired bootstrap, Holm"
    primary: int | None = 0
    noun: str = "data set"
    lead: list = field(default_factory=list)
    title: str = ""
    secondary: int | None = None
    more: tuple[int, ...] = ()

    def fmt(self, v: float | None) -> str:
        return "-" if v is None else f"{self.scale * v:.{self.digits}f}"

    def fmt_unit(self, v: float | None) -> str:
        return self.fmt(v) + (f" {self.unit}" if self.unit else "")

    def fmt_ci(self, r: Row) -> str:
        ci = f" [{self.fmt(r.low)}, {self.fmt(r.high)}]" if r.low is not None else ""
        return f"{self.fmt_unit(r.estimate)}{ci}"

    def labels(self) -> dict[str, str]:
        """``{short: title}`` of every row of every panel (first title wins)."""
        out: dict[str, str] = {}
        for p in self.panels:
            for r in p.rows:
                out.setdefault(r.short, r.title)
        return out


def rows_from_stats(stats: Mapping[str, Mapping[str, Any]], names: Sequence[str], *,
                    kind: Mapping[str, str] | Callable[[str], str],
                    short: Mapping[str, str] | Callable[[str], str],
                    title: Mapping[str, str] | Callable[[str], str],
                    baseline: str | None,
                    published: Sequence[tuple[str, float]] = ()) -> list[Row]:
    """Rows from a :func:`contrastlab.evaluation.stats.summarize` output (``names`` missing
    from ``stats`` are skipped); ``kind``, ``short``, ``title``: per row name (mapping or
    function); ``baseline``: the strongest baseline's name; ``published``: ``(label, value)``
    reference numbers without CI."""
    def get(f, n, default):
        return f(n) if callable(f) else f.get(n, default)

    rows = [Row(n, get(short, n, n), get(title, n, n), get(kind, n, "loss"),
                float(st["mean"]), st.get("ci_low"), st.get("ci_high"),
                bool(st.get("in_mcs", st.get("tied_for_best"))), n == baseline,
                st.get("delta_vs_baseline"), st.get("p_vs_baseline_holm"),
                bool(st.get("beats_baseline")), bool(st.get("below_baseline")),
                st.get("delta_ci_low"), st.get("delta_ci_high"), st.get("p_floor"))
            for n in names if (st := stats.get(n) or {}).get("mean") is not None]
    return rows + [Row(f"published:{label}", label, f"{label} (published result)", "published",
                       float(v)) for label, v in published]


def legend(comparisons: Sequence[Comparison]) -> dict[str, str]:
    """``{short label: full label}`` of every row shown, each once (short labels sorted)."""
    out: dict[str, str] = {}
    for c in comparisons:
        for k, v in c.labels().items():
            out.setdefault(k, v)
    return dict(sorted(out.items(), key=lambda kv: kv[0].lower()))


def _order(c: Comparison) -> list[str]:
    """Every panel's row order: mean rank of the estimate (best first), published rows last."""
    ranks: dict[str, list[float]] = {}
    for p in c.panels:
        live = sorted((r for r in p.rows if r.kind != "published"), key=lambda r: -r.estimate)
        for i, r in enumerate(live):
            ranks.setdefault(r.short, []).append(i / max(len(live) - 1, 1))
    order = sorted(ranks, key=lambda k: (sum(ranks[k]) / len(ranks[k]), k))
    pubs = [r.short for p in c.panels for r in sorted(p.get("published"), key=lambda r: -r.estimate)]
    return order + [x for x in dict.fromkeys(pubs) if x not in order]


def _draw_row(ax, r, yi: float, k: float, digits: int, single: bool) -> list[float]:
    """Draw a row (estimate, CI, kind's marker; single panel: its numbers); returns the values."""
    m, col, _ = KINDS.get(r.kind, KINDS["loss"])
    if r.kind == "published":
        ax.plot(k * r.estimate, yi, m, ms=13, mew=2.2, color=col, zorder=3)
        vals, kw = [], {"color": "0.35", "style": "italic"}
        text = f"{k * r.estimate:.{digits}f} (published)"
    else:
        vals = [k * r.low, k * r.high] if r.low is not None and r.high is not None else []
        kw = {"color": "0.2"}
        if vals:
            ax.plot(vals, [yi, yi], "-", lw=1.4, color=col, zorder=2)
        ax.plot(k * r.estimate, yi, m, ms=6.5, mew=1.4, color=col,
                mfc=col if r.in_mcs else "white", zorder=3)
        ci = f" [{k * r.low:.{digits}f}, {k * r.high:.{digits}f}]" if single and r.low is not None else ""
        text = f"{k * r.estimate:.{digits}f}{ci}"
    if single:
        ax.annotate(text, (1.0, yi), xycoords=("axes fraction", "data"), xytext=(6, 0),
                    textcoords="offset points", va="center", ha="left", fontsize="small",
                    annotation_clip=False, **kw)
    return vals + [k * r.estimate]


def _draw_panel(ax, c: Comparison, p: Panel, y: dict, single: bool) -> None:
    """One panel: the strongest baseline's band and line, every row, the axis and labels."""
    k = c.scale
    base = p.baseline()
    if base is not None and base.low is not None:
        ax.axvspan(k * base.low, k * base.high, color="0.88", zorder=0, lw=0)
    if base is not None:
        ax.axvline(k * base.estimate, ls="--", lw=1.1, color="0.3", zorder=1)
    vals = [v for r in p.rows for v in _draw_row(ax, r, y[r.short], k, c.digits, single)]
    style.score_axis(ax, vals, lower=0.0, upper=k * 1.0, pad=0.06, axis="x")
    if base is not None:
        ax.annotate(base.short, (k * base.estimate, 1.0), xycoords=("data", "axes fraction"),
                    xytext=(0, 2), textcoords="offset points", ha="center", va="bottom",
                    fontsize="small", color="0.3")
    ax.grid(axis="y", visible=False)
    if p.title:
        ax.set_title(p.title, pad=14)
    ax.set_xlabel(f"{c.metric}" + (f" ({c.unit})" if c.unit else ""))


def _legend(fig, c: Comparison, single: bool) -> None:
    """The kinds present, open = outside the MCS, the baseline's line and band."""
    from matplotlib.lines import Line2D

    present = {r.kind for p in c.panels for r in p.rows}
    handles = [Line2D([], [], ls="", marker=KINDS[x][0], color=KINDS[x][1], mfc=KINDS[x][1],
                      ms=7 if x != "published" else 11, mew=1.4 if x != "published" else 2.2,
                      label=KINDS[x][2]) for x in KINDS if x in present]
    handles += [Line2D([], [], ls="", marker="o", color="0.3", mfc="white", ms=7, mew=1.4,
                       label="open: outside the 95% MCS"),
                Line2D([], [], ls="--", color="0.3", lw=1.1,
                       label="strongest baseline (band: its 95% CI)")]
    fig.legend(handles=handles, loc="outside lower center", ncol=3 if single else len(handles))


@style.styled
def forest_figure(c: Comparison, stem: Path) -> tuple[Path, Path]:
    """Draw ``c`` to ``<stem>.svg`` and ``<stem>.png`` (deterministic bytes), one panel per
    :class:`Panel`, rows in one shared order; returns ``(svg, png)``.

    Raises:
        ValueError: no panel has a row.
    """
    order = _order(c)
    if not order:
        raise ValueError(f"forest_figure: no rows to draw for {stem.name}")
    n = len(c.panels)
    single = n == 1
    # rows get thinner past about 22 so a long table's figure still fits above the fold
    h_row = min(0.21 if single else 0.17, 4.6 / max(1, len(order)))
    fig, axes = style.panels(n, 0.55 + h_row * len(order), 3, width=10.5 if n > 1 else 9.0,
                             pad=0.9, sharey=True)
    y = {k: i for i, k in enumerate(order)}
    for ax, p in zip(axes, c.panels):
        _draw_panel(ax, c, p, y, single)
    axes[0].set_ylim(len(order) - 0.5, -0.5)
    axes[0].set_yticks(range(len(order)), order)
    for a in axes:
        a.tick_params(axis="y", length=0)
    _legend(fig, c, single)
    if c.title:
        fig.suptitle(c.title)
    svg, png = Path(f"{stem}.svg"), Path(f"{stem}.png")
    style.save(fig, svg, png)
    return svg, png


def shorten_labels(tables, labels: Mapping[str, str]) -> None:
    """Replace every full label of ``labels`` (``{short: full}``) in the first column of
    ``tables`` by its short label (longest first, one pass)."""
    full = {t: s for s, t in labels.items() if t and t != s}
    if not full:
        return
    pat = re.compile("|".join(re.escape(t) for t in sorted(full, key=len, reverse=True)))
    for t in tables:
        for row in t.rows:
            if row and isinstance(row[0], str):
                row[0] = pat.sub(lambda m: full[m.group(0)], row[0])
