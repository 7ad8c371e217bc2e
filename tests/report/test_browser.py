"""The rendered report in a real browser: headless Chromium opens ``index.html`` from disk.

Needs the Debian packages ``chromium`` and ``chromium-driver`` (``.ci/run`` installs them when
missing) and selenium; the tests are skipped, with the reason, only when those are absent.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from contrastlab.reporting.html import render_html

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]


def _open_and_check(driver, page: Path, shot: Path) -> dict:
    """Open ``page`` from disk; return what the page holds. Asserts images and console."""
    driver.get_log("browser")  # drop anything logged before this page
    driver.get(page.resolve().as_uri())
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
    return info


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


def _report_stage_changed() -> bool:
    """True when DVC says the ``report`` stage's deps or outs changed since it last ran.

    (File times cannot tell: a fresh clone checks files out in arbitrary order.)"""
    import shutil
    import subprocess
    import sys

    dvc = shutil.which("dvc") or str(Path(sys.executable).parent / "dvc")
    r = subprocess.run([dvc, "status", "report", "--json"], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    return r.returncode != 0 or r.stdout.strip() not in ("{}", "")


def test_built_report_in_chromium(browser, tmp_path):
    """The pipeline's own ``reports/index.html`` (after ``dvc repro``): every track that has
    metrics has a section with at least one table and one loaded figure."""
    page = ROOT / "reports" / "index.html"
    metrics = ROOT / "reports" / "metrics"
    tracks = sorted(p.name for p in metrics.iterdir()
                    if p.is_dir() and any(p.rglob("*.json"))) if metrics.is_dir() else []
    if not page.exists() or not tracks:
        pytest.skip("reports/index.html or track metrics absent: run `dvc repro` first")
    if _report_stage_changed():
        pytest.skip("reports/index.html is out of date (`dvc status report` lists changes): "
                    "run `dvc repro report`")
    info = _open_and_check(browser, page, tmp_path / "screenshot.png")
    for tr in tracks:
        section = tr.split("_")[0]  # code_seed_corpus: the code section's second table
        assert section in info["sections"], f"track {tr} has metrics but no section"
        assert any(t["section"] == section for t in info["tables"]), f"no table for {tr}"
        assert any(f["section"] == section for f in info["figures"]), f"no figure for {tr}"
    if "code_seed_corpus" in tracks:  # its own table, after the default one
        assert sum(t["section"] == "code" for t in info["tables"]) >= 2
