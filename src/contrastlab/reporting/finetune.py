"""Report section: fine-tuning the code encoder with multi-label contrastive losses, from
``reports/metrics/finetune/summary.json`` (stage ``finetune_summary``).
"""

from __future__ import annotations

from pathlib import Path

from ..losses.registry import method_row, track_variants
from ..params.finetune import REFERENCE_ROWS as BASELINE_ROWS
from ..evaluation.stats import baseline_p, table_resolution
from ..io import read_json
from . import Cell, Inputs, Plot, Section, Table, style
from .figures import Comparison, Panel, rows_from_stats
from .picks import picks_table, runs_in, unrecorded_note

#: The frozen encoder's row (the reference rows are the variant table's, BASELINE_ROWS).
FROZEN = method_row("finetune", "frozen_encoder")

TITLES = {n: v.title for n, v in track_variants("finetune").items()}
SHORT = {n: v.short for n, v in track_variants("finetune").items()}
COLUMNS = {"a": ["knn5_pxt", "knn5_tier", "knn5_problem", "ap", "rank1", "rank5"],
           "b": ["knn5_pxt", "knn5_tier", "knn5_problem", "ap", "rank1", "rank5", "probe_tier"]}
HEADS = {"knn5_pxt": "kNN@5 problem x tier", "knn5_tier": "kNN@5 tier",
         "knn5_problem": "kNN@5 problem", "ap": "mAP (same problem & tier)", "rank1": "Rank@1",
         "rank5": "Rank@5", "probe_tier": "tier probe acc."}


#: The aim for the best loss's kNN@5 problem x tier purity on split a (the fine-tuning
#: track's issue; the headline says whether it is met and whether the cells' ceiling allows it).
PURITY_AIM = 0.75


def _pct(st: dict) -> str:
    return f"{100 * st['mean']:.1f}% [{100 * st['ci_low']:.1f}, {100 * st['ci_high']:.1f}]"


def _cell(st: dict) -> Cell:
    """mean [95 % CI] in % (bold = in the MCS; ↑/↓ vs the strongest baseline)."""
    return Cell.from_stats(st, scale=100, digits=1,
                           source="mean over seeds, bootstrap CI over items and seeds")


def _vs(st: dict) -> tuple[str, str]:
    """``(significantly above | significantly below | not significantly different from,
    " (Holm p)")`` of a row against the strongest baseline."""
    word = ("significantly above" if st.get("beats_baseline") else "significantly below"
            if st.get("below_baseline") else "not significantly different from")
    return word, (f" (Holm {baseline_p(st)})" if "p_vs_baseline_holm" in st else "")


def _best(d: dict, rows: list[str], metric: str) -> str:
    """The trained row (no baseline) with the best validation ``metric`` (chosen on
    validation, not on test; ties broken by split a's mean)."""
    val, ta = d.get("validation", {}), d["tables"]["a"][metric]
    return max((r for r in rows if r not in BASELINE_ROWS), key=lambda r: (val.get(r, 0.0), ta[r]["mean"]))


def best_trained(summary: dict) -> str:
    """The trained row a headline reports: the best validation kNN@5 problem x tier purity."""
    return _best(summary, summary["variants"], "knn5_pxt")


TIER_HEADS = {"wp_auc": "same-tier AUC within problem", "wp_nn_tier": "nearest same-problem neighbour's tier",
              "wp_pair_sep": "one-token mutants separated", "knn5_pxt": "kNN@5 problem x tier (secondary)"}


def _tier_title(name: str, tier: dict) -> str:
    return tier.get("reference_titles", {}).get(name) or TITLES.get(name, name)


def _split_table(summary: dict, split: str, title: str, tier: bool = False,
                 extra: str = "") -> Table:
    """One split's table: every row, a cell per column present (``tier``: the within-problem tier
    table, its rows with the tier-blind reference and the ceiling; kNN@5 problem x tier as the
    secondary column); the caption gives the draws, family and smallest attainable Holm p of each
    column's tests; ``extra`` is appended to it."""
    src, heads = (summary["tier"], TIER_HEADS) if tier else (summary, HEADS)
    t, rows = src["tables"][split], src["rows" if tier else "variants"]
    cols = [c for c in (TIER_HEADS if tier else COLUMNS[split]) if c in t]
    items = [f"{t[c][rows[0]]['n_items']} {heads[c].split(' (')[0]}" for c in cols]
    size = f"queries: {', '.join(items)}" if tier else f"{t[cols[0]][rows[0]]['n_items']} queries"
    notes: dict[str, list[str]] = {}  # resolution note -> the columns tested at it
    for c in cols:
        if n := table_resolution(t[c]):
            notes.setdefault(n, []).append(heads[c].split(" (")[0])
    if len(notes) > 1:  # say which columns each draw count belongs to
        note = "Paired tests against the strongest baseline. " + " ".join(
            f"For {', '.join(cs[:-1])}{' and ' * (len(cs) > 1)}{cs[-1]}: {n}."
            for n, cs in notes.items())
    else:
        note = "".join(f"Paired tests against the strongest baseline: {n}." for n in notes)
    return Table(f"{title} ({size})", ["variant", *[heads[c] for c in cols]],
                 [[_tier_title(r, src), *[_cell(t[c][r]) for c in cols]] for r in rows],
                 note=note + extra)


