"""Render report :class:`~contrastlab.reporting.Section` s to one self-contained HTML page
(``templates/report.html.j2``): figures embedded as base64 ``data:`` URIs, CSS and the
sort/filter JavaScript (``templates/report.css.j2``, ``report.js.j2``) inline, no
``src``/``href`` outside the page; a table longer than :data:`LONG_ROWS` rows is collapsed.
"""

from __future__ import annotations

import base64
import mimetypes
import re
from pathlib import Path
from typing import Any, Sequence

from . import Cell, Figure, Section
from .render import inline_markdown, render_template

__all__ = ["render_html", "inline_markdown", "data_uri", "png_size", "cell_view"]

#: Tables with more rows than this are collapsed (``<details>``) on the page.
LONG_ROWS = 12

_NUM = re.compile(r"^[+\-\u2212]?\d[\d.,]*(e[+\-]?\d+)?\s*(%|±.*|\u00b1.*|s)?$", re.I)


def data_uri(path: Path) -> str:
    """``data:<mime>;base64,...`` of an image file.

    Raises:
        FileNotFoundError: the file does not exist.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"report figure not found: {path}")
    mime = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    if path.suffix.lower() == ".svg":
        mime = "image/svg+xml"
    return f"data:{mime};base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def cell_view(v: Any, column: str) -> dict[str, Any]:
    """One table cell for the template: ``text``, CSS ``classes`` (``num``; ``pos`` / ``neg``
    by sign in a difference column) and, for a :class:`~contrastlab.reporting.Cell`, its
    numbers as ``data`` and its source as ``title``."""
    cell = isinstance(v, Cell)
    txt = f"{v:.4g}" if isinstance(v, float) else "-" if v is None else str(v)
    plain = re.sub(r"[*_\u2020\u2021]", "", txt).strip()  # **bold**, daggers
    num = isinstance(v, (int, float)) and not isinstance(v, bool) or _NUM.match(plain)
    cls = ["num"] if num or cell else []  # a statistic: right-aligned like every number
    if num and ("\u0394" in column or any(w in column.lower() for w in ("diff", "delta"))):
        if plain.startswith("+") and plain.strip("+0.% ") != "":
            cls.append("pos")
        elif plain[:1] in "-\u2212" and plain.strip("-\u22120.% ") != "":
            cls.append("neg")
    return {"text": txt, "classes": cls, "data": v.data() if cell else {},
            "title": v.source if cell else ""}


def png_size(path: Path) -> tuple[int, int] | None:
    """(width, height) in pixels from a PNG's IHDR chunk; ``None`` for other files."""
    with open(path, "rb") as fh:
        head = fh.read(24)
    if len(head) < 24 or not head.startswith(b"\x89PNG\r\n\x1a\n") or head[12:16] != b"IHDR":
        return None
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


def _figure_view(f: Figure, base_dir: Path | None) -> dict[str, Any]:
    p = Path(base_dir or "") / f.path  # an absolute path stays itself
    size = png_size(p) if p.is_file() else None
    return {"uri": data_uri(p),  # raises FileNotFoundError naming the file first
            "title": f.title, "caption": f.caption,
            "wide": bool(size and size[0] > 2 * size[1])}


def render_html(sections: Sequence[Section], *, title: str = "contrastlab: loss comparison",
                header: str = "", base_dir: Path | None = None) -> str:
    """The whole self-contained ``index.html``; ``header``: a line of inline Markdown under
    the heading; ``base_dir``: what relative figure paths are relative to.

    Raises:
        FileNotFoundError: a figure's file is missing.
    """
    ids: set[str] = set()
    views = []
    for s in sections:
        sid = re.sub(r"[^a-z0-9]+", "-", s.track.lower()).strip("-") or "section"
        while sid in ids:
            sid += "-x"
        ids.add(sid)
        tables = [{"title": t.title, "note": t.note, "columns": list(t.columns),
                   "rows": [[cell_view(v, str(t.columns[i]) if i < len(t.columns) else "")
                             for i, v in enumerate(row)] for row in t.rows]}
                  for t in s.tables]
        comp = s.comparison
        views.append({"id": sid, "title": s.title, "headline": s.headline, "notes": s.notes,
                      "tables": tables,
                      "figures": [_figure_view(f, base_dir) for f in s.figures],
                      "lead": [_figure_view(f, base_dir) for f in s.lead],
                      "legend": dict(s.legend),
                      "labels": list(comp.labels()) if comp is not None and s.lead else []})
    return render_template("report.html.j2", sections=views, title=title, header=header,
                           long_rows=LONG_ROWS)
