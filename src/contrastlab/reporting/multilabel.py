"""Multi-label track section of the comparison report.

Reads ``reports/metrics/multilabel/<dataset>_<variant>.json`` and the bootstrap replicates
``reports/metrics/multilabel/reps/<dataset>_<variant>.npz`` (written by
``train_multilabel@<dataset>-<variant>``), the curves ``reports/plots/multilabel/*.csv``, the
tuned choices ``reports/tuned/multilabel/*.json`` and ``reports/data/multilabel/*``.

Per data set, a table in the format of the Sim-Dis paper's Table 1 (rows: the contrastive
variants, the exploratory hybrids, and the baselines: BCE-trained MLP, binary-relevance
logistic regression, ExtraTrees, RandomForest, kNN; columns micro- and macro-F1 at threshold
0.5, the same at the global threshold chosen on validation, mAP, and the probability of being
the best on mAP), each cell ``mean [95% CI]`` in %: mean over seeds, bias-corrected (BC) percentile
CI of the stratified bootstrap over seeds and each label's positive
and negative test rows (``stratified_metric_reps``; ``contrastlab.evaluation.stats.summarize``).
Every row, baselines included, competes for "best": bold = in the 95% Model Confidence Set
(Hansen, Lunde & Nason 2011: "tied for best", selection-aware); ``↑`` / ``↓`` = significantly
better / worse than the strongest baseline (the baseline row with the highest validation mAP;
paired bootstrap, Holm). Then the Table 4 ablation (ANY / Sim only / Dis only / Sim-Dis), the
Friedman test with the Nemenyi critical-difference diagram of average ranks across data sets
(Demsar 2006), once on mAP and once on macro-F1 at the validation threshold (two families,
the same protocol), over distinct methods: a variant the variant table declares an alias of
another (``alias_of``: Sim-Dis Eq. 13 = ANY, the same gradient) is not a row of its own, its
target's row names it. Then the tuned choices, curves (training loss and validation mAP per
check) and the paper's own numbers.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..losses.registry import role, title, track_variants
from . import Cell, Figure, Section, Table, style

__all__ = ["build_section", "load_metrics", "load_reps", "dataset_stats", "headline", "default_vs_tuned",
           "PAPER_TABLE1", "PAPER_TABLE4", "Rows", "rows_for", "ROWS"]

#: The rows, their labels and the paper's numbers: the multi-label section of the variant
#: table (``contrastlab/losses/variants.yaml``; a hybrid's labels name its ``hybrid_base``).
_TABLE = track_variants("multilabel")
#: Declared aliases (``alias_of``): variant -> the variant it equals as a method. An alias is
#: not a row: its target's row carries its name (one method, shown once, ranked once).
ALIASES = {n: v.alias_of for n, v in _TABLE.items() if v.alias_of}
BASELINES = [n for n, v in _TABLE.items() if v.kind == "baseline"]
HYBRID_ROWS = [n for n, v in _TABLE.items() if v.kind == "hybrid"]


@dataclass(frozen=True)
class Rows:
    """The rows of the section and their labels, built from the variant table (and the
    ``multilabel`` params, :func:`rows_for`); nothing module-level is changed per report.

    Attributes:
        base: the contrastive variant whose encoder the hybrids use (``hybrid_base``).
        titles: row label per variant (an alias's target names its alias).
        shorts: short names (CD diagram, headlines).
        table1: the row order of the tables (contrastive variants, hybrids, baselines).
        contrastive: the contrastive rows of ``table1``.
    """

    base: str
    titles: dict[str, str]
    shorts: dict[str, str]
    table1: list[str]
    contrastive: list[str]

    def short(self, v: str) -> str:
        """Short display name of a row (an alias's target names its alias: ``ANY = Sim-Dis Eq. 13``)."""
        return self.shorts.get(v) or self.titles.get(v, v).split(" (")[0]

    def hybrid_pairs(self) -> list[tuple[str, str]]:
        """``(hybrid, reference)`` of every hybrid row: the baseline whose model it reuses
        (``model_of``), else the ``hybrid_base`` variant; hybrids reusing a baseline first."""
        return sorted(((h, _TABLE[h].model_of or self.base) for h in HYBRID_ROWS),
                      key=lambda p: _TABLE[p[0]].model_of is None)


def rows_for(ml=None) -> Rows:
    """The rows for the ``multilabel`` params section ``ml`` (``None``: the variant table's
    own, ``hybrid_base`` its role): the hybrids' labels name ``ml.hybrid_base``'s short name;
    a loss of ``ml.losses`` beyond the table (a loss added to the registry) is a contrastive
    row titled by its registry title, before the hybrids."""
    base = role("multilabel", "hybrid_base")
    base_short = _TABLE[base].short
    titles = {n: v.label(base_short) for n, v in _TABLE.items()}
    shorts = {n: v.short_label(base_short) for n, v in _TABLE.items()}
    for a, t in ALIASES.items():
        titles[t] = f"{titles[t]} = {shorts[a]} (alias: the same gradient)"
        shorts[t] = f"{shorts[t]} = {shorts[a]}"
    table1 = [*(n for n, v in _TABLE.items() if v.kind == "contrastive" and n not in ALIASES), *HYBRID_ROWS,
              *BASELINES]
    contrastive = [x for x in table1 if x not in BASELINES and x not in HYBRID_ROWS]
    if ml is not None:
        base = ml.hybrid_base
        first = Rows(base, titles, shorts, table1, contrastive)
        base_short = first.short(base)
        for h in HYBRID_ROWS:
            titles[h] = _TABLE[h].label(base_short)
            shorts[h] = _TABLE[h].short_label(base_short)
        for v in ml.losses:
            if v not in table1:
                table1.insert(table1.index(HYBRID_ROWS[0]), v)
                contrastive.append(v)
                titles[v] = title(v)
    return Rows(base, titles, shorts, table1, contrastive)


#: The variant table's own rows (the report builds its rows from params, :func:`rows_for`).
ROWS = rows_for()
#: The contrastive variant whose encoder the hybrids use (the table's ``hybrid_base`` role).
CONTRASTIVE_BASE = ROWS.base
TITLES = ROWS.titles
SHORT = ROWS.shorts
TABLE1_ROWS = ROWS.table1
CONTRASTIVE = ROWS.contrastive
METRICS = [("micro_f1", "micro-F1 @0.5"), ("macro_f1", "macro-F1 @0.5"),
           ("micro_f1_val_t", "micro-F1 @val-t"), ("macro_f1_val_t", "macro-F1 @val-t"),
           ("map", "mAP"), ("map_frequent", "mAP (frequent labels)")]


def short(v: str, rows: Rows = ROWS) -> str:
    """Short display name of a row (an alias's target names its alias: ``ANY = Sim-Dis Eq. 13``)."""
    return rows.short(v)
ALPHA = 0.05
#: Sim-Dis paper (Huang et al. 2025) Table 1 (image data, ResNet-50) and Table 2 (AAPD,
#: RoBERTa), in %: ``{dataset: {variant: (micro-F1, macro-F1, mAP or None)}}``.
PAPER_TABLE1: dict[str, dict[str, tuple]] = {}
for _n, _v in _TABLE.items():
    for _ds, _vals in _v.paper.get("table1", {}).items():
        PAPER_TABLE1.setdefault(_ds, {})[_n] = tuple(_vals)
#: Sim-Dis paper Table 4 (micro-F1, macro-F1 in %): MS-COCO, AAPD, in the order neither
#: factor, similarity only, dissimilarity only, both.
PAPER_TABLE4: dict[str, tuple] = {
    n: tuple(tuple(p) for p in v.paper["table4"])
    for n, v in sorted(((n, v) for n, v in _TABLE.items() if v.factors and "table4" in v.paper),
                       key=lambda nv: 2 * nv[1].factors[1] + nv[1].factors[0])}


def _tuned(v: str) -> bool:
    """False for a row that picks its own hyperparameter inside every run (``tuned: false``)."""
    return _TABLE[v].tuned if v in _TABLE else True


def _paper_name(v: str) -> str:
    """The loss's name in the paper (its registry title)."""
    return title(_TABLE[v].loss or v)


def load_metrics(metrics_dir: Path, rows: Rows = ROWS) -> dict[str, dict[str, dict]]:
    """``{dataset: {variant: metrics}}`` from ``<dataset>_<variant>.json`` files (a file whose
    name does not end in a known variant of ``rows`` is skipped)."""
    out: dict[str, dict[str, dict]] = {}
    names = sorted(rows.titles, key=len, reverse=True)  # a longer name first: its suffix may be a name
    for f in sorted(Path(metrics_dir).glob("*.json")):
        for v in names:
            if f.stem.endswith("_" + v):
                out.setdefault(f.stem[: -len(v) - 1], {})[v] = json.loads(f.read_text())
                break
    return out


def load_reps(reps_dir: Path, dataset: str, variants: list[str]) -> dict[str, dict[str, np.ndarray]]:
    """``{variant: {metric: [R]}}`` bootstrap replicates (variants without a file left out)."""
    out = {}
    for v in variants:
        f = Path(reps_dir) / f"{dataset}_{v}.npz"
        if f.exists():
            with np.load(f) as z:
                out[v] = {k: z[k].astype(np.float64) for k in z.files}
    return out


def strongest_baseline(runs: dict[str, dict]) -> str | None:
    """The baseline row with the highest validation mAP (``val_map``, mean over seeds of the
    kept models' validation mAP); None when no baseline has run."""
    have = [v for v in BASELINES if v in runs and "val_map" in runs[v]]
    return max(have, key=lambda v: runs[v]["val_map"]) if have else None


def table_stats(runs: dict[str, dict], reps: dict[str, dict[str, np.ndarray]], rows: Rows = ROWS) -> dict[str, dict]:
    """Per metric: :func:`contrastlab.evaluation.stats.summarize` over the variants that have
    replicates; candidates = every row (losses, hybrids and baselines); baseline = the strongest
    baseline (:func:`strongest_baseline`, chosen on validation mAP). ``out["_baseline"]`` names it."""
    from ..evaluation.stats import summarize

    out: dict = {}
    names = [v for v in rows.table1 if v in runs and v in reps]
    if len(names) < 2:
        return out
    base = strongest_baseline({v: runs[v] for v in names})
    out["_baseline"] = base
    cands = list(names)
    for key, _ in METRICS:
        if not all(key in reps[v] for v in names):
            continue
        out[key] = summarize({v: runs[v][key] for v in names}, {v: reps[v][key] for v in names},
                             alpha=ALPHA, baseline=base, candidates=cands)
    return out


def _resolution(st: dict) -> str:
    """Caption text: draws, test and smallest attainable Holm p of a :func:`table_stats` result
    (``stats.summarize`` picks the Wald p from the bootstrap SE when the stored draws are too
    few for the bootstrap tail p to reach alpha / 10 after Holm)."""
    from ..evaluation.stats import resolution_note

    tested = [e for e in st.get("map", {}).values() if "test" in e]
    if not tested:
        return ""
    return resolution_note(tested[0]["n_resamples"], tested[0]["family_size"], tested[0]["test"]) + ". "


def _frequent_k(coverage_json: Path, ds: str, runs: dict[str, dict], reps: dict[str, dict]) -> int | None:
    """The data set's ``k`` of "mAP (frequent labels)": the ``map_min<k>pos`` entry of
    ``reports/metrics/coverage.json`` (the smallest ``k`` whose interval covers in the
    simulation at this set's shape, bench/bench_coverage.py). Copies ``map_min<k>`` of the
    metrics and replicates to the ``map_frequent`` column. Returns ``k``; -1 when the
    simulation ran for this set and found no such ``k``; None when it did not run."""
    cov = json.loads(coverage_json.read_text()).get(ds) if coverage_json.exists() else None
    if cov is None:
        return None
    keys = [m for m in cov if m.startswith("map_min")]
    if not keys:
        return -1
    k = int(keys[0][len("map_min"):-len("pos")])
    for v, m in runs.items():
        if f"map_min{k}" in m:
            m["map_frequent"] = m[f"map_min{k}"]
            if v in reps and f"map_min{k}" in reps[v]:
                reps[v]["map_frequent"] = reps[v][f"map_min{k}"]
    return k


def _frequent_note(runs: dict[str, dict], dataset_json: Path, k: int | None) -> str:
    """Caption text for the ``map_frequent`` column: its ``k``, how many labels it averages
    and how many rarer ones it leaves out; or why there is none."""
    if k == -1:
        return ("mAP: no interval of mAP, over all labels or over the labels with at least 5-40 "
                "test positives, reaches 95 % coverage in the simulation at this set's shape "
                "(reports/metrics/coverage.json): its CIs carry no coverage claim. ")
    nf = next((m[f"map_min{k}_labels"] for m in runs.values() if f"map_min{k}_labels" in m), None)
    if k is None or nf is None:
        return ""
    n_lab = json.loads(dataset_json.read_text())["test"]["labels"] if dataset_json.exists() else None
    left = f"; the other {n_lab - int(nf)} label(s) left out" if n_lab is not None else ""
    return (f"mAP (frequent labels): mean AP over the {int(nf)} labels with at least {k} test "
            f"positives{left}. The AP of a label with fewer positives is biased upwards and the "
            "interval of mAP over all labels does not reach 95 % coverage at this set's shape, "
            f"this one does (k = {k}: the smallest that does; reports/metrics/coverage.json, "
            "docs/statistics.md). ")


def _cell(st: dict | None, m: dict, key: str) -> Cell:
    """A metric of one row: mean [95 % CI] in % (bold = in the MCS; ↑/↓ vs the strongest
    baseline); without replicates the mean alone."""
    if key not in m:
        return Cell(None)
    src = f"{key}: mean over seeds, stratified bootstrap CI"
    if st is None:
        return Cell(m[key], scale=100, digits=2, source=src)
    lo, hi = st.get("ci_low"), st.get("ci_high")
    if lo is not None and hi is not None and not lo - 1e-12 <= st["mean"] <= hi + 1e-12:
        # The bias-corrected interval moved past its own estimate: the resampling bias of AP
        # over rare labels exceeds the spread of the draws. No interval is shown (NO_CI_NOTE).
        c = Cell.from_stats({**st, "ci_low": None, "ci_high": None}, scale=100, digits=2,
                            ci_digits=1, source=src)
        return dataclasses.replace(c, marks=(*c.marks, NO_CI_MARK))
    return Cell.from_stats(st, scale=100, digits=2, ci_digits=1, source=src)


#: Mark of a cell whose bias-corrected bootstrap interval excludes its own estimate.
NO_CI_MARK = "§"
NO_CI_NOTE = ("§: no interval shown: the bias-corrected bootstrap interval (Efron & Tibshirani "
              "1993, Sec. 14.3) lies entirely on one side of the estimate, because resampling "
              "rows duplicates the few positives of rare labels and moves AP by more than the "
              "spread of the draws (the coverage simulation at this set's shape is in "
              "reports/metrics/coverage.json).")


def dataset_stats(ddir: Path, datasets: list[str]) -> list[list]:
    rows = []
    for ds in datasets:
        f = Path(ddir) / f"{ds}_dataset.json"
        if f.exists():
            m = json.loads(f.read_text())
            dropped = m.get("dropped_attributes") or []
            rows.append([ds, m["train"]["n"], m.get("val", {}).get("n", "-"), m["test"]["n"],
                         m.get("train_full", "-"), m.get("n_features", "-"), m.get("n_labels", "-"),
                         f"{m['train']['cardinality']:.2f}", ", ".join(dropped) or "none"])
    return rows


#: The macro-F1 column of the second Friedman family and headline: F1 at the global threshold
#: chosen on validation (the forests' probabilities are not calibrated to 0.5).
F1_KEY, F1_LABEL = "macro_f1_val_t", "macro-F1 @val-t"


def _metric_headline(stats: dict[str, dict], fr: dict | None, key: str, label: str, rows: Rows) -> list[str]:
    """Sentences of one metric ``key`` (named ``label`` in every claim): the Friedman winner, then
    per data set the best contrastive row (highest test value, chosen on test, which favours
    it) against the strongest baseline (chosen on validation mAP), paired bootstrap, Holm."""
    parts = []
    if fr:
        ranks = fr["avg_ranks"]
        order = sorted(ranks, key=ranks.get)
        best = order[0]
        tied = [v for v in order[1:] if ranks[v] - ranks[best] <= fr["cd"]]
        parts.append(
            f"On {label}: across {fr['n_datasets']} data sets, {rows.short(best)} has the best average {label} rank "
            f"({ranks[best]:.2f} of {fr['n_methods']} distinct methods); Friedman p = {fr['friedman_p']:.3g}, "
            f"Nemenyi CD = {fr['cd']:.2f}, so {len(tied)} other method(s) are within the critical difference"
            + (f" ({', '.join(rows.short(v) for v in tied[:4])}{', ...' if len(tied) > 4 else ''})." if tied else "."))
        cbest = min((v for v in ranks if v in rows.contrastive), key=ranks.get, default=None)
        bbest = min((v for v in ranks if v in BASELINES), key=ranks.get, default=None)
        if cbest and bbest:
            parts.append(f"The best-ranked contrastive loss on {label} is {rows.short(cbest)} ({ranks[cbest]:.2f}), the "
                         f"best-ranked baseline {rows.short(bbest)} ({ranks[bbest]:.2f})"
                         + (": a baseline ranks first." if ranks[bbest] < ranks[cbest] else "."))
    wins, sig_wins, closs, sig_closs = [], [], [], []
    for ds, st in stats.items():
        m = st.get(key)
        base = st.get("_baseline")
        if not m or not base or base not in m:
            continue
        cands = [v for v in rows.contrastive if v in m]
        if not cands:
            continue
        cb = max(cands, key=lambda v: m[v]["mean"])
        d, ph = m[cb]["delta_vs_baseline"], m[cb]["p_vs_baseline_holm"]
        txt = (f"{ds}: {rows.short(cb)} {100 * m[cb]['mean']:.1f} vs {rows.short(base)} {100 * m[base]['mean']:.1f} "
               f"(p_Holm = {ph:.3g})")
        btest = max((v for v in BASELINES if v in m), key=lambda v: m[v]["mean"])
        if btest != base:
            txt += f", best baseline on test {rows.short(btest)} {100 * m[btest]['mean']:.1f}"
        if d < 0:
            (sig_wins if m[cb].get("below_baseline") else wins).append(txt)
        else:
            (sig_closs if m[cb].get("beats_baseline") else closs).append(txt)
    if wins or sig_wins or closs or sig_closs:
        n = len(wins) + len(sig_wins) + len(closs) + len(sig_closs)
        s = (f"Best contrastive row (highest test {label}, which favours it) against the strongest baseline "
             f"(highest validation mAP) on test {label}, paired bootstrap: ")
        bits = []
        if sig_wins:
            bits.append(f"the baseline wins significantly on {len(sig_wins)} of {n} data sets ({'; '.join(sig_wins)})")
        if wins:
            bits.append(f"the baseline is ahead without significance on {len(wins)} ({'; '.join(wins)})")
        if closs:
            bits.append(f"the contrastive row is ahead without significance on {len(closs)} ({'; '.join(closs)})")
        if sig_closs:
            bits.append(f"the contrastive row wins significantly on {len(sig_closs)} ({'; '.join(sig_closs)})")
        parts.append(s + "; ".join(bits) + ".")
        if len(sig_wins) + len(wins) == n:
            parts.append(f"On every data set a baseline has the higher test {label} than every contrastive loss.")
        if not sig_closs:
            parts.append(f"No contrastive loss is significantly above the strongest baseline on {label} on any "
                         "data set.")
    return parts


def headline(runs: dict[str, dict[str, dict]], stats: dict[str, dict], fr: dict | None,
             fr_f1: dict | None = None, rows: Rows = ROWS) -> str:
    """One paragraph from the numbers, every claim naming its metric: on mAP (``fr``: its
    Friedman result), then on macro-F1 at the validation threshold (``fr_f1``), each the
    Friedman winner and the best contrastive row against the strongest baseline per data set;
    then every contrastive row significantly above the strongest baseline on macro-F1 @0.5."""
    parts = _metric_headline(stats, fr, "map", "mAP", rows)
    if any(F1_KEY in st for st in stats.values()):
        parts += _metric_headline(stats, fr_f1, F1_KEY, F1_LABEL, rows)
    up = []
    for ds, st in stats.items():
        m, base = st.get("macro_f1", {}), st.get("_baseline")
        if base in m:
            up += [f"{ds} {rows.short(v)} {100 * m[v]['mean']:.2f} vs {rows.short(base)} {100 * m[base]['mean']:.2f} "
                   f"(p_Holm = {m[v]['p_vs_baseline_holm']:.3g})"
                   for v in rows.contrastive if v in m and m[v].get("beats_baseline")]
    if up:
        parts.append(f"On macro-F1 @0.5, contrastive rows significantly above the strongest baseline: {'; '.join(up)}.")
    hy = []
    for ds, st in stats.items():
        m = st.get("map", {})
        for h, ref in rows.hybrid_pairs():
            if h in m and ref in m and "_pairs" in st and (h, ref) in st["_pairs"]:
                hy.append(f"{ds} {rows.short(h)} − {rows.short(ref)} = {100 * (m[h]['mean'] - m[ref]['mean']):+.1f} "
                          f"(p = {st['_pairs'][(h, ref)]:.3g})")
    if hy:
        parts.append("Hybrids (exploratory, mAP points): " + "; ".join(hy) + ".")
    return " ".join(parts)


def _comparison(stats: dict[str, dict], lead: list, rows: Rows):
    """Test mAP per data set (small multiples) as the report's first figure and headline
    (:mod:`.figures`); ``lead``: the critical-difference diagram, shown beside it."""
    from .figures import Comparison, Panel, rows_from_stats

    kind = {v: "baseline" if v in BASELINES else "hybrid" if v in HYBRID_ROWS else "loss"
            for v in rows.table1}
    panels = [Panel(ds, rows_from_stats(st["map"], list(st["map"]), kind=kind, short=rows.short,
                                        title=rows.titles, baseline=st.get("_baseline")))
              for ds, st in stats.items() if st.get("map")]
    return Comparison("test mAP", panels, primary=None, noun="data set", lead=lead,
                      title="Multi-label: test mAP per data set, 95 % CI")


def _fmt(x) -> str:
    return f"{x:.3g}" if isinstance(x, float) else str(x)


def friedman_family(runs: dict[str, dict[str, dict]], methods: list[str], datasets: list[str], key: str,
                    label: str, figures_dir: Path, rows: Rows = ROWS) -> tuple[dict | None, list, list]:
    """Friedman test + Nemenyi critical difference (Demsar 2006) of ``key`` over ``methods``
    (distinct methods: no alias of :data:`ALIASES` among them) on ``datasets``: its own family,
    one test per metric. Returns ``(result or None, [Figure], [Table])``."""
    from ..evaluation.stats import friedman_nemenyi, plot_cd
    import pandas as pd

    methods = [v for v in methods if v not in ALIASES]
    if len(datasets) < 2 or len(methods) < 3:
        return None, [], []
    df = pd.DataFrame({v: [runs[ds][v][key] for ds in datasets] for v in methods}, index=datasets)
    fr = friedman_nemenyi(df, higher_is_better=True, alpha=ALPHA)
    cdp = Path(figures_dir) / f"multilabel_cd_{key}.png"
    plot_cd({**fr, "avg_ranks": {rows.short(k): v for k, v in fr["avg_ranks"].items()}}, cdp,
            title=f"{label}, {fr['n_datasets']} data sets")
    alias_note = "; ".join(f"{rows.titles[t]}: {_TABLE[a].short} is declared its alias (variants.yaml alias_of) "
                           "and trained and ranked once" for a, t in ALIASES.items() if t in methods)
    fig = Figure(f"Critical-difference diagram ({label})", cdp,
                 f"Average {label} ranks of {fr['n_methods']} distinct methods over {fr['n_datasets']} data "
                 f"sets (1 = best; hybrids left out{'; ' + alias_note if alias_note else ''}); methods joined by a "
                 f"bar are within the Nemenyi critical difference {fr['cd']:.2f} (alpha {ALPHA}). "
                 f"Friedman chi2 = {fr['friedman_stat']:.2f}, p = {fr['friedman_p']:.3g}.")
    order = sorted(fr["avg_ranks"], key=fr["avg_ranks"].get)
    tab = Table(f"Average {label} rank across data sets (Friedman / Nemenyi)",
                ["Method", "average rank"] + datasets,
                [[rows.titles[v], f"{fr['avg_ranks'][v]:.2f}"] + [f"{100 * runs[ds][v][key]:.2f}" for ds in datasets]
                 for v in order],
                note=f"Friedman chi2 = {fr['friedman_stat']:.2f}, p = {fr['friedman_p']:.3g}; "
                     f"Nemenyi CD = {fr['cd']:.2f} at alpha {ALPHA} (Demsar 2006); {fr['n_methods']} distinct "
                     f"methods, a family of its own (one test per metric); the exploratory hybrids left out.")
    return fr, [fig], [tab]


def _save(fig, path: Path) -> None:
    style.save(fig, path)


@style.styled
def _curve_figure(ds: str, plots_dir: Path, variants: list[str], path: Path, rows: Rows = ROWS) -> bool:
    """Training loss and validation mAP per check (mean over seeds) of every trained variant;
    one colour per variant in both panels, one legend beside them."""
    import matplotlib.pyplot as plt
    import pandas as pd

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=style.figsize(3.8))
    any_curve = False
    for i, v in enumerate(variants):
        f = plots_dir / f"{ds}_{v}.csv"
        if not f.exists():
            continue
        df = pd.read_csv(f)
        if "step" not in df:  # a scikit-learn baseline: no steps (logistic regression: its C grid)
            continue
        g = df.groupby("step").mean(numeric_only=True).reset_index()
        label = _legend(v, rows)
        if v not in BASELINES:  # the BCE MLP's loss is not a contrastive loss
            ax1.plot(g["step"], g["loss"], color=f"C{i % 10}", label=label)
        ax2.plot(g["step"], g["val_map"], color=f"C{i % 10}", label=label)
        any_curve = True
    ax1.set_title(f"{ds}: contrastive training loss")
    ax1.set_ylabel("training loss")
    ax2.set_title(f"{ds}: validation mAP")
    ax2.set_ylabel("val mAP (ridge probe; BCE: own head)")
    for ax in (ax1, ax2):
        ax.set_xlabel("optimiser step")
    handles, labels = ax2.get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="outside right center")
    if any_curve:
        _save(fig, path)
    else:
        plt.close(fig)
    return any_curve


