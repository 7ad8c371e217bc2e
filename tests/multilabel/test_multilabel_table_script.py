"""scripts/multilabel_table.py: a data set's table from a folder of train_multilabel outputs
(strongest baseline on validation mAP, paired Holm differences, the report's § rule)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from contrastlab.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("ml_table", ROOT / "scripts" / "multilabel_table.py")
ml_table = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ml_table)

KEYS = ("map", "map_min10", "macro_f1_val_t", "micro_f1", "macro_f1")


def _row(d: Path, name: str, level: float, val_map: float, rng, shift: float = 0.0) -> None:
    m = {k: level for k in KEYS}
    m.update(val_map=val_map, n_seeds=3)
    (d / f"ds_{name}.json").write_text(json.dumps(m))
    common = rng.standard_normal(1000) * 0.01
    np.savez(d / "reps" / f"ds_{name}.npz",
             **{k: level + shift + common + rng.standard_normal(1000) * 0.002 for k in KEYS})


def test_table_tests_each_row_against_the_baseline_best_on_validation(tmp_path):
    (tmp_path / "reps").mkdir()
    rng = np.random.default_rng(0)
    _row(tmp_path, "knn", 0.30, 0.40, rng)          # best baseline on validation
    _row(tmp_path, "extratrees", 0.35, 0.30, rng)   # better on test, worse on validation
    _row(tmp_path, "mulsupcon", 0.20, 0.50, rng, shift=-0.05)  # replicates far below: §
    t = ml_table.table(tmp_path, "ds")
    assert t["baseline"] == "knn"
    ms = t["rows"]["mulsupcon"]["macro_f1_val_t"]
    assert ms["delta"] == pytest.approx(-0.10) and ms["below"] and ms["p_holm"] < 0.05
    et = t["rows"]["extratrees"]["map"]
    assert et["delta"] == pytest.approx(0.05) and et["above"]
    assert t["rows"]["knn"]["map_frequent"]["mean"] == pytest.approx(0.30)  # k = 10 copied in
    bad = t["rows"]["mulsupcon"]["map"]
    assert bad["no_ci"] and bad["ci_low"] is None and bad["ci_high"] is None  # never written
    good = t["rows"]["knn"]["map"]
    assert not good["no_ci"] and good["ci_low"] <= good["mean"] <= good["ci_high"]
    md = ml_table.markdown(t, "ds")
    line = next(x for x in md.splitlines() if x.startswith("| MulSupCon"))
    assert "20.00 §" in line and "▼" in line  # its interval excludes its estimate: not shown


def test_a_folder_without_two_rows_is_refused(tmp_path):
    (tmp_path / "reps").mkdir()
    _row(tmp_path, "knn", 0.30, 0.40, np.random.default_rng(1))
    with pytest.raises(InputError, match="fewer than two rows"):
        ml_table.table(tmp_path, "ds")


def test_several_folders_take_each_row_from_the_first_that_has_it(tmp_path):
    tuned, default = tmp_path / "tuned", tmp_path / "default"
    for d in (tuned, default):
        (d / "reps").mkdir(parents=True)
    rng = np.random.default_rng(2)
    _row(tuned, "mulsupcon", 0.40, 0.50, rng)        # tuned: wins over its default run
    _row(default, "mulsupcon", 0.20, 0.30, rng)
    _row(default, "extratrees", 0.30, 0.45, rng)     # not tuned: its declared-values run
    (tuned / "ds_knn.json").write_text(json.dumps({"map": 0.9, "val_map": 0.9, "n_seeds": 1}))
    _row(default, "knn", 0.25, 0.10, rng)            # tuned json without replicates: default used
    t = ml_table.table([tuned, default], "ds")
    assert t["source"] == {"mulsupcon": str(tuned), "extratrees": str(default), "knn": str(default)}
    assert t["rows"]["mulsupcon"]["map"]["mean"] == pytest.approx(0.40)
    assert t["rows"]["knn"]["map"]["mean"] == pytest.approx(0.25)
    assert t["baseline"] == "extratrees"
    assert t["rows"]["mulsupcon"]["map"]["delta"] == pytest.approx(0.10)


@pytest.mark.parametrize("cov, k, hidden", [
    ({"map_min20pos": 0.95, "macro_f1": 0.95}, 20, {"map"}),            # k = 20 covers
    ({"macro_f1": 0.95}, None, {"map", "map_frequent"}),                # no k covers
])
def test_coverage_file_gives_k_and_hides_uncovered_map_intervals(tmp_path, cov, k, hidden):
    (tmp_path / "reps").mkdir()
    rng = np.random.default_rng(3)
    for name, level, val in (("knn", 0.30, 0.40), ("mulsupcon", 0.25, 0.30)):
        _row(tmp_path, name, level, val, rng)
        m = json.loads((tmp_path / f"ds_{name}.json").read_text())
        m["map_min20"] = level + 0.1
        (tmp_path / f"ds_{name}.json").write_text(json.dumps(m))
        with np.load(tmp_path / "reps" / f"ds_{name}.npz") as z:
            r = {key: z[key] for key in z.files}
        r["map_min20"] = r["map"] + 0.1
        np.savez(tmp_path / "reps" / f"ds_{name}.npz", **r)
    f = tmp_path / "coverage.json"
    f.write_text(json.dumps({"ds": cov}))
    t = ml_table.table(tmp_path, "ds", coverage=f)
    assert t["frequent_k"] == k
    for key in ("map", "map_frequent"):
        c = t["rows"]["knn"].get(key)
        if key in hidden:
            assert c is None or (c["no_cover"] and c["ci_low"] is None)
        else:
            assert not c["no_cover"] and c["ci_low"] <= c["mean"] <= c["ci_high"]
            assert c["mean"] == pytest.approx(0.40)  # map_min20 copied into the column
    assert t["rows"]["knn"]["macro_f1"]["ci_low"] is not None
    md = ml_table.markdown(t, "ds")
    assert ("30.00 °" in md) and (("no k covers" in md) == (k is None))
    with pytest.raises(InputError, match="no coverage simulated"):
        ml_table.table(tmp_path, "other", coverage=f)

