"""HTML and Markdown rendering of report sections (synthetic sections, real PNGs)."""

from __future__ import annotations

import base64
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from contrastlab.params import Params
from contrastlab.reporting import Figure, Section, Table, render_markdown
from contrastlab.reporting.html import inline_markdown, render_html
from contrastlab.reporting.provenance import (STAGE_TIMES, collect_provenance,
                                              provenance_section, stage_timings, stamp_sections,
                                              write_stage_times)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


class _Collector(HTMLParser):
    """Collects tags, attributes and table cell texts of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.cells: list[str] = []
        self._in_cell = False
        self._text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag in ("td", "th"):
            self._in_cell, self._text = True, []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._in_cell:
            self.cells.append("".join(self._text))
            self._in_cell = False

    def handle_data(self, data):
        if self._in_cell:
            self._text.append(data)


def _parse(page: str) -> _Collector:
    c = _Collector()
    c.feed(page)
    c.close()
    return c


def test_html_embeds_every_table_and_figure_with_no_external_reference(sections, report_dir):
    prov = collect_provenance(Params(), "abc123")
    stamp_sections(sections, prov)
    page = render_html([provenance_section(prov), *sections], title="demo <report>",
                       header=prov.header(), base_dir=report_dir)
    doc = _parse(page)
    tags = [t for t, _ in doc.tags]
    assert tags.count("table") == 2  # graph + code (no wall times in the page)
    assert tags.count("figure") == 3
    imgs = [a for t, a in doc.tags if t == "img"]
    assert len(imgs) == 3
    for a in imgs:
        src = a["src"]
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1]).startswith(PNG_MAGIC)
        assert a["alt"]
    # Nothing points outside the page: every src/href is a data: URI or an #anchor.
    for t, a in doc.tags:
        for key in ("src", "href"):
            if key in a:
                assert a[key].startswith(("data:", "#")), (t, a)
    assert not re.search(r"(src|href)\s*=\s*[\"']?\s*(https?:)?//", page, re.I)
    # One inline script, the page's own sort/filter code: it loads and fetches nothing.
    scripts = re.findall(r"<script([^>]*)>(.*?)</script>", page, re.S | re.I)
    assert len(scripts) == 1 and scripts[0][0] == ""
    assert not re.search(r"fetch|XMLHttpRequest|import\(|https?:|\.src\s*=", scripts[0][1])
    # Table contents, escaping, and the link shown as text.
    assert "0.812 ± 0.004" in doc.cells and "Δ to best reference" in doc.cells
    assert "0.5123" in doc.cells  # floats formatted to 4 significant digits
    assert "demo &lt;report&gt;" in page and "&lt;Table 2&gt;" in page
    assert "GRACE <span class=\"ref\">(https://arxiv.org/abs/2006.04131)</span>" in page
    # Provenance in each track table's note; the page points to the stage times, which
    # stay out of it (they change on every run and the page is hashed by DVC).
    assert page.count("Produced by params") == 2
    assert "params `graph` hash" not in page  # rendered as <code>, not raw backticks
    assert f"<code>{prov.params_hashes['graph']}</code>" in page
    assert STAGE_TIMES in page and "12.5" not in doc.cells and "total (2 stages)" not in doc.cells
    # Difference column coloured by sign.
    assert '<td class="num pos">+0.004</td>' in page
    assert '<td class="num neg">-0.018</td>' in page
    assert '<td class="num">0.000</td>' in page
    # Navigation anchors match section ids.
    ids = {a.get("id") for _, a in doc.tags}
    for _, a in doc.tags:
        if a.get("href", "").startswith("#"):
            assert a["href"][1:] in ids


def test_markdown_and_html_from_the_same_sections(sections, report_dir):
    for s in sections:
        for f in s.figures:
            f.path = Path(f.path).relative_to(report_dir)
    md = render_markdown(sections, "header line")
    assert md.count("### ") == 2
    assert "![Rank@k against k](figures/code_rank.png)" in md
    page = render_html(sections, base_dir=report_dir)  # relative paths resolved via base_dir
    assert page.count("data:image/png;base64,") == 3


def test_missing_figure_names_the_file(tmp_path):
    s = Section("graph", "G", figures=[Figure("gone", tmp_path / "gone.png")])
    with pytest.raises(FileNotFoundError, match="gone.png"):
        render_html([s])


def test_empty_report_says_what_to_run():
    page = render_html([])
    assert "dvc repro" in page and "<table" not in page


def test_numeric_cells_align_right_with_markup():
    from contrastlab.reporting.html import cell_view

    v = cell_view("**64.40 ± 0.26**", "micro-F1")
    assert (v["text"], v["classes"], v["data"]) == ("**64.40 ± 0.26**", ["num"], {})
    assert cell_view("59.88 ± 0.45†", "micro-F1")["classes"] == ["num"]
    assert cell_view("+3.2", "Δ vs BM25")["classes"] == ["num", "pos"]
    assert cell_view("−1.5 %", "Δ")["classes"] == ["num", "neg"]
    assert {k: cell_view("ALL", "Method")[k] for k in ("text", "classes")} == {"text": "ALL", "classes": []}
    assert cell_view(None, "x")["text"] == "-"
    page = render_html([Section("t", "T", tables=[Table("x", ["Method", "micro-F1"],
                                                         [["ALL", "**64.40 ± 0.26**"]])])])
    assert '<td class="num"><strong>64.40 ± 0.26</strong></td>' in page
    assert "<td>ALL</td>" in page


def test_stage_timings_absent_or_empty(tmp_path):
    assert stage_timings(tmp_path / "missing") is None
    (tmp_path / "graph").mkdir()
    (tmp_path / "graph" / "a.json").write_text('{"time_s": "slow"}')
    assert stage_timings(tmp_path) is None
    assert write_stage_times(tmp_path) is None and not (tmp_path / STAGE_TIMES).exists()


def test_stage_times_go_beside_the_timings_files(report_dir):
    timings = report_dir / "metrics"
    path = write_stage_times(timings, "header line")
    assert path == timings / STAGE_TIMES
    md = path.read_text()
    assert md.startswith("# Stage wall time\n\nheader line\n")
    assert "| graph | ntxent | 12.5 |" in md and "| graph | total (2 stages) | 32.5 |" in md
    assert "| code | infonce | 3.25 |" not in md and "| code | infonce | 3.2 |" in md
    assert "no_time" not in md and "broken" not in md
    # the table file is not read back as a timing
    assert write_stage_times(timings).read_text().count("| graph | ntxent |") == 1


@pytest.mark.parametrize("text, want", [
    ("`a<b`", "<code>a&lt;b</code>"),
    ("**x** and *y*", "<strong>x</strong> and <em>y</em>"),
    ("[top](#graph)", '<a href="#graph">top</a>'),
    ("2 * 3 * 4", "2 * 3 * 4"),
    ("`**not bold**`", "<code>**not bold**</code>"),
    ("[docs](https://x.org/a?b=1&c=2)", 'docs <span class="ref">(https://x.org/a?b=1&amp;c=2)</span>'),
    ("a <b>tag</b> & simdis_eq13", "a &lt;b&gt;tag&lt;/b&gt; &amp; simdis_eq13"),
])
def test_inline_markdown(text, want):
    assert inline_markdown(text) == want


def test_report_stage_writes_both_files(tmp_path, monkeypatch):
    """The stage script end to end in an empty project (no track has run)."""
    import importlib.util

    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("report_stage", root / "stages" / "report.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    (tmp_path / "params.yaml").write_text("report:\n  title: My report\n  digits: 2\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("contrastlab.reporting.build.collect_sections", lambda root, figures: [])
    assert mod.main(["--out-dir", "out"]) == 0
    page = (tmp_path / "out" / "index.html").read_text(encoding="utf-8")
    assert "<title>My report</title>" in page and "Run: provenance" in page
    assert (tmp_path / "out" / "comparison.md").read_text().startswith("# ")
    assert (tmp_path / "out" / "summary.json").read_text() == "{}\n"

    def one_track(root, figures):
        png = sections_png(figures / "g.png")
        return [Section("graph", "Graph", tables=[Table("acc", ["loss", "acc"],
                                                        [["ntxent", 0.123456]])],
                        figures=[Figure("curve", png)])]

    monkeypatch.setattr("contrastlab.reporting.build.collect_sections", one_track)
    assert mod.main(["--out-dir", "out"]) == 0
    page = (tmp_path / "out" / "index.html").read_text(encoding="utf-8")
    md = (tmp_path / "out" / "comparison.md").read_text(encoding="utf-8")
    assert '<td class="num">0.12</td>' in page and "| ntxent | 0.12 |" in md
    assert "![curve](figures/g.png)" in md and page.count("data:image/png;base64,") == 1
    assert md.count("Produced by params `graph` hash") == 1


def sections_png(path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(2, 2), dpi=40)
    ax.plot([0, 1], [1, 0])
    fig.savefig(path, format="png")
    plt.close(fig)
    return path


def test_metrics_summary_short_names(report_dir):
    from contrastlab.reporting.provenance import metrics_summary

    s = metrics_summary(report_dir / "metrics")  # every numeric metric but wall times
    assert s == {"code": {"infonce": {"acc": 0.8}, "no_time": {"acc": 0.1}},
                 "graph": {"mixco": {"acc": 0.8}, "ntxent": {"acc": 0.8}}}
    assert metrics_summary(report_dir / "nowhere") == {}


def test_metrics_summary_keeps_only_headline_metrics(report_dir):
    from contrastlab.reporting.provenance import metrics_summary

    (report_dir / "metrics" / "graph" / "ntxent.json").write_text(
        '{"acc": 0.8, "acc_std": 0.01, "acc_seed0": 0.79, "time_s": 3.0}')
    s = metrics_summary(report_dir / "metrics", {"graph": ["acc", "missing"]})
    assert s == {"graph": {"mixco": {"acc": 0.8}, "ntxent": {"acc": 0.8}}}  # code not named


def test_wide_figures_span_the_row(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from contrastlab.reporting.html import png_size

    paths = []
    for name, size in (("wide", (8, 2)), ("square", (3, 3))):
        fig = plt.figure(figsize=size, dpi=50)
        fig.savefig(tmp_path / f"{name}.png")
        plt.close(fig)
        paths.append(tmp_path / f"{name}.png")
    assert png_size(paths[0]) == (400, 100)
    assert png_size(Path(__file__)) is None
    page = render_html([Section("g", "G", figures=[Figure("w", paths[0]), Figure("s", paths[1])])])
    assert page.count('<figure class="wide">') == 1 and page.count("<figure>") == 1
