"""Multi-label track section of the comparison report.

Reads ``reports/metrics/multilabel/<dataset>_<variant>.json`` and the bootstrap replicates
``reports/metrics/multilabel/reps/<dataset>_<variant>.npz`` (``train_multilabel@<dataset>-<variant>``),
the curves ``reports/plots/multilabel/*.csv``, the tuned choices ``reports/tuned/multilabel/*.json``
and ``reports/data/multilabel/*``, and fills the section: per data set a table in the format of
the Sim-Dis paper's Table 1 (every row, baselines included, competes for best: the Model
Confidence Set, P(best), the paired test against the strongest baseline), the Table 4 ablation,
the Friedman test with the Nemenyi critical-difference diagram on mAP and on macro-F1 at the
validation threshold (over distinct methods: an ``alias_of`` variant is its target's row), the
tuned choices, default vs tuned, the presets' tables, curves and the paper's own numbers.
Each caption says how its numbers were made.

Modules: :mod:`.multilabel_rows` (the rows and labels, from the variant table and the params),
:mod:`.multilabel_stats` (metrics, statistics, cells, Friedman, default vs tuned),
:mod:`.multilabel_headline`, :mod:`.multilabel_figures`; this module assembles the section
(their public names re-exported).
"""

from __future__ import annotations

from pathlib import Path

from ..evaluation.stats import paired_pvalue, table_resolution
from ..io import read_json
from . import Inputs, Plot, Section, Table, key_values, load_params_of, log_span
from . import coverage_rule as rule
from .figures import Comparison, Panel, rows_from_stats
from .multilabel_figures import _curve_figure, _weights_figure
from .multilabel_headline import F1_KEY, F1_LABEL, headline
from .picks import picks_table
from .multilabel_presets import preset_runs, preset_tables, read_presets  # bibtex, tmc2007-500 on all rows: own tables
from .multilabel_rows import (_TABLE, ALIASES, BASELINES, CONTRASTIVE, HYBRID_ROWS, METRICS, PAPER_TABLE1,
                              PAPER_TABLE4, ROWS, TABLE1_ROWS, TITLES, Rows, _paper_name, rows_for, short)
from .multilabel_stats import (NO_CI_NOTE, NO_COVER_NOTE, _cell, _frequent_k, _frequent_note,
                               dataset_stats, default_vs_tuned, friedman_family, load_metrics, load_reps,
                               table_stats, trial0_values, uncovered_keys)

__all__ = ["build_section", "load_metrics", "load_reps", "dataset_stats", "headline", "default_vs_tuned",
           "Rows", "rows_for", "ROWS", "ALIASES", "TITLES", "TABLE1_ROWS", "CONTRASTIVE", "short",
           "table_stats", "friedman_family", "trial0_values"]


def _comparison(stats: dict[str, dict], uncovered: dict[str, set[str]], lead: list, rows: Rows):
    """Test mAP per data set (small multiples), the first figure and headline (:mod:`.figures`);
    per set the mAP column whose interval covers (``uncovered``: :func:`uncovered_keys`) at its
    shape: all labels, or the frequent ones; ``lead``: the critical-difference diagram."""
    kind = {v: "baseline" if v in BASELINES else "hybrid" if v in HYBRID_ROWS else "loss"
            for v in rows.table1}
    panels = []
    for ds, st in stats.items():
        miss = uncovered.get(ds, set())
        key = "map" if "map" not in miss else "map_frequent"
        if not st.get(key) or key in miss:
            continue
        name = ds if key == "map" else f"{ds} (frequent labels)"
        panels.append(Panel(name, rows_from_stats(st[key], list(st[key]), kind=kind, short=rows.short,
                                                  title=rows.titles, baseline=st.get("_baseline"))))
    return Comparison("test mAP", panels, primary=None, noun="data set", lead=lead,
                      title="Multi-label: test mAP per data set, 95 % CI (frequent labels where "
                            "the all-label interval does not cover; a set without a covering "
                            "mAP is left out)")


