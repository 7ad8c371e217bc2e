"""The committed bibtex tables (reports/metrics/multilabel_bibtex/, runs made outside the
pipeline under presets/multilabel-bibtex.yaml) are what scripts/multilabel_table.py computes from
the committed runs, and every interval they show contains its estimate and has simulated
coverage within the target at bibtex's shape."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
M = ROOT / "reports" / "metrics" / "multilabel_bibtex"
spec = importlib.util.spec_from_file_location("ml_table", ROOT / "scripts" / "multilabel_table.py")
ml_table = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ml_table)

TABLES = {"default_table.json": ["default"], "tuned_table.json": ["tuned"],
          "combined_table.json": ["tuned", "default"], "steps2000_table.json": ["steps2000", "default"]}


@pytest.mark.parametrize("name", sorted(TABLES))
def test_committed_table_is_recomputed_from_the_committed_runs(name):
    committed = json.loads((M / name).read_text())
    dirs = [M / d for d in TABLES[name]]
    fresh = json.loads(json.dumps(ml_table.table(dirs, "bibtex", coverage=M / "coverage.json")))
    assert fresh["baseline"] == committed["baseline"] and fresh["n_seeds"] == committed["n_seeds"]
    assert fresh["frequent_k"] == committed["frequent_k"]
    assert set(fresh["rows"]) == set(committed["rows"])
    for row, cells in committed["rows"].items():
        for key, c in cells.items():
            f = fresh["rows"][row][key]
            for field in ("mean", "ci_low", "ci_high", "delta", "p_holm"):
                if c[field] is None:
                    assert f[field] is None, (name, row, key, field)
                else:
                    assert f[field] == pytest.approx(c[field], rel=1e-9, abs=1e-12), (name, row, key, field)
            assert (f["above"], f["below"], f["no_ci"]) == (c["above"], c["below"], c["no_ci"])


def test_committed_intervals_contain_their_estimates_and_cover():
    cov = json.loads((M / "coverage.json").read_text())["bibtex"]
    assert cov and all(0.92 <= v <= 0.98 for v in cov.values())
    for name in TABLES:
        for row, cells in json.loads((M / name).read_text())["rows"].items():
            for key, c in cells.items():
                if c["ci_low"] is not None:
                    assert key in cov, (name, row, key)  # only covering metrics get an interval
                    assert c["ci_low"] <= c["mean"] <= c["ci_high"], (name, row, key)
                elif key.startswith("map"):
                    assert c["no_cover"]  # no k covers at bibtex's shape: no mAP interval
