"""One look for every report figure: page-width figures (``FIG_WIDTH`` in x ``DPI`` = 1050
px), legible text (font sizes from :data:`RC`, never per call), meaningful axes
(:func:`score_axis`, :func:`reference_lines`); draw under :func:`styled`, write with
:func:`save` (equal bytes for equal figures).
"""

from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import Mapping, Sequence

from ..io import atomic_path

FIG_WIDTH = 10.5  # inches: the page's figure column at DPI
DPI = 100

RC = {
    "figure.figsize": (FIG_WIDTH, 4.2),
    "figure.dpi": DPI,
    "savefig.dpi": DPI,
    "savefig.bbox": "tight",
    "figure.constrained_layout.use": True,  # titles, labels, outside legends never clipped
    "font.size": 11,
    "axes.titlesize": 12,
    "axes.labelsize": 11,
    "xtick.labelsize": 10,
    "ytick.labelsize": 10,
    "legend.fontsize": 10,
    "legend.title_fontsize": 10,
    "legend.frameon": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "lines.linewidth": 1.8,
    "errorbar.capsize": 3,
}


def apply() -> None:
    """Set matplotlib's rcParams to the report style (idempotent; Agg backend if none)."""
    import matplotlib

    matplotlib.rcParams.update(RC)


def figsize(height: float = 4.2, width: float = FIG_WIDTH) -> tuple[float, float]:
    """``(width, height)`` in inches for a page-width figure."""
    return (width, height)


def styled(fn):
    """Decorator: run a figure-drawing function inside ``matplotlib.rc_context(RC)``."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        import matplotlib

        matplotlib.use("Agg")
        with matplotlib.rc_context(RC):
            return fn(*args, **kwargs)

    return wrapper


def panels(n: int, height: float = 3.4, max_cols: int = 3, width: float = FIG_WIDTH,
           pad: float = 0.0, **kwargs):
    """``(fig, axes)``: ``n`` panels (row-major) in rows of at most ``max_cols``, ``width``
    wide, ``height`` inches per row plus ``pad``; ``kwargs`` go to ``plt.subplots``.

    Raises:
        ValueError: ``n < 1`` or ``max_cols < 1``.
    """
    import matplotlib.pyplot as plt

    if n < 1 or max_cols < 1:
        raise ValueError(f"panels: need n >= 1 and max_cols >= 1 (got {n}, {max_cols})")
    cols = min(n, max_cols)
    rows = math.ceil(n / cols)
    fig, grid = plt.subplots(rows, cols, figsize=figsize(height * rows + pad, width),
                             squeeze=False, **kwargs)
    axes = [ax for row in grid for ax in row]
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig, axes[:n]


#: Fixed salt of the SVG element ids (matplotlib draws random ids otherwise).
SVG_SALT = "contrastlab-report"


def save(fig, path, *more) -> None:
    """Write ``fig`` to ``path`` (and each of ``more``) atomically in the suffix's format, then
    close it; the bytes depend on the figure only (no date or version, SVG ids from
    :data:`SVG_SALT`, text as paths)."""
    import matplotlib
    import matplotlib.pyplot as plt

    try:
        with matplotlib.rc_context({"svg.hashsalt": SVG_SALT, "svg.fonttype": "path"}):
            for p in (path, *more):
                fmt = str(p).rsplit(".", 1)[-1].lower()
                meta = {"Date": None, "Creator": None} if fmt == "svg" else {"Software": None}
                with atomic_path(p, suffix=f".{fmt}") as tmp:
                    fig.savefig(tmp, dpi=DPI, bbox_inches="tight", format=fmt, metadata=meta)
    finally:
        plt.close(fig)


def frames(folder, names, suffix: str = ".csv") -> dict:
    """``{name: DataFrame}`` of the ``names`` whose CSV ``<folder>/<name><suffix>`` exists (in
    order)."""
    import pandas as pd

    return {n: pd.read_csv(f) for n in names if (f := Path(folder) / f"{n}{suffix}").exists()}


def finish(fig, path, ax, xlabel: str, ylabel: str, title: str | None = None) -> bool:
    """Label ``ax`` (and title it), add its legend, :func:`save` ``fig``; returns True."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.legend()
    save(fig, path)
    return True