def _protocol_note(g: dict) -> str:
    """The protocol paragraph: splits, views, encoder, probe, baselines, hybrids, seeds, cells."""
    runs, rowset = g["runs"], g["rowset"]
    n_seeds = sorted({m.get("n_seeds") for r in runs.values() for m in r.values()})
    return (
        "Protocol (docs/multilabel.md): a validation split carved from each training set by iterative "
        "stratification; two feature-masked views per row (MulSupCon's vector-data recipe), MLP encoder + "
        "projection head trained with each loss (optional memory queue), early stopping on validation mAP, "
        "then a linear logistic layer fitted to convergence (L-BFGS) on the frozen encoder. Baselines: the "
        "same MLP trained end to end with BCE; binary-relevance logistic regression (C on a "
        f"{log_span(g['params'].multilabel.train.logreg_c)} log grid chosen on validation, the grid "
        "extended past an edge); scikit-learn ExtraTrees and "
        "RandomForest (500 trees, native multi-output); HistGradientBoosting (one scikit-learn "
        "HistGradientBoostingClassifier per label, early stopping on 10% of its training rows); a kNN scorer (mean label vector of the k nearest "
        "training rows). Hybrids (exploratory): the encoder of the " + rowset.short(rowset.base) + " rows with "
        "the raw features beside it, under the same linear probe or under ExtraTrees, or fine-tuned end "
        "to end with BCE at the BCE MLP's choices (not tuned themselves: they reuse those rows' choices). "
        f"Seeds per cell: {', '.join(str(n) for n in n_seeds)} (kNN is deterministic: one run, its output "
        "standing for every seed in the bootstrap). Cells: test mean [95% CI] in %; CI = bias-corrected "
        "(BC) percentile interval (Efron & Tibshirani 1993, Sec. 14.3) of a "
        "stratified bootstrap: seeds and, per label, its positive and negative test rows resampled "
        f"({g.get('n_draws', 'the stored')} draws shared by all rows of a table, so differences are paired), the seed x row "
        "interaction counted once (crossed effects, Owen 2007). "
        "'@0.5' = F1 at threshold 0.5; '@val-t' = F1 at one global threshold per model chosen on validation "
        "(the threshold in 0.05..0.95 maximising the mean of validation micro- and macro-F1). "
        "Every row, baselines included, competes for best: bold = in the 95% Model Confidence Set (Hansen, "
        "Lunde & Nason 2011; 'tied for best', selection-aware); P(best) = share of draws in which the row "
        "has the highest mAP; ↑ / ↓ = significantly better / worse than the strongest baseline (the "
        "baseline with the highest validation mAP, named in each caption; paired test on the shared "
        "draws, Holm over the rows tested against it, alpha 0.05; each caption gives the draws, the test "
        "and the smallest attainable corrected p).")


_SIMDIS_NOTE = (
    "Sim-Dis rows: `/|P|` multiplies each positive's log-probability by K^s K^d and divides by the "
    "number of positives; `/ΣK` divides by the sum of the factors instead; Eq. 13 read literally puts "
    "the factor inside the log as printed, which only adds a constant: its gradient equals ANY's, so the "
    "variant table declares it an alias of ANY (`alias_of`): it is trained once, as ANY, shown as ANY's "
    "row (`ANY = Sim-Dis Eq. 13`) and ranked once.")


def _datasets_table(g: dict) -> Table | None:
    rows = dataset_stats(g["ddir"], list(g["runs"]))
    if not rows:
        return None
    data = g["params"].multilabel.data
    sub = [f"{ds}'s training file is subsampled (seeded, {data[ds].max_train} rows)"
           for ds in g["runs"] if ds in data and data[ds].max_train]
    return Table("Multi-label data sets",
                 ["data set", "train", "validation", "test", "train file rows", "features",
                  "labels", "cardinality (train)", "dropped identifier attributes"], rows,
                 note=(" and ".join(sub) + " before the validation split, for the CPU budget; "
                       "nominal attributes are one-hot encoded." if sub else
                       "Nominal attributes are one-hot encoded."))


def _dataset_stats(g: dict, ds: str, r: dict, cov) -> dict:
    """One data set's statistics (:func:`table_stats`) with each hybrid against its reference,
    paired, on mAP and macro-F1 @val-t (``_pairs``); sets ``g["uncovered"][ds]``."""
    rowset = g["rowset"]
    reps = load_reps(g["mdir"] / "reps", ds, list(r))
    if reps:
        g.setdefault("n_draws", len(next(iter(next(iter(reps.values())).values()))))
    g["k_freq"][ds] = _frequent_k(g["inp"].metrics / "coverage.json", ds, r, reps)
    g["uncovered"][ds] = uncovered_keys(cov, ds)
    st = table_stats(r, reps, rowset)
    st["_pairs"] = {(a, b, k): paired_pvalue(reps[a][k] - reps[b][k])
                    for a, b in rowset.hybrid_pairs() for k in ("map", F1_KEY)
                    if a in reps and b in reps and k in reps[a] and k in reps[b]}
    return st


