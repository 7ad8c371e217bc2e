"""The multi-label report's row statistics: strongest baseline chosen on validation, every row
a candidate for best, identical-output rows merged before the rank test, the headline."""

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


def test_identical_outputs_merge_into_one_column():
    same = ["%064x" % i for i in range(5)]
    runs = {ds: {"any": {"test_scores_sha256": same}, "simdis_eq13": {"test_scores_sha256": list(same)},
                 "mulsupcon": {"test_scores_sha256": ["%064x" % (i + 9) for i in range(5)]},
                 "knn": {"test_scores_sha256": same[:1]}}
            for ds in ("a", "b")}
    groups = rep.identical_groups(runs, ["any", "simdis_eq13", "mulsupcon", "knn"], ["a", "b"])
    assert groups == [["any", "simdis_eq13"], ["mulsupcon"], ["knn"]]
    assert rep.short("any = simdis_eq13") == "ANY = Sim-Dis Eq. 13"
    # one seed differing on one data set keeps them apart
    runs["b"]["simdis_eq13"]["test_scores_sha256"] = same[:4] + ["f" * 64]
    assert rep.identical_groups(runs, ["any", "simdis_eq13"], ["a", "b"]) == [["any"], ["simdis_eq13"]]


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
    assert ms[-1] == "tuned better" and ms[4] == "+6.00" and float(ms[5]) < 0.05
    assert an[-1] == "tuned worse" and an[4] == "-8.00"
    assert al[-1] == "trial 0 won: the same run" and al[5] == "-"
    assert "raised test mAP significantly in 1, lowered it significantly in 1" in table.note
    # each CI contains its estimate
    lo, hi = (float(x) for x in ms[3].split("[")[1].rstrip("]").split(","))
    assert lo <= 56.0 <= hi
    assert rep.default_vs_tuned(tmp_path / "none", tdir) is None