def _nice_step(span: float, n: int = 5) -> float:
    """A 1-2-5 step giving about ``n`` intervals over ``span``."""
    raw = span / max(n, 1)
    mag = 10 ** math.floor(math.log10(raw))
    return next((m * mag for m in (1, 2, 2.5, 5) if raw <= m * mag), 10 * mag)


def score_axis(ax, values: Sequence[float], *, lower: float | None = 0.0,
               upper: float | None = 1.0, pad: float = 0.15, include: Sequence[float] = (),
               axis: str = "y") -> tuple[float, float]:
    """Set ``ax``'s y-limits (``axis="x"``: x-limits) to the scores' range (NaNs ignored, and
    the ``include`` values), padded by ``pad`` of the span, snapped to round ticks, within the
    metric's bounds ``lower`` / ``upper`` (``None``: unbounded); returns ``(low, high)``.

    Raises:
        ValueError: no finite value in ``values`` and ``include``; ``axis`` not x / y.
    """
    vals = [float(v) for v in (*values, *include) if v is not None and math.isfinite(float(v))]
    if not vals:
        raise ValueError("score_axis: no finite value to frame")
    lo, hi = min(vals), max(vals)
    span = hi - lo or max(abs(hi), 1e-3) * 0.1
    step = _nice_step(span * (1 + 2 * pad))
    low = math.floor((lo - pad * span) / step) * step
    high = math.ceil((hi + pad * span) / step) * step
    low = low if lower is None else max(low, lower)
    high = high if upper is None else min(high, upper)
    if axis not in ("x", "y"):
        raise ValueError(f"score_axis: axis must be 'x' or 'y', not {axis!r}")
    from matplotlib.ticker import MultipleLocator

    getattr(ax, f"set_{axis}lim")(low, high)
    getattr(ax, f"{axis}axis").set_major_locator(MultipleLocator(step))
    return low, high


def reference_lines(ax, refs: Mapping[str, float], *, color: str = "0.45",
                    min_gap: float | None = None) -> list:
    """Draw each reference value as a dashed line, its label in the right margin pushed apart
    from the others (``min_gap`` of the axes height, default 1.4 lines of text; a leader
    joins a moved label to its line). Call once the y-limits are final; returns the labels,
    bottom to top."""
    if not refs:
        return []
    if min_gap is None:
        import matplotlib

        size = matplotlib.rcParams["font.size"]  # points
        min_gap = 1.4 * size * ax.figure.dpi / 72 / max(ax.bbox.height, 1.0)
    y0, y1 = ax.get_ylim()
    frac = {k: (v - y0) / (y1 - y0) for k, v in refs.items()}
    order = sorted(frac, key=frac.get)
    placed: list[float] = []
    for k in order:  # each label at least min_gap above the one below
        placed.append(placed[-1] + min_gap if placed and frac[k] - placed[-1] < min_gap else frac[k])
    shift = max(placed[-1] - 1.0, 0.0)  # shift the stack down if it runs off the top
    placed = [p - shift for p in placed]
    texts = []
    for k, y in zip(order, placed):
        ax.axhline(refs[k], ls="--", lw=0.9, color=color, zorder=1)
        texts.append(ax.annotate(
            k, xy=(1.0, frac[k]), xycoords="axes fraction", xytext=(1.02, y),
            textcoords="axes fraction", va="center", ha="left", color=color,
            annotation_clip=False,
            arrowprops=None if abs(y - frac[k]) < 1e-9 else
            dict(arrowstyle="-", color=color, lw=0.6, shrinkA=0, shrinkB=0)))
    return texts