def _dataset_table(g: dict, ds: str, r: dict, st: dict) -> Table:
    """One data set's table in the paper's Table 1 format."""
    rowset, unc = g["rowset"], g["uncovered"][ds]
    present = [v for v in rowset.table1 if v in r]
    base = st.get("_baseline")
    stale = [v for v in present if "tuned_source" not in r[v]]  # final runs of the previous protocol
    trs = [[rowset.titles[v] + (" — strongest baseline" if v == base else "") + (" †" if v in stale else "")]
           + [_cell(st.get(k, {}).get(v), r[v], k, k in unc) for k, _ in METRICS]
           + [f"{st['map'][v]['p_best']:.2f}" if "map" in st and "p_best" in st["map"].get(v, {}) else "-"]
           for v in present]
    thr = ", ".join(f"{v} {r[v].get('threshold_val', float('nan')):.2f}" for v in present)
    # the tuned rows' sources (a row with tuned: false picks its own hyperparameter in every run)
    src = sorted({r[v]["tuned_source"] for v in present if v not in HYBRID_ROWS
                  and (v not in _TABLE or _TABLE[v].tuned) and "tuned_source" in r[v]}) or ["-"]
    draws = table_resolution(st.get("map", {}))  # the draws and smallest attainable Holm p
    return Table(f"{ds}: Table 1 format (test, %)", ["Method"] + [t for _, t in METRICS] + ["P(best) mAP"], trs,
                 note=(f"Strongest baseline (highest validation mAP): {rowset.short(base) if base else 'none'}; "
                       "↑/↓ against it (the validation mAP of the BCE MLP and of the logistic "
                       "regression is the maximum over their checkpoints / C grid, so it favours them). "
                       f"Hyperparameters: {'; '.join(src)}. "
                       + (f"† = final runs of the previous protocol, not redone (CPU time): replicates "
                          f"from the plain row bootstrap (biased for mAP), old tuning ({len(stale)} "
                          f"row(s)). " if stale else "")
                       + (draws + ". " if draws else "")
                       + _frequent_note(r, g["ddir"] / f"{ds}_dataset.json", g["k_freq"][ds])
                       + (NO_COVER_NOTE + " " if unc else "")
                       + f"Mean validation thresholds: {thr}."))


def _dataset_plots(g: dict, ds: str, r: dict) -> list[Plot]:
    """One data set's training curves and, when written, its Sim-Dis weight histogram."""
    present = [v for v in g["rowset"].table1 if v in r]
    out = [Plot(f"{ds}: training curves", f"multilabel_{ds}_curves.png",
                "Mean over seeds of the training loss between checks and the validation mAP "
                "at each check; training stops after `patience` checks without a better "
                "validation mAP and keeps the best checkpoint.",
                lambda p: _curve_figure(ds, g["pdir"], present, p, g["rowset"]))]
    wcsv = g["ddir"] / f"{ds}_simdis_weights.csv"
    if wcsv.exists():
        out.append(Plot(f"{ds}: K^s K^d by relation", f"multilabel_{ds}_simdis_weights.png",
                        "Histogram of the Sim-Dis weight K^s K^d over (anchor, sample) pairs of "
                        "training rows, by multi-label relation R1..R5 (paper Eq. 8-15).",
                        lambda p: _weights_figure(ds, wcsv, p)))
    return out


def _friedman(g: dict, figures_dir: Path) -> tuple[list, list, list, tuple]:
    """Friedman + Nemenyi on mAP and macro-F1 @val-t: ``(notes, figures, tables, (fr, fr_f1))``."""
    runs, rowset = g["runs"], g["rowset"]
    union = [v for v in rowset.table1 if v not in HYBRID_ROWS and any(v in r for r in runs.values())]
    full = [ds for ds, r in runs.items() if all(v in r and "tuned_source" in r[v] for v in union)]
    notes = [] if len(full) == len(runs) else [
        f"Data sets without every model's final runs under the current protocol "
        f"({', '.join(d for d in runs if d not in full)}) are left out of the Friedman test and the "
        "critical-difference diagram."]
    fams = [friedman_family(runs, union, full, key, label, figures_dir, rowset)
            for key, label in (("map", "mAP"), (F1_KEY, F1_LABEL))]
    return (notes, [f for _, fs, _ in fams for f in fs], [t for *_, ts in fams for t in ts],
            tuple(fr for fr, _, _ in fams))