def tier_headline(tier: dict) -> str:
    """The within-problem tier answer (``summary["tier"]``): the same-tier AUC of the trained
    row with the best validation AUC on both splits against the strongest baseline and the
    tier-blind reference, then the nearest-neighbour tier accuracy and the one-token mutants."""
    best = _best(tier, [r for r in tier["rows"] if r not in tier["references"]], "wp_auc")
    base, chance = tier["baseline"], tier["chance"]
    t = {s: tier["tables"][s] for s in ("a", "b")}
    auc = t["a"]["wp_auc"]

    def vs(split: str) -> str:
        word, holm = _vs(t[split]["wp_auc"][best])
        return f"{word} the strongest baseline{holm}"

    def refs(st: dict) -> str:
        return (f"{_tier_title(base, tier)} {100 * st[base]['mean']:.1f}%, tier-blind "
                f"{100 * st[chance]['mean']:.1f}%, ceiling {100 * st[tier['ceiling']]['mean']:.1f}%")

    verdict = "Yes" if auc[best].get("beats_baseline") else "No"
    s = (f"Does fine-tuning rank a query's same-tier variants of its own problem above the other-tier "
         f"ones? {verdict}: on unseen submissions of seen problems (split a) the within-problem "
         f"same-tier AUC of {TITLES.get(best, best)} (the trained row with the best validation AUC) "
         f"is {_pct(auc[best])}, {vs('a')}, {_tier_title(base, tier)} {_pct(auc[base])}; the tier-blind "
         f"reference is {_pct(auc[chance])} by construction. On unseen problems (split b): "
         f"{_pct(t['b']['wp_auc'][best])}, {vs('b')} ({_pct(t['b']['wp_auc'][base])}).")
    if nn := t["a"].get("wp_nn_tier"):
        s += (f" The nearest same-problem neighbour has the query's tier for {_pct(nn[best])} of "
              f"split-a queries ({refs(nn)}).")
    if ps := t["a"].get("wp_pair_sep"):
        pairs = tier.get("pairs", {})
        s += (f" Against a one-token mutant of another tier, the query's nearest same-tier variant is "
              f"closer in {_pct(ps[best])} of split-a pairs ({refs(ps)})")
        if pairs.get("n"):
            s += (f"; {100 * pairs['differ_in_tier']:.0f}% of the {pairs['n']} same-problem pairs at "
                  f"most one code token apart differ in tier")
        s += "."
    return s


def headline(summary: dict, layers) -> str:
    """The answer from ``summary.json``: the within-problem tier metrics first (when there),
    then the kNN@5 problem x tier purity, its ceiling, retrieval mAP and the tier probe."""
    if "tier" in summary:
        return (tier_headline(summary["tier"]) + " Secondary metric, kNN@5 problem x tier purity "
                "(it mostly measures problem clustering) -- " + _purity_headline(summary, layers))
    return _purity_headline(summary, layers)


