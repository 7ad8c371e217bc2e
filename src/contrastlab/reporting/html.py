"""Render report :class:`~contrastlab.reporting.Section` s to one self-contained HTML page
(``templates/report.html.j2``): figures embedded as base64 ``data:`` URIs, CSS and the
sort/filter JavaScript (:data:`_JS`) inline, no ``src``/``href`` outside the page; a table
longer than :data:`LONG_ROWS` rows is collapsed.
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

_CSS = """
:root { --fg:#1d2330; --muted:#5b6475; --line:#d9dee7; --head:#f1f4f9; --accent:#2f5fa7;
        --good:#1e7b34; --bad:#b3261e; }
* { box-sizing: border-box; }
body { margin:0; color:var(--fg); background:#fff;
       font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; }
header { padding: 1.2rem 2rem .6rem; border-bottom: 1px solid var(--line); background:#fafbfd; }
header h1 { margin: 0 0 .3rem; font-size: 1.6rem; }
nav { margin-top: .4rem; }
nav a { color: var(--accent); margin-right: 1.1rem; text-decoration: none; }
nav a:hover { text-decoration: underline; }
main { padding: .5rem 2rem 3rem; max-width: 1400px; }
section { margin-top: 1.6rem; padding-top: .4rem; border-top: 2px solid var(--line); }
h2 { font-size: 1.35rem; margin: .4rem 0 .6rem; }
p.note, p.meta { color: var(--muted); margin: .3rem 0 .8rem; font-size: .9rem; }
p.headline { font-size: 1.05rem; border-left: 4px solid #2a6; padding: .4rem .8rem; background: #f4faf6; }
code { font: .88em ui-monospace, "DejaVu Sans Mono", monospace; background: var(--head);
       padding: 0 .25em; border-radius: 3px; }
.table-wrap { overflow-x: auto; margin: .8rem 0 .2rem; }
table { border-collapse: collapse; font-size: .9rem; min-width: 30%; }
caption { caption-side: top; text-align: left; font-weight: 600; padding: .2rem 0 .4rem; }
th, td { border: 1px solid var(--line); padding: .28rem .6rem; }
th { background: var(--head); text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tbody tr:nth-child(even) { background: #fafbfd; }
td.pos { color: var(--good); } td.neg { color: var(--bad); }
.figures { display: grid; grid-template-columns: minmax(0, 1100px); gap: 1.2rem;
           margin-top: 1rem; }  /* one figure per row, at page width (reporting/style.py) */
figure { margin: 0; border: 1px solid var(--line); border-radius: 6px; padding: .6rem;
         background: #fff; }
figure.wide { grid-column: 1 / -1; }
figure img { display: block; max-width: 100%; height: auto; margin: 0 auto; }
figcaption { font-size: .88rem; color: var(--muted); margin-top: .4rem; }
figcaption b { color: var(--fg); }
.ref { color: var(--muted); font-size: .85em; }

.lead { display: grid; grid-template-columns: minmax(0, 1000px); gap: .8rem; margin-top: .6rem; }
.lead figure { border: none; padding: 0; }
dl.legend { columns: 3 22rem; column-gap: 2rem; font-size: .84rem; margin: .6rem 0 .4rem;
            color: var(--muted); }
dl.legend div { break-inside: avoid; margin: 0 0 .15rem; }
dl.legend dt { display: inline; font-weight: 600; color: var(--fg); }
dl.legend dt:not(:last-child)::after { content: ": "; }
dl.legend dd { display: inline; margin: 0; }
details.more { margin-top: .8rem; }
details > summary { cursor: pointer; color: var(--accent); font-weight: 600; margin: .4rem 0; }
details.long > summary { font-weight: 500; }
input.filter { font: inherit; font-size: .85rem; padding: .15rem .4rem; margin: .5rem 0 0;
               border: 1px solid var(--line); border-radius: 4px; width: 16rem; }
th[aria-sort] { cursor: pointer; }
th[aria-sort="ascending"]::after { content: " \\25B2"; }
th[aria-sort="descending"]::after { content: " \\25BC"; }
"""

#: Sorting (a click on a heading; numbers by ``data-value`` or leading number, then text) and
#: filtering (the box above) of every ``table.sortable``, no library.
_JS = r"""
(function () {
  function key(td) {
    if (!td) return '';
    if (td.dataset.value !== undefined) return parseFloat(td.dataset.value);
    var t = td.textContent.trim().replace('\u2212', '-');
    var m = t.match(/^[*+]?(-?[0-9]+(\.[0-9]+)?(e[-+]?[0-9]+)?)/i);
    return m ? parseFloat(m[1]) : t.toLowerCase();
  }
  function cmp(a, b) {
    var na = typeof a === 'number', nb = typeof b === 'number';
    if (na && nb) return a - b;
    if (na !== nb) return na ? -1 : 1;
    return a < b ? -1 : a > b ? 1 : 0;
  }
  document.querySelectorAll('table.sortable').forEach(function (table) {
    var body = table.tBodies[0];
    if (!body) return;
    var box = document.createElement('input');
    box.type = 'search';
    box.className = 'filter';
    box.placeholder = 'filter rows';
    box.setAttribute('aria-label', 'filter the rows of this table');
    table.parentNode.insertBefore(box, table);
    box.addEventListener('input', function () {
      var q = box.value.toLowerCase();
      Array.prototype.forEach.call(body.rows, function (r) {
        r.hidden = q !== '' && r.textContent.toLowerCase().indexOf(q) < 0;
      });
    });
    table.tHead.querySelectorAll('th').forEach(function (th, i) {
      th.setAttribute('aria-sort', 'none');
      th.tabIndex = 0;
      function sort() {
        var dir = th.getAttribute('aria-sort') === 'descending' ? 1 : -1;
        table.tHead.querySelectorAll('th').forEach(function (h) { h.setAttribute('aria-sort', 'none'); });
        th.setAttribute('aria-sort', dir > 0 ? 'ascending' : 'descending');
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) { return dir * cmp(key(a.cells[i]), key(b.cells[i])); });
        rows.forEach(function (r) { body.appendChild(r); });
      }
      th.addEventListener('click', sort);
      th.addEventListener('keydown', function (e) { if (e.key === 'Enter') sort(); });
    });
  });
})();
"""
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


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "section"


def cell_view(v: Any, column: str) -> dict[str, Any]:
    """One table cell for the template: ``text``, CSS ``classes`` (``num``; ``pos`` / ``neg``
    by sign in a difference column) and, for a :class:`~contrastlab.reporting.Cell`, its
    numbers as ``data`` and its source as ``title``."""
    cell = isinstance(v, Cell)
    txt = f"{v:.4g}" if isinstance(v, float) else "-" if v is None else str(v)
    plain = re.sub(r"[*_\u2020\u2021]", "", txt).strip()  # **bold**, daggers
    num = isinstance(v, (int, float)) and not isinstance(v, bool) or _NUM.match(plain)
    cls = ["num"] if num or cell else []  # a statistic: right-aligned like every number
    col = column.lower()
    if num and ("\u0394" in column or "diff" in col or "delta" in col):
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
    p = Path(f.path)
    if not p.is_absolute() and base_dir is not None:
        p = Path(base_dir) / p
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
        sid = _slug(s.track)
        while sid in ids:
            sid += "-x"
        ids.add(sid)
        tables = [{"title": t.title, "note": t.note, "columns": list(t.columns),
                   "rows": [[cell_view(v, str(t.columns[i]) if i < len(t.columns) else "")
                             for i, v in enumerate(row)] for row in t.rows]}
                  for t in s.tables]
        comp = getattr(s, "comparison", None)
        views.append({"id": sid, "title": s.title, "headline": s.headline, "notes": s.notes,
                      "tables": tables,
                      "figures": [_figure_view(f, base_dir) for f in s.figures],
                      "lead": [_figure_view(f, base_dir) for f in s.lead],
                      "legend": dict(s.legend),
                      "labels": list(comp.labels()) if comp is not None and s.lead else []})
    return render_template("report.html.j2", sections=views, title=title, header=header,
                           css=_CSS, js=_JS, long_rows=LONG_ROWS)