def _ablation_table(g: dict) -> Table | None:
    """Our Table 4 ablation (ANY / Sim only / Dis only / Sim-Dis), F1 at the validation threshold."""
    runs, stats, unc = g["runs"], g["stats"], g["uncovered"]
    dsl = [ds for ds in runs if all(v in runs[ds] for v in PAPER_TABLE4)]
    if not dsl:
        return None
    keys = ("micro_f1_val_t", "macro_f1_val_t")
    cols = ["Similarity", "Dissimilarity"] + [f"{ds} {t}" for ds in dsl for t in ("micro-F1", "macro-F1")]
    trs = [["✓" if f else "×" for f in _TABLE[v].factors]  # similarity, dissimilarity
           + [_cell(stats.get(ds, {}).get(k, {}).get(v), runs[ds][v], k, k in unc[ds])
              for ds in dsl for k in keys]
           for v in PAPER_TABLE4]
    return Table("Ablation in the Table 4 format (ours; F1 at the validation threshold, %)", cols, trs,
                 note="Neither factor = ANY; both = Sim-Dis (/|P| weighting). Marks as in the "
                      "per-data-set tables (tests over all models of that data set)."
                      + (" " + NO_COVER_NOTE if any(k in unc[ds] for ds in dsl for k in keys) else ""))


def _tuned_table(g: dict) -> Table | None:
    """The tuned choices per variant and tuned data set, beside trial 0 (the params.yaml values)."""
    rows = []
    for v in g["rowset"].table1:
        if (t := read_json(g["tdir"] / f"{v}.json", optional=True)) is None:
            continue
        t0 = trial0_values(g["inp"].plots / "tune" / "multilabel" / f"{v}.csv")
        for ds, e in sorted((t.get("datasets") or {}).items()):
            se, d0 = e.get("best_value_se"), t0.get(ds)
            rows.append([g["rowset"].titles[v], ds, key_values(sorted(e["params"].items())),
                         "-" if d0 is None else f"{100 * d0[0]:.2f}" + (f" ± {100 * d0[1]:.2f}" if d0[1] == d0[1] else ""),
                         f"{100 * e['best_value']:.2f}" + (f" ± {100 * se:.2f}" if se is not None else ""),
                         str(e.get("best_trial", "-")), f"{e.get('n_complete', '-')}/{t.get('budget_trials', '-')}"])
    if not rows:
        return None
    untuned = [d for d in g["runs"] if d not in {r[1] for r in rows}]
    return Table("Tuned choices (cross-validation on the training part; test never read)",
                 ["Method", "data set", "choice", "default = trial 0 (CV val mAP, % ± se)",
                  "tuned (CV val mAP, % ± se)", "best trial", "trials"], rows,
                 note="One Optuna TPE study per variant and data set, the same budget for every row; "
                      f"objective = mean validation mAP over {g['params'].multilabel.tune.folds} "
                      "iterative-stratification folds of the "
                      "training part, fold seeds disjoint from the final seeds; trial 0 = the "
                      "params.yaml values. Logistic regression: C picked on validation inside every "
                      "run; hybrids reuse their parts' choices."
                      + (f" Not retuned (time): {', '.join(untuned)}, where every row uses its "
                         "params.yaml values: the losses' choices of the earlier joint tuning "
                         "(emotions + medical, 4 trials), the forests' and kNN's defaults."
                         if untuned else ""))


def _tuning_sentence(dvt: Table | None, runs: dict) -> str:
    """The headline's sentence on tuning against the defaults (``""`` without that table)."""
    if dvt is None:
        return ""
    verdicts = [r[-1] for r in dvt.rows]
    return (f" Tuning ({len({r[1] for r in dvt.rows})} of {len(runs)} data sets tuned per row) against the "
            f"params.yaml defaults on test: mAP significantly higher in "
            f"{verdicts.count('tuned better')} and lower in {verdicts.count('tuned worse')} of "
            f"{len(verdicts)} variant x data set pairs (paired bootstrap, Holm per data set).")