def _legend(v: str, rows: Rows) -> str:
    """Legend label of ``v`` in the curve figure: its title up to " (", or its name when an
    earlier row's title starts the same (the Sim-Dis weightings)."""
    head = rows.titles[v].split(" (")[0]
    earlier = list(rows.titles)[:list(rows.titles).index(v)]
    return v if any(rows.titles[u].split(" (")[0] == head for u in earlier) else head


@style.styled
def _weights_figure(ds: str, csv: Path, path: Path) -> None:
    import pandas as pd

    df = pd.read_csv(csv)
    fig, axes = style.panels(5, height=3.0, max_cols=5, sharey=True)
    names = {"R1": "R1 disjoint", "R2": "R2 equal", "R3": "R3 overlap", "R4": "R4 S⊋T", "R5": "R5 S⊊T"}
    for ax, r in zip(axes, ["R1", "R2", "R3", "R4", "R5"]):
        d = df[df["relation"] == r]
        ax.bar(d["bin_left"], d["count"], width=d["bin_right"] - d["bin_left"], align="edge")
        ax.set_title(f"{names[r]}\n{int(d['count'].sum()):,} pairs")
        ax.set_xlabel("$K^s K^d$")
        ax.set_yscale("symlog")
    axes[0].set_ylabel("pairs")
    fig.suptitle(f"{ds}: Sim-Dis weights $K^s K^d$ by relation (training labels)")
    _save(fig, path)


