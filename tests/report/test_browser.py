"""The rendered report in a real browser: headless Chromium opens ``index.html`` from disk.

Needs the Debian packages ``chromium`` and ``chromium-driver`` (``.ci/run`` installs them when
missing) and selenium; the tests are skipped, with the reason, only when those are absent.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from _dvcstatus import skip_if_report_changed

from contrastlab.reporting.html import render_html

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]


def _open_and_check(driver, page: Path, shot: Path) -> dict:
    """Open ``page`` from disk; return what the page holds. Asserts images and console."""
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get_log("browser")  # drop anything logged before this page
    uri = page.resolve().as_uri()
    driver.get(uri)
    # get() can return before a large page is parsed to its end (seen on a loaded CI machine:
    # the last section had no figure yet); measure only this page's whole document.
    WebDriverWait(driver, 60).until(lambda d: d.execute_script(
        "return [document.URL, document.readyState]") == [uri, "complete"])
    glance = _at_a_glance(driver)
    # collapsed details (the track's tables and other figures) open, as a reader would
    driver.execute_script("document.querySelectorAll('details').forEach(d => d.open = true);")
    info = driver.execute_script("""
        const imgs = [...document.querySelectorAll('figure img')];
        return {
          tables: [...document.querySelectorAll('table')].map(t => ({
              id: t.id, rows: t.tBodies[0] ? t.tBodies[0].rows.length : 0,
              caption: t.caption ? t.caption.textContent : '',
              section: t.closest('section') ? t.closest('section').id : null,
              visible: t.getBoundingClientRect().width > 0})),
          figures: imgs.map(i => ({complete: i.complete, w: i.naturalWidth, h: i.naturalHeight,
              alt: i.alt, section: i.closest('section') ? i.closest('section').id : null,
              caption: i.closest('figure').querySelector('figcaption').textContent})),
          sections: [...document.querySelectorAll('section')].map(s => s.id),
          resources: performance.getEntriesByType('resource').map(r => r.name),
          title: document.title,
        };""")
    for f in info["figures"]:
        assert f["complete"] and f["w"] > 0 and f["h"] > 0, f
        assert f["caption"].strip(), f
    for t in info["tables"]:
        assert t["rows"] > 0 and t["visible"] and t["caption"].strip(), t
    # Offline: nothing fetched except from disk or data: URIs.
    assert all(r.startswith(("data:", "file:")) for r in info["resources"]), info["resources"]
    errors = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
    assert errors == [], errors
    png = driver.get_screenshot_as_png()
    shot.write_bytes(png)
    _assert_non_blank_png(png)
    info["glance"] = glance
    return info


#: The width a reader's window has (issue 40): the figure must show above the fold there.
WIDTH, HEIGHT = 1400, 1000


def _at_a_glance(driver) -> dict:
    """Per section with a lead figure, measured at :data:`WIDTH` with every details closed
    and the section's heading scrolled to the top: where the first figure is, the words of
    the headline, the figure's short labels and the legend's terms."""
    driver.set_window_size(WIDTH, HEIGHT)
    return driver.execute_script(r"""
        const out = {};
        for (const s of document.querySelectorAll('section')) {
          const fig = s.querySelector(':scope > .lead figure');
          if (!fig) continue;
          const h2 = s.querySelector('h2');
          h2.scrollIntoView({block: 'start'});
          const img = fig.querySelector('img'), top = h2.getBoundingClientRect().top;
          const r = img.getBoundingClientRect();
          const hl = s.querySelector(':scope > p.headline');
          out[s.id] = {
            top: r.top - top, bottom: r.bottom - top, width: r.width, height: r.height,
            loaded: img.complete && img.naturalWidth > 0, view: window.innerHeight,
            viewWidth: window.innerWidth,
            words: hl ? hl.textContent.trim().split(/\s+/).length : 0,
            labels: (fig.dataset.labels || '').split('\n').filter(x => x),
            legend: [...s.querySelectorAll(':scope > dl.legend dt')].map(d => d.textContent),
            openDetails: [...s.querySelectorAll('details')].filter(d => d.open).length,
            firstIsFigure: s.querySelector(':scope > .lead') ===
                s.querySelector(':scope > h2 ~ :not(p.headline)'),
          };
        }
        window.scrollTo(0, 0);
        return out;""")


def _assert_at_a_glance(glance: dict, sections: list[str]) -> None:
    """Each track's figure is the first thing after its headline, loaded and entirely
    visible with the heading at the top of a 1400 px wide window; the headline is at most
    about 60 words; the legend spells out every short label of the figure; the details
    start collapsed."""
    assert sorted(glance) == sorted(sections), glance.keys()
    for sid, g in glance.items():
        assert g["viewWidth"] == WIDTH, g
        assert g["loaded"] and g["width"] > 400 and g["height"] > 150, (sid, g)
        assert g["firstIsFigure"], sid
        assert 0 < g["top"] and g["bottom"] <= g["view"], (sid, g)  # above the fold
        assert 10 <= g["words"] <= 60, (sid, g["words"])
        assert g["labels"] and set(g["labels"]) <= set(g["legend"]), (sid, g)
        assert len(g["legend"]) == len(set(g["legend"])), sid  # each spelled out once
        assert g["openDetails"] == 0, sid


def _assert_non_blank_png(png: bytes) -> None:
    from PIL import Image

    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    img = Image.open(io.BytesIO(png)).convert("L")
    assert img.size[0] >= 800 and img.size[1] >= 600, img.size
    lo, hi = img.getextrema()
    assert hi - lo > 100, "screenshot is blank"
    # Text, tables and plots: many grey levels, and a good share of non-white pixels.
    hist = img.histogram()
    assert sum(1 for c in hist if c) > 20
    assert sum(hist[:200]) > 0.01 * img.size[0] * img.size[1]


def test_synthetic_report_in_chromium(browser, sections, report_dir):
    page = report_dir / "index.html"
    page.write_text(render_html(sections, title="browser test", base_dir=report_dir),
                    encoding="utf-8")
    info = _open_and_check(browser, page, report_dir / "screenshot.png")
    assert info["title"] == "browser test"
    assert info["sections"] == ["graph", "code"]
    assert [t["section"] for t in info["tables"]] == ["graph", "code"]
    assert [f["section"] for f in info["figures"]] == ["graph", "graph", "code"]
    assert info["figures"][0]["w"] == 180  # 3 in x 60 dpi, decoded from the data URI


def test_built_report_in_chromium(browser, tmp_path):
    """The pipeline's own ``reports/index.html`` (after ``dvc repro``): every track that has
    metrics has a section with at least one table and one loaded figure, and its comparison
    figure, headline and legend pass :func:`_assert_at_a_glance`."""
    page = ROOT / "reports" / "index.html"
    metrics = ROOT / "reports" / "metrics"
    tracks = sorted(p.name for p in metrics.iterdir()
                    if p.is_dir() and any(p.rglob("*.json"))) if metrics.is_dir() else []
    if not page.exists() or not tracks:
        pytest.skip("reports/index.html or track metrics absent: run `dvc repro` first")
    skip_if_report_changed(ROOT, "run `dvc repro report`")
    info = _open_and_check(browser, page, tmp_path / "screenshot.png")
    for tr in tracks:
        section = tr.split("_")[0]  # code_seed_corpus: the code section's second table
        assert section in info["sections"], f"track {tr} has metrics but no section"
        assert any(t["section"] == section for t in info["tables"]), f"no table for {tr}"
        assert any(f["section"] == section for f in info["figures"]), f"no figure for {tr}"
    # each track's answer at a glance: figure above the fold, short headline, full legend
    _assert_at_a_glance(info["glance"], sorted({tr.split("_")[0] for tr in tracks}))
    if "code_seed_corpus" in tracks:  # its own table, after the default one
        assert sum(t["section"] == "code" for t in info["tables"]) >= 2


def _glance_sections(report_dir: Path) -> list:
    """Two track sections as the report stage builds them (``figures.attach``) at the real
    report's sizes: one table of 25 rows (code) and 6 data sets x 15 rows (multi-label,
    with a companion figure), each with a 30-row table."""
    import numpy as np

    from contrastlab.reporting import Cell, Figure, Section, Table
    from contrastlab.reporting.figures import Comparison, Panel, Row
    from contrastlab.reporting.headline import attach

    rng = np.random.default_rng(1)
    kinds = ["loss", "baseline", "hybrid"]

    def panel(title: str, n: int) -> Panel:
        est = np.sort(rng.uniform(0.2, 0.8, n))[::-1]
        rows = [Row(f"r{i}", f"RRF(BM25, Loss{i} (zs))" if i % 3 == 2 else f"Loss {i} (zs)",
                    f"row {i}: a long name, from the zero-shot map", kinds[i % 3], float(e),
                    float(e) - 0.03, float(e) + 0.03, i < 3, i == 1)
                for i, e in enumerate(est)]
        return Panel(title, rows)

    out = []
    for track, comp in (("code", Comparison("test Rank@10", [panel("", 25)])),
                        ("multilabel", Comparison("test mAP", [panel(f"ds{i}", 15)
                                                               for i in range(6)],
                                                  primary=None))):
        table = Table("all rows", ["row", "score"],
                      [[f"row {i}: a long name, from the zero-shot map",
                        Cell(i / 30, i / 30 - 0.01, i / 30 + 0.01)] for i in range(30)])
        sec = Section(track, track.title(), headline="The track's full paragraph.",
                      tables=[table, Table("short", ["a", "b"], [["x", 2.0], ["y", 1.0]])])
        if track == "multilabel":
            cd = report_dir / "figures" / "graph_bar.png"
            sec.figures.append(Figure("CD diagram", cd, "companion"))
            comp.lead = [sec.figures[-1]]
        sec.comparison = comp
        attach(sec, report_dir / "figures")
        out.append(sec)
    return out


@pytest.mark.slow
def test_each_track_at_a_glance_in_chromium(browser, sections, report_dir):
    secs = _glance_sections(report_dir)
    page = report_dir / "glance.html"
    page.write_text(render_html(secs, title="glance", base_dir=report_dir), encoding="utf-8")
    info = _open_and_check(browser, page, report_dir / "glance.png")
    _assert_at_a_glance(info["glance"], ["code", "multilabel"])
    # the long table was collapsed, the short one not; the companion figure sits in the lead
    assert browser.execute_script(
        "return [...document.querySelectorAll('details.long')].map(d => d.closest('section').id)"
    ) == ["code", "multilabel"]
    assert browser.execute_script(
        "return document.querySelectorAll('#multilabel > .lead figure').length") == 2
    # sort by a click on a heading (numbers by data-value), then reverse; filter by the box
    col = """return [...document.querySelectorAll('#code-table-0 tbody tr')]
                 .filter(r => !r.hidden).map(r => parseFloat(r.cells[1].dataset.value));"""
    head = browser.find_element("css selector", "#code-table-0 thead th:nth-child(2)")
    head.click()
    desc = browser.execute_script(col)
    assert desc == sorted(desc, reverse=True) and len(desc) == 30
    head.click()
    assert browser.execute_script(col) == sorted(desc)
    box = browser.find_element("css selector", "#code .table-wrap input.filter")
    box.send_keys("rrf(")  # the first column shows short labels: RRF(BM25, ...) rows
    assert len(browser.execute_script(col)) == len(range(2, 25, 3))
