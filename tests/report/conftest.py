"""Fixtures for the report tests: synthetic sections with real matplotlib PNGs; a headless
Chromium (``browser``) for the tests marked ``browser``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from contrastlab.reporting import Figure, Section, Table


def _bar_png(path: Path, values: list[float], color: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(3, 2), dpi=60)
    ax.bar(range(len(values)), values, yerr=[0.05] * len(values), color=color, capsize=3)
    ax.set_title(path.stem)
    fig.tight_layout()
    fig.savefig(path, format="png")
    plt.close(fig)
    return path


@pytest.fixture(autouse=True)
def _matplotlib_rc_restored():
    """The report style (``reporting.style.apply``) changes rcParams globally: undo it after
    each test so that figure sizes in later tests do not depend on test order."""
    import matplotlib

    with matplotlib.rc_context():
        yield


@pytest.fixture
def report_dir(tmp_path: Path) -> Path:
    """A ``reports/``-like folder with ``figures/`` and two tracks' metrics JSON."""
    out = tmp_path / "reports"
    (out / "figures").mkdir(parents=True)
    for track, variant, t in [("graph", "ntxent", 12.5), ("graph", "mixco", 20.0),
                              ("code", "infonce", 3.25)]:
        d = out / "metrics" / track
        d.mkdir(parents=True, exist_ok=True)
        (d / f"{variant}.json").write_text(json.dumps({"acc": 0.8, "time_s": t}))
    (out / "metrics" / "code" / "broken.json").write_text("{not json")
    (out / "metrics" / "code" / "no_time.json").write_text(json.dumps({"acc": 0.1}))
    return out


@pytest.fixture
def sections(report_dir: Path) -> list[Section]:
    """Two track sections: tables with reference rows and a difference column, 3 figures."""
    fig = report_dir / "figures"
    graph = Section(
        track="graph", title="Graph SSL on Cora",
        notes=["Linear probe accuracy over **3 seeds**; see [GRACE](https://arxiv.org/abs/2006.04131)."],
        tables=[Table(
            title="Cora linear-probe accuracy",
            columns=["loss", "accuracy", "Δ to best reference"],
            rows=[["ntxent (ours)", "0.812 ± 0.004", "+0.004"],
                  ["mixco (ours)", "0.790 ± 0.010", "-0.018"],
                  ["GRACE (paper)", "0.808", "0.000"]],
            note="Reference rows from the seed notebook & the paper <Table 2>.")],
        figures=[Figure("Accuracy by loss", _bar_png(fig / "graph_bar.png", [0.81, 0.79], "C0"),
                        caption="mean ± std over seeds"),
                 Figure("Training loss", _bar_png(fig / "graph_curve.png", [1.0, 0.5, 0.2], "C1"))],
    )
    code = Section(
        track="code", title="Code retrieval",
        tables=[Table(title="Rank@k", columns=["loss", "Rank@1", "MRR"],
                      rows=[["infonce", 0.51234, 0.6], ["cosine", 0.4, 0.5]])],
        figures=[Figure("Rank@k against k", _bar_png(fig / "code_rank.png", [0.5, 0.7, 0.9], "C2"),
                        caption="k = 1, 5, 10")],
    )
    return [graph, code]


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1280,1600"]


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """A headless Chromium driven by chromedriver, with a fresh profile; console log captured."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError as e:  # pragma: no cover - selenium is in requirements.txt
        pytest.skip(f"selenium is not installed: {e}")
    for exe, pkg in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not Path(exe).exists():
            pytest.skip(f"{exe} not found: install the Debian package `{pkg}` "
                        "(`apt-get install -y chromium chromium-driver`; .ci/run does this)")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for f in FLAGS:
        opts.add_argument(f)
    opts.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    try:
        driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    except Exception as e:  # a broken install: say why rather than fail every test
        pytest.skip(f"headless Chromium did not start: {type(e).__name__}: {e}")
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()
