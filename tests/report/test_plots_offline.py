"""``dvc plots show`` / ``dvc plots diff`` render offline in headless Chromium.

The pages use the offline template ``.dvc/plots/offline.html`` (``plots.html_template`` in
``.dvc/config``; Vega, Vega-Lite and vega-embed inlined by ``scripts/vendor_vega.py``): every
top-level plot of ``dvc.yaml`` whose files exist is drawn (a canvas or an SVG with a size),
variants overlaid in one chart per track, nothing is fetched from the network and the console
has no error. Needs Chromium (see ``conftest.py``); the pipeline's committed CSVs are the data.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import yaml
from _dvcstatus import run_dvc_in_root

pytestmark = pytest.mark.browser
ROOT = Path(__file__).resolve().parents[2]


def test_template_is_offline_and_matches_the_vendored_versions():
    page = (ROOT / ".dvc" / "plots" / "offline.html").read_text(encoding="utf-8")
    assert "{plot_divs}" in page and "{scripts}" not in page  # DVC's CDN tags are dropped
    assert not re.search(r"<script[^>]+src=", page)
    versions = json.loads((ROOT / ".dvc" / "plots" / "vendor" / "VERSIONS.json").read_text())
    import hashlib

    for name, v in versions.items():
        assert f"<!-- {name} {v['version']} ({v['license']})" in page
        assert (ROOT / ".dvc" / "plots" / "vendor" / f"LICENSE-{name}").read_text().strip()
        body = page.split(f"<!-- {name} {v['version']}", 1)[1].split(">", 2)[2]
        js = body.split("</script>", 1)[0]
        assert hashlib.sha256(js.encode()).hexdigest() == v["sha256_inlined"]


def _expected_plots() -> dict[str, list[str]]:
    """Top-level plot id -> its files that exist (plots without any file are not drawn)."""
    spec = yaml.safe_load((ROOT / "dvc.yaml").read_text())
    out = {}
    for entry in spec["plots"]:
        (pid, props), = entry.items()
        files = [f for f in props["y"] if (ROOT / f).exists()]
        if files:
            out[pid] = files
    return out


@pytest.mark.parametrize("command", [["plots", "show"], ["plots", "diff", "HEAD"]])
@pytest.mark.slow
def test_dvc_plots_render_offline(browser, tmp_path, command):
    out = tmp_path / "plots"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DVC_")}
    p = run_dvc_in_root(ROOT, [*command, "-o", str(out)], env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    page = out / "index.html"
    html = page.read_text(encoding="utf-8")
    assert "cdn.jsdelivr" not in html
    expected = _expected_plots()
    assert {"graph_loss", "code_rank_at_k"} <= set(expected), "pipeline plots CSVs missing"

    browser.get_log("browser")
    browser.get(page.resolve().as_uri())
    browser.set_script_timeout(60)
    info = browser.execute_async_script("""
        const done = arguments[arguments.length - 1];
        const ids = arguments[0];
        const t0 = Date.now();
        (function poll() {
          const res = {};
          for (const id of ids) {
            const el = document.getElementById(id);
            const g = el && el.querySelector('canvas, svg.marks');
            res[id] = g ? [g.getBoundingClientRect().width, g.getBoundingClientRect().height]
                        : null;
          }
          const ready = Object.values(res).every(v => v && v[0] > 0);
          if (ready || Date.now() - t0 > 30000) {
            done({plots: res,
                  resources: performance.getEntriesByType('resource').map(r => r.name)});
          } else { setTimeout(poll, 200); }
        })();""", list(expected))
    for pid, size in info["plots"].items():
        assert size and size[0] > 100 and size[1] > 50, (pid, size)
    assert all(r.startswith(("data:", "file:", "blob:")) for r in info["resources"]), \
        info["resources"]
    errors = [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
    assert errors == [], errors
    # variants overlaid: one chart per track holds every variant's file (by base name)
    for pid in ("graph_loss", "code_rank_at_k"):
        script = html.split(f'<div id = "{pid}"', 1)[1].split("</script>", 1)[0]
        spec, _ = json.JSONDecoder().raw_decode(script.split("var spec = ", 1)[1])
        names = {v["filename"] for v in spec["data"]["values"]}
        assert names == {Path(f).name for f in expected[pid]}, (pid, names)
