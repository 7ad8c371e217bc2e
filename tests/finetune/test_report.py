"""The report section answers first, with the numbers of summary.json."""

import json

import numpy as np

from contrastlab.finetune.evaluate import table
from contrastlab.reporting.finetune import build_section


def _summary(gain: float) -> dict:
    rng = np.random.default_rng(0)
    names = ["mulsupcon", "bce", "frozen", "head", "tfidf"]
    clusters = np.repeat(np.arange(12), 5)
    tables = {}
    for s in ("a", "b"):
        tables[s] = {}
        for m in ("knn5_pxt", "ap", "probe_tier"):
            base = rng.random((3, 60)) * 0.6
            items = {v: base + (gain if v == "mulsupcon" else 0.0) for v in names}
            tables[s][m] = table(items, clusters, baseline="frozen", n_resamples=200)
    return {"baseline": "frozen", "baseline_rule": "best validation", "variants": names,
            "tables": tables, "ceiling": {"knn5_pxt": {"a": 0.6, "b": 0.7}}}


def test_headline_states_the_answer_with_cis(tmp_path):
    d = tmp_path / "reports" / "metrics" / "finetune"
    d.mkdir(parents=True)
    (d / "summary.json").write_text(json.dumps(_summary(0.2)))
    sec = build_section(tmp_path, tmp_path)
    t = _summary(0.2)["tables"]["a"]["knn5_pxt"]
    assert sec.headline.startswith("Yes")
    assert f"{100 * t['mulsupcon']['mean']:.1f}%" in sec.headline
    assert f"{100 * t['frozen']['ci_low']:.1f}" in sec.headline
    assert len(sec.tables) == 2 and sec.tables[0].rows[0][0] == "MulSupCon"
    (d / "summary.json").write_text(json.dumps(_summary(0.0)))
    assert build_section(tmp_path, tmp_path).headline.startswith("No")


def test_no_summary_no_section(tmp_path):
    assert build_section(tmp_path, tmp_path) is None


def test_gpu_run_adds_a_note_and_a_table_with_its_verdict(tmp_path):
    """A GPU summary beside the CPU one adds its paragraph and split-(a) table; the verdict
    follows the paired test (above the baseline with a gain, not different without one)."""
    from contrastlab.reporting.finetune import gpu_note

    cpu = tmp_path / "reports" / "metrics" / "finetune"
    gpu = tmp_path / "reports" / "metrics" / "finetune_gpu"
    cpu.mkdir(parents=True)
    gpu.mkdir(parents=True)
    (cpu / "summary.json").write_text(json.dumps(_summary(0.0)))
    assert len(build_section(tmp_path, tmp_path).tables) == 2
    g = {**_summary(0.2), "device": "test GPU"}
    (gpu / "summary.json").write_text(json.dumps(g))
    sec = build_section(tmp_path, tmp_path)
    assert len(sec.tables) == 3 and sec.tables[2].title.startswith("GPU")
    note = gpu_note(g)
    assert note in sec.notes and "test GPU" in note
    assert "significantly above the strongest baseline" in note
    assert f"{100 * g['tables']['a']['knn5_pxt']['mulsupcon']['mean']:.1f}%" in note
    assert "not significantly different" in gpu_note(_summary(0.0))