def _purity_headline(summary: dict, layers) -> str:
    ta, tb = summary["tables"]["a"]["knn5_pxt"], summary["tables"]["b"]["knn5_pxt"]
    best = best_trained(summary)
    fa, fb = ta[FROZEN], tb[FROZEN]
    # verdict on split a's mAP (kNN@5 purity is capped by the cell sizes): better than the
    # frozen encoder = intervals disjoint, or the paired Holm test when frozen is the baseline
    apa = summary["tables"]["a"].get("ap", ta)
    b_ok = summary["baseline"] == FROZEN and apa[best].get("beats_baseline")
    sig_a = bool(apa[best]["ci_low"] > apa[FROZEN]["ci_high"] or b_ok)
    gain_a = 100 * (ta[best]["mean"] - fa["mean"])
    gain_b = 100 * (tb[best]["mean"] - fb["mean"])
    verdict = "Slightly" if sig_a and apa[best]["mean"] - apa[FROZEN]["mean"] < 0.05 else \
        "Yes" if sig_a else "No"
    s = (f"{verdict}: fine-tuning the top {layers} MiniLM layer(s) with {TITLES.get(best, best)} "
         f"(the loss with the best validation purity) "
         f"moves kNN@5 problem x tier purity on unseen submissions of seen problems (split a) from "
         f"{_pct(fa)} (frozen encoder) to {_pct(ta[best])} ({gain_a:+.1f} points), and on unseen "
         f"problems (split b) from {_pct(fb)} to {_pct(tb[best])} ({gain_b:+.1f} points)")
    ceil = summary.get("ceiling", {}).get("knn5_pxt", {})
    cap = (f"small (problem, tier) cells cap this metric at {100 * ceil['a']:.1f}% on split a "
           f"and {100 * ceil['b']:.1f}% on split b, so " if "a" in ceil else "")
    aim = ("met." if ta[best]["mean"] >= PURITY_AIM else
           "not met (and cannot be)." if "a" in ceil and ceil["a"] < PURITY_AIM else "not met.")
    s += f"; {cap}the {100 * PURITY_AIM:g} % aim on split a is {aim}"
    if ap := summary["tables"]["a"].get("ap"):
        apb = summary["tables"]["b"]["ap"]
        s += (f" Retrieval mAP (relevant = same problem and tier): split a {_pct(ap[FROZEN])} frozen vs "
              f"{_pct(ap[best])}, split b {_pct(apb[FROZEN])} vs {_pct(apb[best])}.")
    if probe := summary["tables"]["b"].get("probe_tier", {}):
        s += (f" A linear tier probe on unseen problems scores {_pct(probe[best])} with "
              f"{TITLES.get(best, best)} against {_pct(probe[FROZEN])} frozen "
              f"(tier shares set the chance level).")
    return s


@style.styled
def _purity_figure(summary: dict, path: Path) -> None:
    """kNN@5 problem x tier purity (mean, 95 % CI) per variant on both splits, with the
    ceiling set by the cell sizes dashed."""
    import matplotlib.pyplot as plt

    names = list(summary["variants"])
    fig, axes = plt.subplots(1, 2, figsize=style.figsize(4.4), sharey=True)
    vals = []
    for ax, split, title in zip(axes, ("a", "b"), ("split (a): seen problems",
                                                    "split (b): unseen problems")):
        st = summary["tables"][split]["knn5_pxt"]
        for i, v in enumerate(names):
            m, lo, hi = st[v]["mean"], st[v]["ci_low"], st[v]["ci_high"]
            vals += [lo, hi]
            ax.errorbar(i, m, yerr=[[m - lo], [hi - m]], fmt="o", ms=6,
                        color="tab:gray" if v in BASELINE_ROWS else "tab:blue")
        ceil = summary.get("ceiling", {}).get("knn5_pxt", {}).get(split)
        if ceil is not None:
            vals.append(ceil)
            ax.axhline(ceil, ls="--", color="0.45", lw=1.2)
            ax.annotate(f"ceiling {100 * ceil:.1f}%", (len(names) - 0.6, ceil), xytext=(0, 4),
                        textcoords="offset points", ha="right", va="bottom", color="0.35")
        ax.set(xlim=(-0.5, len(names) - 0.5), title=title)
        ax.set_xticks(range(len(names)), [SHORT.get(v, v) for v in names], rotation=35, ha="right")
        ax.grid(axis="x", visible=False)
    style.score_axis(axes[0], vals)
    axes[0].set_ylabel("kNN@5 problem x tier purity")
    fig.suptitle("Fine-tuned losses (blue) and baselines (gray): mean and 95% CI")
    style.save(fig, path)


