"""The multi-label report's row statistics: strongest baseline chosen on validation, every row
a candidate for best, a declared alias ranked once, one Friedman family per metric, the headline."""

import numpy as np

from contrastlab.reporting import multilabel as rep


def _run(m, val, digests):
    keys = ("micro_f1", "macro_f1", "micro_f1_val_t", "macro_f1_val_t", "map")
    return {**{k: m for k in keys}, "val_map": val, "test_scores_sha256": digests, "n_seeds": len(digests)}


def _reps(m, noise, rng):
    keys = ("micro_f1", "macro_f1", "micro_f1_val_t", "macro_f1_val_t", "map")
    r = m + noise + 0.002 * rng.normal(size=noise.size)
    return {k: r for k in keys}


def test_strongest_baseline_on_validation_all_rows_compete_and_baseline_wins():
    rng = np.random.default_rng(0)
    noise = 0.01 * rng.normal(size=1000)  # shared by the rows: a paired bootstrap
    h = ["%064x" % i for i in range(5)]
    runs = {"mulsupcon": _run(0.48, 0.50, h), "any": _run(0.44, 0.46, ["a" * 64] * 5),
            "logreg": _run(0.45, 0.49, ["b" * 64] * 5),
            "extratrees": _run(0.53, 0.56, ["c" * 64] * 5)}
    reps = {v: _reps(r["map"], noise, rng) for v, r in runs.items()}
    st = rep.table_stats(runs, reps)
    assert st["_baseline"] == "extratrees"
    m = st["map"]
    assert m["extratrees"]["is_best"] and m["extratrees"]["in_mcs"] and m["extratrees"]["p_best"] > 0.9
    assert m["mulsupcon"]["below_baseline"] and not m["mulsupcon"]["in_mcs"]
    for v in runs:
        assert m[v]["ci_low"] <= m[v]["mean"] <= m[v]["ci_high"]
    cell = str(rep._cell(m["extratrees"], runs["extratrees"], "map"))
    assert cell.startswith("**53.00") and str(rep._cell(m["any"], runs["any"], "map")).endswith("↓")
    text = rep.headline({"yeast": runs}, {"yeast": st}, None)
    assert "MulSupCon 48.0 vs ExtraTrees 53.0" in text and "baseline wins significantly on 1 of 1" in text
    assert "On every data set a baseline has the higher test mAP" in text


def test_declared_alias_is_one_row_and_ranked_once(tmp_path):
    """Sim-Dis Eq. 13 is declared an alias of ANY (variants.yaml alias_of): it is no row of its
    own, ANY's row names it, the params refuse to train it, and the Friedman family ranks ANY
    once even when a stale Eq. 13 metrics file with different numbers is present."""
    import pytest

    from contrastlab.params.multilabel import ALIASES, MultilabelParams

    assert rep.ALIASES == ALIASES == {"simdis_eq13": "any"}
    assert "simdis_eq13" not in rep.TABLE1_ROWS and "any" in rep.CONTRASTIVE
    assert rep.short("any") == "ANY = Sim-Dis Eq. 13" and "alias" in rep.TITLES["any"]
    assert "simdis_eq13" not in MultilabelParams().losses
    with pytest.raises(ValueError, match="alias"):
        MultilabelParams(losses=["any", "simdis_eq13"])
    rng = np.random.default_rng(0)
    runs = {ds: {v: {"map": float(rng.uniform()), "macro_f1_val_t": float(rng.uniform())}
                 for v in ("any", "simdis_eq13", "mulsupcon", "extratrees")} for ds in "abcd"}
    fr, figs, tabs = rep.friedman_family(runs, ["any", "simdis_eq13", "mulsupcon", "extratrees"],
                                         list("abcd"), "map", "mAP", tmp_path)
    assert fr["n_methods"] == 3 and set(fr["avg_ranks"]) == {"any", "mulsupcon", "extratrees"}
    assert (tmp_path / "multilabel_cd_map.png").exists() and "alias" in figs[0].caption
    # a family per metric: the macro-F1 ranks come from the macro-F1 values
    fr2, _, _ = rep.friedman_family(runs, ["any", "mulsupcon", "extratrees"], list("abcd"),
                                    "macro_f1_val_t", "macro-F1 @val-t", tmp_path)
    best = {ds: max(("any", "mulsupcon", "extratrees"), key=lambda v: runs[ds][v]["macro_f1_val_t"])
            for ds in "abcd"}
    for v in ("any", "mulsupcon", "extratrees"):  # independent rank sum: 1 point per first place
        firsts = sum(best[ds] == v for ds in "abcd")
        assert (fr2["avg_ranks"][v] == 1.0) == (firsts == 4)
    assert (tmp_path / "multilabel_cd_macro_f1_val_t.png").exists()


def test_headline_names_its_metric_and_restricts_the_claim():
    """On mAP the baseline wins; on macro-F1 a loss is significantly above it: the mAP sentence
    says no loss beats the baseline on mAP, the macro-F1 sentences say where one does."""
    rng = np.random.default_rng(1)
    noise = 0.01 * rng.normal(size=1000)

    def run(mp, f1, val):
        return {"map": mp, "macro_f1": f1, "macro_f1_val_t": f1, "micro_f1": f1, "micro_f1_val_t": f1,
                "val_map": val, "n_seeds": 5}

    runs = {"mulsupcon": run(0.48, 0.40, 0.50), "extratrees": run(0.53, 0.34, 0.56)}
    reps = {v: {k: r[k] + noise + 0.001 * rng.normal(size=1000) for k in r if k not in ("val_map", "n_seeds")}
            for v, r in runs.items()}
    st = rep.table_stats(runs, reps)
    text = rep.headline({"yeast": runs}, {"yeast": st}, None)
    assert "No contrastive loss is significantly above the strongest baseline on mAP" in text
    assert "No contrastive loss is significantly above the strongest baseline on macro-F1" not in text
    assert "on test macro-F1 @val-t" in text and "contrastive row wins significantly on 1" in text
    assert "On macro-F1 @0.5, contrastive rows significantly above the strongest baseline: yeast MulSupCon 40.00" in text