def _paper_tables() -> list[Table]:
    """The Sim-Dis paper's reported numbers: Tables 1 and 2, and its Table 4 ablation."""
    heads = {ds: ("micro-F1", "macro-F1", "mAP")[:2 if ds == "AAPD (RoBERTa)" else 3] for ds in PAPER_TABLE1}
    ref_rows = [[_paper_name(loss)] + [f"{x:.2f}" if x is not None else "-"
                                       for ds, v in PAPER_TABLE1.items() for x in v[loss][:len(heads[ds])]]
                for loss in _TABLE if any(loss in t for t in PAPER_TABLE1.values())]
    ref_cols = ["Method"] + [f"{ds} {t}" for ds, ts in heads.items() for t in ts]
    factor_name = {(False, False): "neither (= {})", (True, True): "both (= {})"}
    t4 = [[factor_name.get(_TABLE[v].factors, "{}").format(_paper_name(v))]
          + [f"{x:.2f}" for pair in PAPER_TABLE4[v] for x in pair] for v in PAPER_TABLE4]
    return [Table(
        "Reference: the Sim-Dis paper's reported numbers (Tables 1 and 2)", ref_cols, ref_rows,
        note="Published numbers, copied from the Sim-Dis paper (docs/sources.md), in %. These are DIFFERENT data sets "
             "(MS-COCO, PASCAL VOC, NUS-WIDE images with ResNet-50; AAPD text with RoBERTa) from ours "
             "(MULAN feature sets with an MLP): compare the ranking of the losses, not the values."),
        Table("Reference: the paper's Table 4 ablation",
              ["Factors", "MS-COCO micro-F1", "MS-COCO macro-F1", "AAPD micro-F1", "AAPD macro-F1"],
              t4, note="Published numbers (%); different data sets from ours.")]


def _load(inp: Inputs) -> dict | None:
    """The multi-label runs with their folders and rows, or ``None`` before any ran."""
    params = load_params_of(inp.root)
    rowset = rows_for(params.multilabel)
    mdir = inp.metrics / "multilabel"
    runs = load_metrics(mdir, rowset) if mdir.exists() else {}
    runs = {ds: r for ds, r in runs.items() if any("micro_f1_val_t" in m for m in r.values())}
    if not runs:
        return None
    return {"inp": inp, "params": params, "rowset": rowset, "runs": runs, "mdir": mdir, "pdir": inp.plots / "multilabel",
            "ddir": inp.data / "multilabel", "tdir": inp.tuned / "multilabel", "uncovered": {},
            "k_freq": {}}


def build_section(root: Inputs | Path, figures_dir: Path) -> Section | None:
    """The multi-label section, or None when no multi-label metrics exist. ``root``: the
    report's :class:`~contrastlab.reporting.Inputs` or a repository root."""
    inp = Inputs.of(root)
    if (g := _load(inp)) is None:
        return None
    cov = rule.load(inp.metrics)
    g["stats"] = {ds: _dataset_stats(g, ds, r, cov) for ds, r in g["runs"].items()}
    tables = [_dataset_table(g, ds, r, g["stats"][ds]) for ds, r in g["runs"].items()]
    plots = [p for ds, r in g["runs"].items() for p in _dataset_plots(g, ds, r)]
    notes, figs, tabs, (fr, fr_f1) = _friedman(g, Path(figures_dir))
    cd_map = [f for f in figs if f.path.name == "multilabel_cd_map.png"]
    dvt = default_vs_tuned(g["mdir"], g["tdir"], g["rowset"], cov)
    presets = read_presets(inp.metrics, inp.root)
    picks = picks_table({**g["runs"], **preset_runs(presets)})  # presets' too
    return Section(
        "multilabel", "Multi-label supervised contrastive learning",
        headline=headline(g["runs"], g["stats"], fr, fr_f1, g["rowset"]) + _tuning_sentence(dvt, g["runs"]),
        comparison=_comparison(g["stats"], g["uncovered"], cd_map, g["rowset"]),
        notes=[_protocol_note(g), NO_CI_NOTE, _SIMDIS_NOTE, *notes],
        tables=[_datasets_table(g), *tables, *tabs, _ablation_table(g), _tuned_table(g),
                dvt, picks, *preset_tables(cov, inp.metrics, presets), *_paper_tables()],
        figures=[*plots, *figs]).build(figures_dir)
