"""A table built from runs that predate the record of validation picks says so in its note
(reporting.picks.unrecorded_note), and only such a table."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from contrastlab.reporting.picks import unrecorded_note

ROOT = Path(__file__).resolve().parents[2]


def _write(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj))


def test_the_note_appears_only_when_no_run_records_a_pick(tmp_path):
    _write(tmp_path / "old" / "a.json", {"best_step": [20, 40], "metrics": {"map": 0.5}})
    _write(tmp_path / "old" / "reps" / "b.json", [{"threshold": 0.3}])
    note = unrecorded_note(tmp_path, "old")
    assert "reports/metrics/old/" in note and "no margin" in note
    # one run, nested anywhere, with a picks record or a margin: the folder records its picks
    _write(tmp_path / "new" / "a.json", {"best_step": [20]})
    _write(tmp_path / "new" / "reps" / "b.json", [{"seed": 0, "picks": {"threshold": {}}}])
    assert unrecorded_note(tmp_path, "new") == ""
    _write(tmp_path / "curve" / "c.json", {"points": [{"margin_val_hits_at_10": 3}]})
    assert unrecorded_note(tmp_path, "curve") == ""
    assert unrecorded_note(tmp_path, "absent") != ""  # nothing recorded: said, never silent


@pytest.mark.skipif(not (ROOT / "reports" / "comparison.md").exists(), reason="no committed report")
def test_the_report_names_every_shown_folder_without_margins_and_no_other():
    """Every metrics folder the report reads whose runs record no margin (the presets run before
    the record existed) is named by the sentence; a folder whose runs record margins never is."""
    text = (ROOT / "reports" / "comparison.md").read_text(encoding="utf-8")
    named = set(re.findall(r"Margins: the runs in reports/metrics/([\w-]+)/ predate", text))
    metrics = ROOT / "reports" / "metrics"
    folders = {f.name for f in metrics.iterdir() if f.is_dir()}
    unrecorded = {f for f in folders if unrecorded_note(metrics, f)}
    # the report shows every results folder; the default pipeline's record their margins
    # (tests/*/test_pick_margins.py)
    assert unrecorded and named == unrecorded, (named, unrecorded)
    assert not unrecorded & {"code", "graph", "multilabel", "finetune"}


def test_a_preset_folders_runs_reach_the_picks_table_under_its_name(tmp_path):
    """The runs behind a preset table (each row's metrics JSON under its source folder) reach
    the picks table, grouped under the data set and the preset's name."""
    from contrastlab.reporting.multilabel_presets import preset_runs, read_presets

    picks = {"threshold": {"margin_seed": [3], "n_val": 100, "fragile_seeds": 0}}
    _write(tmp_path / "multilabel_toy" / "tuned" / "toy_all.json", {"picks": picks})
    _write(tmp_path / "multilabel_toy" / "default" / "toy_logreg.json", {"C": 1.0})
    _write(tmp_path / "multilabel_toy" / "combined_table.json",
           {"baseline": "logreg", "rows": {"all": {}, "logreg": {}},
            "source": {"all": "multilabel_toy/tuned", "logreg": "multilabel_toy/default"}})
    runs = preset_runs(read_presets(tmp_path, tmp_path))
    assert list(runs) == ["toy (preset multilabel-toy)"]
    group = runs["toy (preset multilabel-toy)"]
    assert group["all"]["picks"] == picks and group["logreg"] == {"C": 1.0}
    # the folder records a margin: the preset table's note says nothing of unrecorded picks
    assert unrecorded_note(tmp_path, "multilabel_toy") == ""
