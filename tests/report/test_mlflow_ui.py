"""The MLflow UI's Compare view shows a variant's params next to its evaluation metric.

Performs the MLflow steps of docs/usage.md in headless Chromium: two graph variants are tracked the
way the stages track them (``variant_run`` from the training stage, then again from the
evaluation stage, inside one DVC experiment), ``mlflow server`` is started on loopback
(a free port, a temporary SQLite store), the model-training view of ``contrastlab-graph``
is opened, the search box selects the variant runs, the experiment's parent run is expanded,
both variant runs are ticked and **Compare** is pressed. In the Compare page the
``temperature`` row and the ``logreg_acc_mean`` row hold each run's values in the same column
as its run name. The server is stopped in teardown. Needs Chromium (see ``conftest.py``).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]
VARIANTS = {"ntxent": (0.4, 0.817), "mixco": (0.2, 0.8012)}  # temperature, probe accuracy
EXP_NAME = "tangy-rail"
FILTER = "tags.`contrastlab.role` = 'variant'"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def tracked_store(tmp_path_factory):
    """A SQLite store holding two variants, each tracked by a train and an evaluate stage."""
    tmp = tmp_path_factory.mktemp("mlflow-ui")
    uri = f"sqlite:///{tmp / 'mlflow.db'}"
    mp = pytest.MonkeyPatch()
    mp.setenv("MLFLOW_TRACKING_URI", uri)
    mp.setenv("CONTRASTLAB_MLFLOW", "1")
    mp.delenv("RANK", raising=False)
    from contrastlab.invocation import Invocation, using
    from contrastlab.tracking import variant_run

    ids = {}
    inv = using(Invocation(experiment=EXP_NAME))  # a dvc exp run experiment's name
    inv.__enter__()
    try:
        for v, (t, acc) in VARIANTS.items():
            params = {"loss": v, "temperature": t}
            with variant_run("graph", v, params, stage=f"train_graph@{v}") as tr:
                for seed in (0, 1):
                    with tr.seed_run(seed) as s:
                        for ep in range(3):
                            s.log_metrics({"loss": 2.0 - 0.1 * ep - t}, step=ep)
            with variant_run("graph", v, params, stage=f"evaluate_graph@{v}") as tr:
                tr.log_metrics({"logreg_acc_mean": acc})
                ids[v] = tr.run_id
    finally:
        inv.__exit__(None, None, None)
        mp.undo()
    return tmp, uri, ids


@pytest.fixture(scope="module")
def server(tracked_store):
    """``mlflow server`` on 127.0.0.1:<free port> against the store; stopped in teardown."""
    tmp, uri, _ = tracked_store
    port = _free_port()
    mlflow = Path(sys.executable).with_name("mlflow")
    log = open(tmp / "server.log", "w")
    proc = subprocess.Popen(
        [str(mlflow) if mlflow.exists() else "mlflow", "server", "--backend-store-uri", uri,
         "--default-artifact-root", (tmp / "mlartifacts").as_uri(),
         "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=tmp)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                with urllib.request.urlopen(f"{base}/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail("mlflow server did not start:\n" + (tmp / "server.log").read_text())
            time.sleep(1)
        yield base
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        log.close()


def test_compare_view_shows_temperature_next_to_probe_accuracy(browser, server, tracked_store):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    from selenium.common.exceptions import (ElementClickInterceptedException,
                                            ElementNotInteractableException,
                                            StaleElementReferenceException)

    # the runs grid re-renders while data arrives, and a loading overlay may cover an element
    # for a moment: retry on stale, covered or not yet interactable elements, click included
    wait = WebDriverWait(browser, 60, ignored_exceptions=[StaleElementReferenceException,
                                                          ElementClickInterceptedException,
                                                          ElementNotInteractableException])

    def click(locator) -> None:
        def attempt(d) -> bool:
            d.find_element(*locator).click()
            return True
        wait.until(attempt)

    def click_text(text: str) -> None:
        click((By.XPATH, f"//*[normalize-space(text())='{text}']"))

    # step 2: the model-training view (top-left toggle), Experiments, the track's experiment
    browser.get(server)
    click_text("Model training")
    click_text("Experiments")
    click((By.LINK_TEXT, "contrastlab-graph"))
    wait.until(lambda d: "/runs" in d.current_url and "machine_learning" in d.current_url)
    # step 3: the variant runs
    box = wait.until(EC.element_to_be_clickable(
        (By.CSS_SELECTOR, "input[placeholder*='metrics.']")))
    box.clear()
    box.send_keys(FILTER, Keys.ENTER)
    # step 4: expand the DVC experiment's parent run, tick both variants, Compare
    wait.until(lambda d: any(EXP_NAME in r.text for r in
                             d.find_elements(By.CSS_SELECTOR, "div[role=row]")))
    click((By.CSS_SELECTOR, "button[data-component-id$='runnamecellrenderer.tsx_46']"))
    names = {f"{v} · {EXP_NAME}" for v in VARIANTS}

    def variant_rows(d):
        rows = [r for r in d.find_elements(By.CSS_SELECTOR, "div[role=row]")
                if r.text.split("\n")[1:2] and r.text.split("\n")[1] in names]
        return rows if len(rows) == len(names) else False

    def tick(d, name: str) -> bool:
        (row,) = [r for r in variant_rows(d) or [] if r.text.split("\n")[1] == name] or [None]
        if row is None:
            return False
        box = row.find_element(By.CSS_SELECTOR, "input[type=checkbox]")
        if not box.is_selected():
            box.click()
        return box.is_selected()

    for name in sorted(names):
        wait.until(lambda d, n=name: tick(d, n))
    compare = wait.until(lambda d: next((b for b in d.find_elements(By.TAG_NAME, "button")
                                         if b.text.strip() == "Compare" and b.is_enabled()),
                                        False))
    compare.click()
    wait.until(lambda d: "compare-runs" in d.current_url)
    wait.until(lambda d: "logreg_acc_mean" in d.find_element(By.TAG_NAME, "body").text)
    # Run details / Parameters are tables, Metrics a virtualised grid: a value belongs to the
    # run whose name cell spans the same horizontal interval.
    cells = wait.until(lambda d: _cells(d) if any(c["t"] == "logreg_acc_mean"
                                                     and c["kind"] == "grid"
                                                     for c in _cells(d)) else False)

    def row(label: str) -> list[dict]:
        (head,) = [c for c in cells if c["t"] == label][:1] or [None]
        assert head is not None, (label, cells)
        return [c for c in cells if c["top"] == head["top"] and c["kind"] == head["kind"]
                and c is not head]

    names, temps, accs = row("Run Name:"), row("temperature"), row("logreg_acc_mean")
    for v, (t, acc) in VARIANTS.items():
        (name,) = [c for c in names if c["t"] == f"{v} · {EXP_NAME}"]
        x = (name["l"] + name["r"]) / 2
        (temp,) = [c for c in temps if c["l"] <= x <= c["r"]]
        (metric,) = [c for c in accs if c["l"] <= x <= c["r"]]
        assert float(temp["t"]) == t, (v, temp)
        assert float(metric["t"]) == round(acc, 3), (v, metric)  # the UI shows 3 decimals
    browser.save_screenshot(str(tracked_store[0] / "compare.png"))


CELLS_JS = """
const out = [];
const add = (el, kind) => { const b = el.getBoundingClientRect();
  out.push({kind, t: el.innerText.trim(), l: b.left, r: b.right, top: Math.round(b.top)}); };
document.querySelectorAll('tr > td, tr > th').forEach(c => add(c, 'table'));
document.querySelectorAll('.ReactVirtualized__Grid__innerScrollContainer > *')
  .forEach(c => add(c, 'grid'));
return out;"""


def _cells(driver) -> list[dict]:
    """Text and horizontal extent of every table cell and virtualised-grid cell."""
    return driver.execute_script(CELLS_JS)