def _comparison(summary: dict):
    """The report's first figure and headline (:mod:`.figures`): the within-problem same-tier
    AUC on both splits when ``summary["tier"]`` has it (the ceiling as a published-style
    reference), else kNN@5 problem x tier purity."""
    tier = summary.get("tier")
    if tier and "wp_auc" in tier["tables"].get("a", {}):
        refs = set(tier.get("references", []))
        src, metric, rows = tier, "wp_auc", [r for r in tier["rows"] if r != "ceiling"]
        kw = {"kind": lambda v: "baseline" if v in BASELINE_ROWS or v in refs else "loss",
              "short": lambda v: SHORT.get(v, "tier-blind" if v == tier.get("chance") else v),
              "title": lambda v: _tier_title(v, tier)}
        name, title = "within-problem same-tier AUC", "Within-problem same-tier AUC, 95 % CI"
    else:
        src, metric, rows = summary, "knn5_pxt", summary["variants"]
        kw = {"kind": lambda v: "baseline" if v in BASELINE_ROWS else "loss", "short": SHORT,
              "title": TITLES}
        name, title = "kNN@5 problem x tier purity", "kNN@5 problem x tier purity, 95 % CI"
    panels = [Panel(t, rows_from_stats(
        st[metric], rows, baseline=src["baseline"], **kw,
        published=[("ceiling", st[metric]["ceiling"]["mean"])]
        if src is tier and "ceiling" in st[metric] else ()))
        for s, t in (("a", "seen problems (split a)"), ("b", "unseen problems (split b)"))
        if metric in (st := src["tables"].get(s, {}))]
    return Comparison(name, panels, primary=0, noun="split", title=title)


def gpu_note(g: dict) -> str:
    """One paragraph on the GPU run (``reports/metrics/finetune_gpu/summary.json``): the best
    row on validation against the strongest baseline on split a."""
    ta, ap = g["tables"]["a"]["knn5_pxt"], g["tables"]["a"]["ap"]
    best, base = best_trained(g), g["baseline"]
    verdict, holm = _vs(ta[best])
    return (f"GPU run ({g.get('device', 'CUDA')}; every layer trained, not part of `dvc repro`, "
            f"docs/finetune.md): {TITLES.get(best, best)} reaches kNN@5 problem x tier "
            f"{_pct(ta[best])} on split a, {verdict} the strongest baseline "
            f"{TITLES.get(base, base)} {_pct(ta[base])}{holm}; mAP {_pct(ap[best])} vs "
            f"{_pct(ap[base])}; split b "
            f"{_pct(g['tables']['b']['knn5_pxt'][best])} vs {_pct(g['tables']['b']['knn5_pxt'][base])}.")


def tuning_table(root: Inputs | Path) -> Table | None:
    """Each tuned row's study (``reports/tuned/finetune/<row>.json`` and its trial history):
    the declared configuration (trial 0) against the choice on validation mAP; ``None``
    before ``tune_finetune`` ran."""
    import pandas as pd

    rows, inp = [], Inputs.of(root)
    for f in sorted((inp.tuned / "finetune").glob("*.json")):
        t = read_json(f)
        hist = inp.plots / "tune" / "finetune" / f"{f.stem}.csv"
        if not t.get("params") or not hist.exists():
            continue
        h = pd.read_csv(hist)
        first = h[h["trial"] == 0]
        if first.empty or first["state"].iloc[0] != "COMPLETE":
            continue
        d0, se0 = float(first["value"].iloc[0]), first["se"].iloc[0]
        chosen = ", ".join(f"{k} {v:.3g}" for k, v in t["params"].items())
        rows.append([TITLES.get(f.stem, f.stem), f"{100 * d0:.1f} ± {100 * se0:.1f}",
                     f"{100 * t['best_value']:.1f} ± {100 * (t['best_se'] or 0):.1f}",
                     f"{100 * (t['best_value'] - d0):+.1f}",
                     f"{t['n_complete']} / {t['n_pruned']} / {t['n_failed']}",
                     str(t["best_trial"]), chosen])
    if not rows:
        return None
    return Table("Tuning: declared configuration (trial 0) vs the choice, validation mAP % "
                 "(mean ± s.e. over the study's training seeds)",
                 ["row", "declared", "tuned", "Δ", "trials complete / pruned / failed",
                  "best trial", "chosen"], rows,
                 note="One Optuna study per row (TPE, own sampler seed, Hyperband pruning after "
                      "each seed), the same budget and search space for every row (minus what a row "
                      "does not use); validation submissions only; the final runs use the choice "
                      "on the final seeds.")