def _rows_of(root: Path) -> Rows:
    """The rows of the ``multilabel`` section of ``root/params.yaml`` (the project's own when
    ``root`` has none): :func:`rows_for`."""
    from ..params import load_params
    from ..utils import repo_root

    pfile = root / "params.yaml"
    return rows_for(load_params(pfile if pfile.exists() else repo_root() / "params.yaml").multilabel)


def trial0_values(history_csv: Path) -> dict[str, tuple[float, float]]:
    """Per data set, the objective of trial 0 (the declared configuration) and its standard
    error over folds, from a study history ``reports/plots/tune/multilabel/<variant>.csv``
    (columns ``dataset``, ``trial``, ``value``, ``se``); empty when the file is missing."""
    import pandas as pd

    if not Path(history_csv).exists():
        return {}
    h = pd.read_csv(history_csv)
    if not {"dataset", "trial", "value"} <= set(h.columns):
        return {}
    h = h[(h["trial"] == 0) & h["value"].notna()]
    se = h["se"] if "se" in h else pd.Series(float("nan"), index=h.index)
    return {str(d): (float(v), float(e)) for d, v, e in zip(h["dataset"], h["value"], se)}


def default_vs_tuned(mdir: Path, tdir: Path, rowset: Rows = ROWS) -> Table | None:
    """Test mAP of every tuned variant with its ``params.yaml`` values (trial 0; stage
    ``default_multilabel@<dataset>``, files under ``<mdir>/default/<dataset>/``) beside its tuned choices (the
    final runs), per tuned data set: each with its bias-corrected bootstrap CI, the
    difference in points and its paired-bootstrap p-value (the two runs share seeds and the
    stratified draws, ``stratified_metric_reps(seed=0)``), Holm-corrected within each data set
    (one family per data set, as in the per-data-set tables).
    None when no default run exists."""
    from ..evaluation.stats import bias_corrected_interval, choose_test, holm, paired_pvalue

    rows, ps, deltas, same, diffs = [], [], [], [], []
    for v in rowset.table1:
        f = tdir / f"{v}.json"
        if not f.exists():
            continue
        for ds, e in sorted((json.loads(f.read_text()).get("datasets") or {}).items()):
            dd = mdir / "default" / ds
            files = [dd / f"{ds}_{v}.json", mdir / f"{ds}_{v}.json",
                     dd / "reps" / f"{ds}_{v}.npz", mdir / "reps" / f"{ds}_{v}.npz"]
            if not all(x.exists() for x in files):
                continue
            (d, t), (dr, tr) = ([json.loads(x.read_text())["map"] for x in files[:2]],
                                [np.load(x)["map"].astype(np.float64) for x in files[2:]])
            cells = []
            for point, reps in ((d, dr), (t, tr)):
                lo, hi = bias_corrected_interval(point, reps)
                cells.append(f"{100 * point:.2f} [{100 * lo:.1f}, {100 * hi:.1f}]"
                             if lo - 1e-12 <= point <= hi + 1e-12 else
                             f"{100 * point:.2f} {NO_CI_MARK}")  # NO_CI_NOTE
            rows.append([rowset.titles[v], ds, *cells, f"{100 * (t - d):+.2f}"])
            diffs.append(tr - dr)
            deltas.append(t - d)
            same.append(e.get("best_trial") == 0)
    if not rows:
        return None
    adj = np.ones(len(rows))  # Holm within each data set (a family per data set, as in its table)
    tests = set()
    for ds in {row[1] for row in rows}:
        idx = [i for i, row in enumerate(rows) if row[1] == ds]
        test = choose_test(diffs[idx[0]].size, len(idx), ALPHA)  # Wald when the draws are too few
        tests.add(test)
        adj[idx] = holm([paired_pvalue(diffs[i], point=deltas[i], method=test) for i in idx])
    out = []
    for row, q, delta, sm in zip(rows, adj, deltas, same):
        verdict = ("trial 0 won: the same run" if sm else
                   "tuned better" if q < ALPHA and delta > 0 else
                   "tuned worse" if q < ALPHA and delta < 0 else "no significant difference")
        out.append([*row, "-" if sm else f"{q:.3g}", verdict])
    up = sum(r[-1] == "tuned better" for r in out)
    down = sum(r[-1] == "tuned worse" for r in out)
    return Table("Default (params.yaml, trial 0) vs tuned, on test (mAP, %)",
                 ["Method", "data set", "default", "tuned", "Δ (points)", "p (Holm)", "verdict"], out,
                 note=f"{len(out)} variant x data set pairs: tuning raised test mAP significantly in {up}, "
                      f"lowered it significantly in {down}. Both runs use the final seeds and the same "
                      "stratified bootstrap draws (paired); CIs as in the tables above; p = paired "
                      + ("bootstrap (Davison & Hinkley 1997)" if tests == {"bootstrap"} else
                         f"test on {diffs[0].size:,} draws ({' / '.join(sorted(tests))}: the bootstrap tail p "
                         "where its Holm floor is at most alpha/10, else the normal approximation with the "
                         "bootstrap SE)")
                      + ", Holm over each data set's pairs, alpha 0.05. "
                      "The tuned choice was picked on cross-validated validation mAP, never on test."
                      + (" " + NO_CI_NOTE if any(NO_CI_MARK in c for r in out for c in r[2:4]) else ""))