def test_trial0_values_reads_the_declared_configuration_per_data_set(tmp_path):
    """The 'default = trial 0' column of the tuned-choices table: trial 0's objective and its
    fold standard error per data set, not the best trial's; a missing history gives nothing."""
    from contrastlab.reporting.multilabel import trial0_values

    f = tmp_path / "h.csv"
    f.write_text("dataset,trial,state,value,best_so_far,se,lr\n"
                 "emotions,0,COMPLETE,0.60,0.60,0.01,0.001\n"
                 "emotions,1,COMPLETE,0.70,0.70,0.02,0.01\n"
                 "yeast,1,COMPLETE,0.50,0.50,0.03,0.01\n"
                 "yeast,0,COMPLETE,0.40,0.50,0.04,0.001\n")
    got = trial0_values(f)
    assert got == {"emotions": (0.60, 0.01), "yeast": (0.40, 0.04)}
    assert trial0_values(tmp_path / "missing.csv") == {}


def test_default_vs_tuned_pairs_runs_and_says_which_way(tmp_path):
    """One pair where tuning clearly raised test mAP, one where it clearly lowered it, one
    where trial 0 won (the same run): verdicts, Holm p-values and the count in the note."""
    import json

    mdir, tdir = tmp_path / "m", tmp_path / "t"
    for d in (mdir / "reps", mdir / "default" / "yeast" / "reps", tdir):
        d.mkdir(parents=True)
    rng = np.random.default_rng(0)
    noise = rng.normal(0, 0.002, 1000)

    def put(folder, ds, v, m):
        (folder / f"{ds}_{v}.json").write_text(json.dumps({"map": m}))
        np.savez(folder / "reps" / f"{ds}_{v}.npz", map=m + noise)

    cases = {"mulsupcon": (0.50, 0.56, 7), "any": (0.60, 0.52, 3), "all": (0.40, 0.40, 0)}
    for v, (d, t, best) in cases.items():
        put(mdir / "default" / "yeast", "yeast", v, d)
        put(mdir, "yeast", v, t)
        (tdir / f"{v}.json").write_text(json.dumps({"datasets": {"yeast": {"best_trial": best}}}))
    table = rep.default_vs_tuned(mdir, tdir)
    got = {row[0]: row for row in table.rows}
    ms, an, al = (got[rep.TITLES[v]] for v in ("mulsupcon", "any", "all"))
    assert ms[-1] == "tuned better" and ms[4] == "+6.00" and float(ms[5].split()[-1]) < 0.05
    assert ms[5].startswith(("p = ", "p ≤ "))  # stats.format_p
    assert an[-1] == "tuned worse" and an[4] == "-8.00"
    assert al[-1] == "trial 0 won: the same run" and al[5] == "-"
    assert "raised test mAP significantly in 1, lowered it significantly in 1" in table.note
    # each CI contains its estimate
    lo, hi = (float(x) for x in ms[3].split("[")[1].rstrip("]").split(","))
    assert lo <= 56.0 <= hi
    assert rep.default_vs_tuned(tmp_path / "none", tdir) is None


def test_a_map_whose_interval_does_not_cover_is_shown_without_one():
    """coverage.json's k per set decides which mAP columns show intervals: all when the plain
    mAP covers (k = 1), the frequent-label one only when k >= 5, none when no k covers (-1);
    an uncovered cell keeps its estimate and carries the ° mark, never an interval."""
    from contrastlab.reporting.multilabel_stats import NO_COVER_MARK, _cell, uncovered_map_keys

    assert uncovered_map_keys(1) == set() and uncovered_map_keys(None) == set()
    assert uncovered_map_keys(40) == {"map"}
    assert uncovered_map_keys(-1) == {"map", "map_frequent"}
    st = {"mean": 0.31, "ci_low": 0.29, "ci_high": 0.33, "in_mcs": False}
    shown, hidden = _cell(st, {"map": 0.31}, "map"), _cell(st, {"map": 0.31}, "map", uncovered=True)
    assert shown.low == 0.29 and NO_COVER_MARK not in shown.marks
    assert hidden.low is None and hidden.high is None and NO_COVER_MARK in hidden.marks
    assert hidden.value == 0.31 and "[" not in str(hidden)


def test_headline_states_each_hybrid_against_its_reference_on_map_and_macro_f1():
    """A hybrid's sentence gives both metrics' paired differences with their p (the fine-tuning
    hybrid is judged on macro-F1 as much as on mAP); a pair missing one metric is left out."""
    from contrastlab.reporting.multilabel_headline import F1_KEY, headline
    from contrastlab.reporting.multilabel_rows import ROWS

    h, ref = next((a, b) for a, b in ROWS.hybrid_pairs() if b == "bce")
    st = {"map": {h: {"mean": 0.50}, ref: {"mean": 0.48}},
          F1_KEY: {h: {"mean": 0.40}, ref: {"mean": 0.43}},
          "_pairs": {(h, ref, "map"): 0.01, (h, ref, F1_KEY): 0.2}}
    text = headline({}, {"ds": st}, None)
    assert f"ds {ROWS.short(h)} − {ROWS.short(ref)} = +2.0 (p = 0.01) / -3.0 (p = 0.20)" in text
    del st["_pairs"][(h, ref, F1_KEY)]
    assert f"{ROWS.short(h)} − {ROWS.short(ref)}" not in headline({}, {"ds": st}, None)