def _data_note(inp: Inputs, summary: dict, tuned: bool) -> str | None:
    """The data and cells paragraph (``None`` without the data set's summary)."""
    if (d := read_json(inp.data / "finetune" / "humaneval_dataset.json", optional=True)) is None:
        return None
    return (
        f"Data: {d['n_variants']} HumanEval variants of {d['n_problems']} problems (canonical + AST "
        f"mutants, tier by sandboxed execution of each assertion), splits {d['splits']}. Split (a): "
        "queries = held-out variants of training problems (stratified by problem x tier), corpus = "
        "training variants. Split (b): queries and leave-one-out corpus = the variants of held-out "
        "problems. Cells: mean over seeds and queries in % [95% CI, bias-corrected (BC) percentile "
        "interval of a bootstrap resampling problems (clusters) and n-1 of n seeds, the seed x query "
        "interaction counted once (crossed effects, Owen 2007)]; bold = in the 95% "
        "Model Confidence Set (Hansen, Lunde & Nason 2011); ↑/↓ = significantly better/worse than "
        f"the strongest baseline ({TITLES.get(summary['baseline'], summary['baseline'])}, chosen by "
        f"{summary['baseline_rule']}; Holm). "
        + ("Each trained row (losses, BCE, frozen + head) uses the temperature and learning "
           "rates its study chose on validation (table below; docs/finetune.md)."
           if tuned else "Defaults for every loss, no tuning (docs/finetune.md)."))


def _tier_note(tier: dict) -> str:
    """What the within-problem tier metrics measure and how they are tested."""
    return (
        "Tier within problem (docs/finetune.md, `contrastlab.finetune.tiers`): per query, only the "
        "corpus rows of its own problem count. Same-tier AUC = share of (same-tier, other-tier) "
        "pairs ranked in that order (ties one half; queries with both kinds); nearest neighbour's "
        "tier = the most similar row of the problem has the query's tier (queries with an "
        "other-tier row); one-token mutants separated = the query's nearest same-tier row is closer "
        "than an other-tier row at most one code token away (per such pair, averaged per query). "
        "Tier-blind reference: the expected score of ranking the own problem first in random order "
        "inside it (chance); ceiling: the best any embedding can reach (no candidate, no test). "
        f"↑/↓ against the strongest baseline ({_tier_title(tier['baseline'], tier)}, chosen by "
        f"{tier['baseline_rule']}), paired cluster bootstrap over problems and seeds"
        + (f" (at least {tier['n_resamples']:,} draws, more where a Holm decision is near "
           f"alpha; the tables' captions give the draws and the floor)"
           if "n_resamples" in tier else "") + ", Holm.")


def _layers(root: Path):
    """``finetune.layers`` of ``root/params.yaml`` (``"?"`` when unreadable)."""
    try:
        from ..params import load_params

        return load_params(root / "params.yaml").finetune.layers
    except Exception:  # noqa: BLE001 - the section still renders without params
        return "?"


_SPLITS = (("a", "Split (a): unseen submissions of seen problems"), ("b", "Split (b): unseen problems"))


def _picks_table(inp: Inputs) -> Table | None:
    """The trained rows' early-stopping steps and their margins (validation rows)."""
    runs = {k: r for k, r in runs_in(inp.metrics / "finetune").items() if k != "summary"}
    return picks_table({"HumanEval problem x tier": runs}, items="rows",
                       titles={"early_stopping": "early-stopping step"},
                       note="Early stopping keeps the first checked step with the highest "
                            "validation retrieval mAP (validation rows query the training rows; "
                            "relevant: the same problem and tier).")


def build_section(root: Inputs | Path, figures_dir: Path) -> Section | None:
    """The fine-tuning section, or ``None`` when ``summary.json`` is missing."""
    inp = Inputs.of(root)
    if (summary := read_json(inp.metrics / "finetune" / "summary.json", optional=True)) is None:
        return None
    tuned = tuning_table(inp)
    tier = "tier" in summary
    g = read_json(inp.metrics / "finetune_gpu" / "summary.json", optional=True)
    gpu_margins = g and unrecorded_note(inp.metrics, "finetune_gpu")  # read once, two tables
    return Section(
        "finetune", "Fine-tuning the code encoder (HumanEval problem x tier)",
        headline=headline(summary, _layers(inp.root)), comparison=_comparison(summary),
        notes=[_data_note(inp, summary, tuned is not None), tier and _tier_note(summary["tier"]),
               g and gpu_note(g)],
        tables=[*[_split_table(summary, s, f"Tier within problem, split ({s})", True) for s in "ab" if tier],
                *[_split_table(summary, s, title) for s, title in _SPLITS], tuned,
                *[g and _split_table(g, s, f"GPU, all layers: split ({s})", extra=gpu_margins)
                  for s in "ab"],
                _picks_table(inp)],
        figures=[Plot("kNN@5 problem x tier purity with 95% CIs", "finetune_knn_purity.png",
                      "Dashed: the highest purity any embedding can reach given the cell "
                      "sizes (cells with fewer than 6 members cannot fill 5 neighbours).",
                      lambda p: _purity_figure(summary, p))]).build(figures_dir)