def build_section(root: Path, figures_dir: Path) -> Section | None:
    """The multi-label section, or None when no multi-label metrics exist."""
    import pandas as pd

    root = Path(root)
    rowset = _rows_of(root)
    mdir = root / "reports" / "metrics" / "multilabel"
    pdir = root / "reports" / "plots" / "multilabel"
    ddir = root / "reports" / "data" / "multilabel"
    tdir = root / "reports" / "tuned" / "multilabel"
    runs = load_metrics(mdir, rowset) if mdir.exists() else {}
    runs = {ds: r for ds, r in runs.items() if any("micro_f1_val_t" in m for m in r.values())}
    if not runs:
        return None
    figures_dir = Path(figures_dir)
    s = Section("multilabel", "Multi-label supervised contrastive learning")
    n_seeds = sorted({m.get("n_seeds") for r in runs.values() for m in r.values()})
    s.notes.append(
        "Protocol (docs/multilabel.md): a validation split carved from each training set by iterative "
        "stratification; two feature-masked views per row (MulSupCon's vector-data recipe), MLP encoder + "
        "projection head trained with each loss (optional memory queue), early stopping on validation mAP, "
        "then a linear logistic layer fitted to convergence (L-BFGS) on the frozen encoder. Baselines: the "
        "same MLP trained end to end with BCE; binary-relevance logistic regression (C on a 1e-4..1e3 log "
        "grid chosen on validation, the grid extended past an edge); scikit-learn ExtraTrees and "
        "RandomForest (500 trees, native multi-output); HistGradientBoosting (one scikit-learn "
        "HistGradientBoostingClassifier per label, early stopping on 10% of its training rows); a kNN scorer (mean label vector of the k nearest "
        "training rows). Hybrids (exploratory): the encoder of the " + rowset.short(rowset.base) + " rows with "
        "the raw features beside it, under the same linear probe or under ExtraTrees (not tuned "
        "themselves: they reuse those rows' choices). "
        f"Seeds per cell: {', '.join(str(n) for n in n_seeds)} (kNN is deterministic: one run, its output "
        "standing for every seed in the bootstrap). Cells: test mean [95% CI] in %; CI = bias-corrected "
        "(BC) percentile interval (Efron & Tibshirani 1993, Sec. 14.3) of a "
        "stratified bootstrap: seeds and, per label, its positive and negative test rows resampled "
        "(1000 draws shared by all rows of a table, so differences are paired). "
        "'@0.5' = F1 at threshold 0.5; '@val-t' = F1 at one global threshold per model chosen on validation "
        "(the threshold in 0.05..0.95 maximising the mean of validation micro- and macro-F1). "
        "Every row, baselines included, competes for best: bold = in the 95% Model Confidence Set (Hansen, "
        "Lunde & Nason 2011; 'tied for best', selection-aware); P(best) = share of draws in which the row "
        "has the highest mAP; ↑ / ↓ = significantly better / worse than the strongest baseline (the "
        "baseline with the highest validation mAP, named in each caption; paired test on the shared "
        "draws, Holm over the rows tested against it, alpha 0.05; each caption gives the draws, the test "
        "and the smallest attainable corrected p).")
    s.notes.append(NO_CI_NOTE)
    s.notes.append(
        "Sim-Dis rows: `/|P|` multiplies each positive's log-probability by K^s K^d and divides by the "
        "number of positives; `/ΣK` divides by the sum of the factors instead; Eq. 13 read literally puts "
        "the factor inside the log as printed, which only adds a constant: its gradient equals ANY's, so the "
        "variant table declares it an alias of ANY (`alias_of`): it is trained once, as ANY, shown as ANY's "
        "row (`ANY = Sim-Dis Eq. 13`) and ranked once.")
    rows = dataset_stats(ddir, list(runs))
    if rows:
        s.tables.append(Table("Multi-label data sets",
                              ["data set", "train", "validation", "test", "train file rows", "features",
                               "labels", "cardinality (train)", "dropped identifier attributes"], rows,
                              note="tmc2007-500's training file is subsampled (seeded, 4000 rows) before the "
                                   "validation split, for the CPU budget; nominal attributes are one-hot encoded."))
    stats: dict[str, dict] = {}
    from ..evaluation.stats import paired_pvalue

    for ds, r in runs.items():
        reps = load_reps(mdir / "reps", ds, list(r))
        k_freq = _frequent_k(root / "reports" / "metrics" / "coverage.json", ds, r, reps)
        st = table_stats(r, reps, rowset)
        st["_pairs"] = {(a, b): paired_pvalue(reps[a]["map"] - reps[b]["map"])
                        for a, b in rowset.hybrid_pairs()
                        if a in reps and b in reps and "map" in reps[a] and "map" in reps[b]}
        stats[ds] = st
        present = [v for v in rowset.table1 if v in r]
        base = st.get("_baseline")
        stale = [v for v in present if "tuned_source" not in r[v]]  # final runs of the previous protocol
        trs = [[rowset.titles[v] + (" — strongest baseline" if v == base else "") + (" †" if v in stale else "")]
               + [_cell(st.get(k, {}).get(v), r[v], k) for k, _ in METRICS]
               + [f"{st['map'][v]['p_best']:.2f}" if "map" in st and "p_best" in st["map"].get(v, {}) else "-"]
               for v in present]
        thr = ", ".join(f"{v} {r[v].get('threshold_val', float('nan')):.2f}" for v in present)
        src = sorted({r[v]["tuned_source"] for v in present
                      if v not in HYBRID_ROWS and _tuned(v) and "tuned_source" in r[v]}) or ["-"]
        s.tables.append(Table(f"{ds}: Table 1 format (test, %)", ["Method"] + [t for _, t in METRICS] + ["P(best) mAP"],
                              trs,
                              note=(f"Strongest baseline (highest validation mAP): {rowset.short(base) if base else 'none'}; "
                                    "↑/↓ against it (the validation mAP of the BCE MLP and of the logistic "
                                    "regression is the maximum over their checkpoints / C grid, so it favours them). "
                                    f"Hyperparameters: {'; '.join(src)}. "
                                    + (f"† = final runs of the previous protocol, not redone (CPU time): replicates "
                                       f"from the plain row bootstrap (biased for mAP), old tuning ({len(stale)} "
                                       f"row(s)). " if stale else "")
                                    + _resolution(st) + _frequent_note(r, ddir / f"{ds}_dataset.json", k_freq)
                                    + f"Mean validation thresholds: {thr}.")))
        cur = figures_dir / f"multilabel_{ds}_curves.png"
        if _curve_figure(ds, pdir, present, cur, rowset):
            s.figures.append(Figure(f"{ds}: training curves", cur,
                                    "Mean over seeds of the training loss between checks and the validation mAP "
                                    "at each check; training stops after `patience` checks without a better "
                                    "validation mAP and keeps the best checkpoint."))
        wcsv = ddir / f"{ds}_simdis_weights.csv"
        if wcsv.exists():
            wf = figures_dir / f"multilabel_{ds}_simdis_weights.png"
            _weights_figure(ds, wcsv, wf)
            s.figures.append(Figure(f"{ds}: K^s K^d by relation", wf,
                                    "Histogram of the Sim-Dis weight K^s K^d over (anchor, sample) pairs of "
                                    "training rows, by multi-label relation R1..R5 (paper Eq. 8-15)."))
    # Friedman + Nemenyi across data sets (mAP)
    fr = None
    union = [v for v in rowset.table1 if v not in HYBRID_ROWS and any(v in r for r in runs.values())]
    full = [ds for ds, r in runs.items() if all(v in r and "tuned_source" in r[v] for v in union)]
    if len(full) < len(runs):
        s.notes.append(f"Data sets without every model's final runs under the current protocol "
                       f"({', '.join(d for d in runs if d not in full)}) are left out of the Friedman test and the "
                       "critical-difference diagram.")
    fr, fr_f1 = None, None
    for key, label in (("map", "mAP"), (F1_KEY, F1_LABEL)):
        res, figs, tabs = friedman_family(runs, union, full, key, label, figures_dir, rowset)
        s.figures += figs
        s.tables += tabs
        fr, fr_f1 = (res, fr_f1) if key == "map" else (fr, res)
    s.headline = headline(runs, stats, fr, fr_f1, rowset)
    s.comparison = _comparison(stats, [f for f in s.figures if f.path.name == "multilabel_cd_map.png"], rowset)
    # Table 4 ablation
    mark = {True: "✓", False: "×"}
    abl = [(v, mark[_TABLE[v].factors[0]], mark[_TABLE[v].factors[1]]) for v in PAPER_TABLE4]
    dsl = [ds for ds in runs if all(a in runs[ds] for a, _, _ in abl)]
    if dsl:
        cols = ["Similarity", "Dissimilarity"] + [f"{ds} {t}" for ds in dsl for t in ("micro-F1", "macro-F1")]
        trs = []
        for v, sim, dis in abl:
            row = [sim, dis]
            for ds in dsl:
                st = stats.get(ds, {})
                row += [_cell(st.get("micro_f1_val_t", {}).get(v), runs[ds][v], "micro_f1_val_t"),
                        _cell(st.get("macro_f1_val_t", {}).get(v), runs[ds][v], "macro_f1_val_t")]
            trs.append(row)
        s.tables.append(Table("Ablation in the Table 4 format (ours; F1 at the validation threshold, %)", cols, trs,
                              note="Neither factor = ANY; both = Sim-Dis (/|P| weighting). Marks as in the "
                                   "per-data-set tables (tests over all models of that data set)."))
    # tuned choices, per variant and tuned data set
    trow, tuned_ds = [], set()
    for v in rowset.table1:
        f = tdir / f"{v}.json"
        if not f.exists():
            continue
        t = json.loads(f.read_text())
        t0 = trial0_values(root / "reports" / "plots" / "tune" / "multilabel" / f"{v}.csv")
        for ds, e in sorted((t.get("datasets") or {}).items()):
            tuned_ds.add(ds)
            se = e.get("best_value_se")
            d0 = t0.get(ds)
            trow.append([rowset.titles[v], ds, ", ".join(f"{k}={_fmt(x)}" for k, x in sorted(e["params"].items())),
                         "-" if d0 is None else f"{100 * d0[0]:.2f}" + (f" ± {100 * d0[1]:.2f}" if d0[1] == d0[1] else ""),
                         f"{100 * e['best_value']:.2f}" + (f" ± {100 * se:.2f}" if se is not None else ""),
                         str(e.get("best_trial", "-")), f"{e.get('n_complete', '-')}/{t.get('budget_trials', '-')}"])
    if trow:
        untuned = [d for d in runs if d not in tuned_ds]
        s.tables.append(Table("Tuned choices (cross-validation on the training part; test never read)",
                              ["Method", "data set", "choice", "default = trial 0 (CV val mAP, % ± se)",
                               "tuned (CV val mAP, % ± se)", "best trial", "trials"], trow,
                              note="One Optuna TPE study per variant and data set, the same budget for every row; "
                                   "objective = mean validation mAP over 3 iterative-stratification folds of the "
                                   "training part, fold seeds disjoint from the final seeds; trial 0 = the "
                                   "params.yaml values. Logistic regression: C picked on validation inside every "
                                   "run; hybrids reuse their parts' choices."
                                   + (f" Not retuned (time): {', '.join(untuned)}, where every row uses its "
                                      "params.yaml values: the losses' choices of the earlier joint tuning "
                                      "(emotions + medical, 4 trials), the forests' and kNN's defaults."
                                      if untuned else "")))
    dvt = default_vs_tuned(mdir, tdir, rowset)
    if dvt is not None:
        s.tables.append(dvt)
        verdicts = [r[-1] for r in dvt.rows]
        s.headline += (f" Tuning ({len({r[1] for r in dvt.rows})} of {len(runs)} data sets tuned per row) against the "
                       f"params.yaml defaults on test: mAP significantly higher in "
                       f"{verdicts.count('tuned better')} and lower in {verdicts.count('tuned worse')} of "
                       f"{len(verdicts)} variant x data set pairs (paired bootstrap, Holm per data set).")
    # reference numbers from the paper
    ref_rows = []
    for loss in [n for n in _TABLE if any(n in t for t in PAPER_TABLE1.values())]:
        row = [_paper_name(loss)]
        for dset, vals in PAPER_TABLE1.items():
            v = vals[loss]
            row += [f"{x:.2f}" if x is not None else "-" for x in (v if dset != "AAPD (RoBERTa)" else v[:2])]
        ref_rows.append(row)
    ref_cols = ["Method"]
    for dset in PAPER_TABLE1:
        ref_cols += [f"{dset} {t}" for t in (("micro-F1", "macro-F1", "mAP") if dset != "AAPD (RoBERTa)"
                                            else ("micro-F1", "macro-F1"))]
    s.tables.append(Table(
        "Reference: the Sim-Dis paper's reported numbers (Tables 1 and 2)", ref_cols, ref_rows,
        note="Published numbers, copied from the Sim-Dis paper (docs/sources.md), in %. These are DIFFERENT data sets "
             "(MS-COCO, PASCAL VOC, NUS-WIDE images with ResNet-50; AAPD text with RoBERTa) from ours "
             "(MULAN feature sets with an MLP): compare the ranking of the losses, not the values."))
    factor_name = {(False, False): "neither (= {})", (True, True): "both (= {})"}
    t4 = [[factor_name.get(_TABLE[v].factors, "{}").format(_paper_name(v))]
          + [f"{x:.2f}" for pair in PAPER_TABLE4[v] for x in pair] for v in PAPER_TABLE4]
    s.tables.append(Table("Reference: the paper's Table 4 ablation",
                          ["Factors", "MS-COCO micro-F1", "MS-COCO macro-F1", "AAPD micro-F1", "AAPD macro-F1"],
                          t4, note="Published numbers (%); different data sets from ours."))
    return s
