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
    """A GPU summary beside the CPU one adds its paragraph and one table per split; the verdict
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
    assert len(sec.tables) == 4
    assert [t.title[:26] for t in sec.tables[2:]] == ["GPU, all layers: split (a)", "GPU, all layers: split (b)"]
    note = gpu_note(g)
    assert note in sec.notes and "test GPU" in note
    assert "significantly above the strongest baseline" in note
    assert f"{100 * g['tables']['a']['knn5_pxt']['mulsupcon']['mean']:.1f}%" in note
    assert "not significantly different" in gpu_note(_summary(0.0))


def test_tuning_table_compares_trial_zero_with_the_choice(tmp_path):
    import pandas as pd

    from contrastlab.reporting.finetune import tuning_table

    assert tuning_table(tmp_path) is None
    tdir = tmp_path / "reports" / "tuned" / "finetune"
    hdir = tmp_path / "reports" / "plots" / "tune" / "finetune"
    tdir.mkdir(parents=True)
    hdir.mkdir(parents=True)
    rng = np.random.default_rng(1)
    values = rng.uniform(0.6, 0.8, 5)
    states = ["COMPLETE", "PRUNED", "COMPLETE", "COMPLETE", "PRUNED"]
    pd.DataFrame({"trial": range(5), "state": states, "value": values,
                  "se": rng.uniform(0, 0.02, 5), "temperature": rng.uniform(0.05, 1, 5)}
                 ).to_csv(hdir / "all.csv", index=False)
    done = [i for i, s in enumerate(states) if s == "COMPLETE"]
    best = max(done, key=lambda i: values[i])
    (tdir / "all.json").write_text(json.dumps({
        "params": {"temperature": 0.25}, "best_value": float(values[best]), "best_se": 0.01,
        "best_trial": best, "n_complete": 3, "n_pruned": 2, "n_failed": 0}))
    (tdir / "tfidf.json").write_text(json.dumps({"params": {}, "note": "no training"}))
    t = tuning_table(tmp_path)
    assert len(t.rows) == 1 and t.rows[0][0] == "ALL"
    assert t.rows[0][1].startswith(f"{100 * values[0]:.1f} ±")
    assert t.rows[0][3] == f"{100 * (values[best] - values[0]):+.1f}"
    assert t.rows[0][4] == "3 / 2 / 0" and t.rows[0][6] == "temperature 0.25"


def _tier(gain: float) -> dict:
    from contrastlab.finetune.tiers import CEILING, CHANCE

    rng = np.random.default_rng(1)
    rows = ["mulsupcon", "bce", "frozen", "head", "tfidf", CHANCE, CEILING]
    clusters = np.repeat(np.arange(12), 5)
    tables = {}
    for s in ("a", "b"):
        tables[s] = {}
        for m in ("wp_auc", "wp_nn_tier", "wp_pair_sep", "knn5_pxt"):
            base = 0.4 + rng.random((3, 60)) * 0.2
            items = {r: base + (gain if r == "mulsupcon" else 0.0) for r in rows}
            items[CHANCE] = np.full((1, 60), 0.5)
            items[CEILING] = np.ones((1, 60))
            tables[s][m] = table(items, clusters, baseline="frozen", n_resamples=200,
                                 references=[CEILING])
    return {"baseline": "frozen", "baseline_rule": "best validation AUC", "rows": rows,
            "references": [CHANCE, CEILING], "chance": CHANCE, "ceiling": CEILING,
            "reference_titles": {CHANCE: "tier-blind reference", CEILING: "ceiling (best)"},
            "validation": {"mulsupcon": 0.7, "bce": 0.6},
            "pairs": {"n": 100, "differ_in_tier": 0.87}, "tables": tables}


def test_tier_headline_leads_with_the_within_problem_metric(tmp_path):
    """With tier tables, the headline answers with the within-problem AUC of the row chosen
    on validation, against the strongest baseline (paired verdict) and the tier-blind
    reference; the kNN@5 answer follows as the secondary metric; tables show every row plus
    the reference and the ceiling."""
    from contrastlab.finetune.tiers import CEILING

    d = tmp_path / "reports" / "metrics" / "finetune"
    d.mkdir(parents=True)
    for gain, verdict in ((0.3, "Yes"), (0.0, "No")):
        summ = {**_summary(0.0), "tier": _tier(gain)}
        (d / "summary.json").write_text(json.dumps(summ))
        sec = build_section(tmp_path, tmp_path)
        auc = summ["tier"]["tables"]["a"]["wp_auc"]
        assert f"? {verdict}:" in sec.headline
        assert f"{100 * auc['mulsupcon']['mean']:.1f}%" in sec.headline
        assert "50.0% [50.0, 50.0]" in sec.headline  # the tier-blind reference
        assert sec.headline.index("same-tier AUC") < sec.headline.index("kNN@5 problem x tier purity")
        assert ("significantly above" in sec.headline) == (gain > 0)
        tier_tables = [t for t in sec.tables if t.title.startswith("Tier within problem")]
        assert len(tier_tables) == 2 and len(tier_tables[0].rows) == 7
        assert tier_tables[0].rows[-1][0].startswith("ceiling")
        assert "n_items" in summ["tier"]["tables"]["a"]["wp_auc"][CEILING]


def test_the_section_reads_the_folders_it_is_given(tmp_path):
    """The report reads the folders its stage command names (``contrastlab.reporting.Inputs``),
    not ``<root>/reports``: metrics written elsewhere make the section, the standard layout
    under the same root has none."""
    from contrastlab.reporting import Inputs

    other = tmp_path / "another_run"
    d = other / "metrics" / "finetune"
    d.mkdir(parents=True)
    (d / "summary.json").write_text(json.dumps(_summary(0.2)))
    assert build_section(tmp_path, tmp_path) is None
    inp = Inputs(tmp_path, other / "metrics", other / "data", other / "plots", other / "tuned")
    sec = build_section(inp, tmp_path)
    assert sec is not None and sec.headline.startswith("Yes")
    assert Inputs.of(inp) is inp and Inputs.of(tmp_path).metrics == tmp_path / "reports" / "metrics"


def test_the_tests_note_names_the_columns_of_each_draw_count(tmp_path):
    """Columns tested at different draw counts: the note pairs each count with its columns
    (a single count: one sentence, as before)."""
    s = _summary(0.2)
    rng = np.random.default_rng(1)
    items = {v: rng.random((3, 60)) * 0.6 for v in s["variants"]}
    s["tables"]["a"]["ap"] = table(items, np.repeat(np.arange(12), 5), baseline="frozen",
                                   n_resamples=6000)
    d = tmp_path / "reports" / "metrics" / "finetune"
    d.mkdir(parents=True)
    (d / "summary.json").write_text(json.dumps(s))
    a, b = build_section(tmp_path, tmp_path).tables[:2]
    r = {c: s["tables"]["a"][c]["mulsupcon"]["n_resamples"] for c in ("knn5_pxt", "ap")}
    assert r["knn5_pxt"] != r["ap"]
    assert f"For mAP: {r['ap']:,} paired bootstrap draws" in a.note
    assert f"problem x tier: {r['knn5_pxt']:,} paired bootstrap draws" in a.note
    assert b.note.startswith("Paired tests against the strongest baseline: ") and "For " not in b.note
