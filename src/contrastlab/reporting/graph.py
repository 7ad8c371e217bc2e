"""Graph self-supervised track section of the comparison report (Cora, public split).

Reads what the graph stages write and builds the section:

- the headline: the best contrastive variant against the strongest baseline (paired p-value,
  says plainly when a baseline wins or ties), and the 95% Model Confidence Set;
- the main table: every tuned variant and every baseline (raw features, SGC, untrained GCN)
  as competing rows: linear-probe test accuracy (mean over the final seeds, 95% CI by a
  bias-corrected bootstrap over seeds and test nodes), P(best), membership of the 95% Model
  Confidence Set (Hansen, Lunde & Nason 2011; selection-aware "tied for best"), the
  difference to the strongest baseline with its Holm-corrected paired p-value and a mark when
  significantly above or below it, and the chosen hyperparameters; published public-split
  references in italics (not candidates);
- default vs tuned: each loss's declared configuration and its tuned choice, validation and
  test accuracy side by side;
- the loss-batch ablation (all nodes vs ``graph.train.batch_nodes``, paired on the seeds);
- the tuning budget and outcome per variant;
- figures: accuracies with CIs, tuning histories, training losses, PCA of the embeddings.

Statistics: :mod:`contrastlab.evaluation.stats` on the per-node predictions
``reports/data/graph/<variant>_test_pred.csv`` (paired on test nodes and seeds).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from . import Cell, Figure, Section, Table, params_titles, style

__all__ = ["build_section", "REFERENCES", "RERUNS", "BASELINES", "graph_statistics",
           "default_vs_tuned", "loss_vs_supervised", "supervised_rows"]

#: ``{variant: row label}``: params.yaml + the loss registry's titles (filled by :func:`build_section`).
TITLES: dict[str, str] = {}


def _cite(name: str, loss: str) -> str:
    """Source column of a variant: its ``variants.yaml`` cite, else its loss's registry cite,
    else the loss name."""
    from ..losses.registry import LOSSES, track_variants

    v = track_variants("graph").get(name)
    if v is not None and v.cite:
        return v.cite
    spec = LOSSES.get(loss)
    return spec.cite if spec is not None and spec.cite else loss


BASELINES = {"raw_features": "raw features (row-normalised bag of words)",
             "sgc": "SGC features S^K X (Wu et al. 2019)",
             "random_gcn": "untrained GCN (random init)"}
#: Short labels of the baselines (figure, headline; the report's legend spells them out).
SHORT_BASELINES = {"raw_features": "raw features", "sgc": "SGC", "random_gcn": "random GCN"}
#: Deterministic baselines (one probe run, repeated across seeds for the paired tests).
_DETERMINISTIC = ("raw_features", "sgc")

#: (name, test accuracy, source with the split) of published self-supervised results on Cora.
REFERENCES: list[tuple[str, float, str]] = [
    ("GRACE", 0.819, "Zhu et al. 2020 (the paper uses random splits); public split as "
                     "re-evaluated by Hou et al. 2022, Table 1"),
    ("DGI", 0.823, "Velickovic et al. 2019, Table 2, public split"),
    ("GraphMAE", 0.842, "Hou et al. 2022, Table 1, public split"),
    ("CCA-SSG", 0.842, "Zhang et al. 2021, Table 2, public split"),
    ("MVGRL", 0.868, "Hassani & Khasahmadi 2020, Table 2 (reported for the public split; not "
                     "reproduced there by independent reruns)"),
]
#: Independent public-split reruns quoted beside a published number (name -> text).
RERUNS: dict[str, str] = {
    "GRACE": "public-split reruns 0.819-0.822 (0.819: Hou et al. 2022, Table 1; range as "
             "quoted in issue 37)",
    "MVGRL": "public-split reruns 0.832-0.835 (0.835: Hou et al. 2022, Table 1; range as "
             "quoted in issue 37)",
}

_ALPHA = 0.05


def _read_json(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.exists() else None


def _correct(csv: Path, prefix: str = "seed_") -> tuple[np.ndarray, list[str]] | None:
    """``[S, n_test]`` 0/1 correctness from a predictions CSV (columns ``prefix*``)."""
    import pandas as pd

    if not csv.exists():
        return None
    df = pd.read_csv(csv)
    cols = [c for c in df.columns if c.startswith(prefix)]
    if not cols:
        return None
    return np.stack([(df[c].to_numpy() == df["y"].to_numpy()) for c in cols]).astype(float), cols


def _order(variants) -> list[str]:
    known = [v for v in TITLES if v in variants]
    return known + sorted(v for v in variants if v not in TITLES)


#: Draws of the paired tests of the default-vs-tuned and supervised-reference tables: the
#: smallest attainable p is 2 / (draws + 1) = 0.0002 before Holm (issue 35: at most alpha / 10
#: after the correction for up to 25 comparisons).
_PAIRED_RESAMPLES = 10_000


def _paired_tests(pairs: dict, n_resamples: int = _PAIRED_RESAMPLES) -> dict[str, dict]:
    """Paired bootstrap test of ``a - b`` for each ``key: (a, b)`` (``[S, I]`` 0/1 arrays on
    the same seeds and test nodes): seeds (n-1 of n) and nodes resampled together, two-sided
    p (:func:`contrastlab.evaluation.stats.paired_pvalue`), Holm-corrected over the pairs.
    Returns ``key -> {"a", "b", "delta", "p", "p_holm", "n_seeds"}`` (accuracies as fractions)."""
    from ..evaluation.stats import bootstrap_per_item, holm, paired_pvalue

    out, ps = {}, []
    for k, (a, b) in pairs.items():
        point, reps = bootstrap_per_item({"a": a, "b": b}, n_resamples=n_resamples, seed=0)
        ps.append(paired_pvalue(reps["a"] - reps["b"]))
        out[k] = {"a": point["a"], "b": point["b"], "delta": point["a"] - point["b"],
                  "p": ps[-1], "n_seeds": int(a.shape[0])}
    for k, ph in zip(out, holm(ps) if ps else []):
        out[k]["p_holm"] = float(ph)
    return out


def _common_seeds(x: tuple[np.ndarray, list[str]], y: tuple[np.ndarray, list[str]]):
    """The rows of two ``_correct`` results on the seed columns both have (same order)."""
    seeds = [c for c in x[1] if c in y[1]]
    return (x[0][[x[1].index(c) for c in seeds]], y[0][[y[1].index(c) for c in seeds]])


def default_vs_tuned(root: Path, names: list[str]) -> dict[str, dict]:
    """Tuned minus default test accuracy per loss, paired on the seeds both ran and the same
    test nodes (:func:`_paired_tests`, Holm over the losses; ``a`` = tuned, ``b`` = default).
    Losses without both prediction files are left out."""
    data = Path(root) / "reports" / "data" / "graph"
    pairs = {}
    for n in names:
        t, d = _correct(data / f"{n}_test_pred.csv"), _correct(data / "default" / f"{n}_test_pred.csv")
        if t is not None and d is not None:
            a, b = _common_seeds(t, d)
            if len(a):
                pairs[n] = (a, b)
    return _paired_tests(pairs)


def supervised_rows(root: Path, params) -> dict[str, dict]:
    """``{name: metrics}`` of the supervised references of ``graph.supervised`` whose final
    runs exist (``reports/metrics/graph/supervised/<name>.json``), in params order."""
    mdir = Path(root) / "reports" / "metrics" / "graph" / "supervised"
    return {n: m for n in params.graph.supervised
            if (m := _read_json(mdir / f"{n}.json")) is not None}


def loss_vs_supervised(root: Path, names: list[str], refs: list[str]) -> dict:
    """Each loss minus each supervised reference, paired on their common seeds and the test
    nodes (``(loss, ref) -> test``; Holm over all ``len(names) x len(refs)`` pairs)."""
    data = Path(root) / "reports" / "data" / "graph"
    pairs = {}
    for r in refs:
        rc = _correct(data / "supervised" / f"{r}_test_pred.csv")
        for n in names:
            c = _correct(data / f"{n}_test_pred.csv")
            if rc is not None and c is not None:
                a, b = _common_seeds(c, rc)
                if len(a):
                    pairs[(n, r)] = (a, b)
    return _paired_tests(pairs)


def _sup_title(n: str) -> str:
    from ..losses.registry import track_variants

    v = track_variants("graph").get(n)
    return v.title if v is not None else f"{n} (supervised)"


def _sup_paper(n: str) -> str:
    """``"published 0.815 (Kipf & Welling 2017, Table 2, public split)"`` from the variant
    table's ``paper`` field, or ``""``."""
    from ..losses.registry import track_variants

    v = track_variants("graph").get(n)
    p = v.paper if v is not None else {}
    return f"published {p['cora_public']:.3f} ({p.get('where', '')})" if "cora_public" in p else ""


def graph_statistics(root: Path, variants: list[str]) -> dict | None:
    """Paired statistics of the tuned variants and the baselines on the same test nodes.

    Every variant and every baseline is a candidate for "best" (``summarize(candidates=)``);
    the strongest baseline (``baseline=``) is the baseline with the highest *validation*
    accuracy (``val_acc`` in ``reports/metrics/graph/baselines.json``; the test point
    estimate only when no validation accuracy is recorded).

    Returns ``{"stats": summarize(...) output, "baseline": name of the strongest baseline,
    "baseline_by": "validation" | "test", "n_seeds": S, "n_test": I, "candidates": [...]}``
    or ``None`` when no variant has predictions. Deterministic baselines (raw features, SGC)
    are repeated across seeds; the untrained GCN uses the same seed list as the variants
    (seed k paired with seed k).
    """
    from ..evaluation.stats import bootstrap_per_item, draws_for, summarize

    data = Path(root) / "reports" / "data" / "graph"
    per_item: dict[str, np.ndarray] = {}
    vcols: list[str] = []
    for v in variants:
        c = _correct(data / f"{v}_test_pred.csv")
        if c is not None:
            per_item[v] = c[0]
            vcols = vcols or c[1]
    if not per_item:
        return None
    shapes = {a.shape for a in per_item.values()}
    if len(shapes) != 1:
        raise ValueError(f"graph variants have different seed counts: "
                         f"{ {k: a.shape[0] for k, a in per_item.items()} }")
    (S, I), = shapes
    base = data / "baselines_test_pred.csv"
    if base.exists():
        for b in _DETERMINISTIC:
            c = _correct(base, b)
            if c is not None:
                per_item[b] = np.repeat(c[0][:1], S, axis=0)
        rnd = _correct(base, "random_gcn_seed_")
        want = [f"random_gcn_{c}" for c in vcols]  # seed k paired with seed k
        if rnd is not None and all(c in rnd[1] for c in want) and want:
            per_item["random_gcn"] = rnd[0][[rnd[1].index(c) for c in want]]
    bases = [b for b in BASELINES if b in per_item]
    cands = list(per_item)
    n_res = draws_for(len(cands) - 1, _ALPHA)  # family: every other row vs the strongest baseline
    point, reps = bootstrap_per_item(per_item, n_resamples=n_res, seed=0)
    bjson = _read_json(Path(root) / "reports" / "metrics" / "graph" / "baselines.json") or {}
    val = {b: bjson.get(b, {}).get("val_acc") for b in bases}
    by = "validation" if bases and all(v is not None for v in val.values()) else "test"
    key = (lambda b: val[b]) if by == "validation" else point.get
    strongest = max(bases, key=key) if bases else None
    stats = summarize(point, reps, baseline=strongest, candidates=cands, alpha=_ALPHA)
    return {"stats": stats, "baseline": strongest, "baseline_by": by, "n_seeds": S,
            "n_test": I, "candidates": cands, "n_resamples": n_res, "variants": [v for v in variants if v in stats]}


def _resolution(st: dict) -> str:
    """Caption text: draws, paired test and smallest attainable Holm p of the table."""
    from ..evaluation.stats import table_resolution

    return table_resolution(st["stats"]) or f"{st['n_resamples']:,} bootstrap draws"


def _hp(chosen: dict | None) -> str:
    if not chosen:
        return "-"
    def f(v):
        return f"{v:.3g}" if isinstance(v, float) else str(v)
    return ", ".join(f"{k}={f(v)}" for k, v in sorted(chosen.items()))


def _title(n: str) -> str:
    return TITLES.get(n, BASELINES.get(n, n))


def _tuning_sentence(tuning: dict, digits: int) -> str:
    """The default-vs-tuned verdict ("tuning helped / did not") from :func:`default_vs_tuned`."""
    if not tuning:
        return ""
    k = {t["n_seeds"] for t in tuning.values()}
    each = "; ".join(f"{_title(n)} {t['delta']:+.{digits}f} (p = {t['p_holm']:.2g})"
                     for n, t in tuning.items())
    up = [_title(n) for n, t in tuning.items() if t["p_holm"] < _ALPHA and t["delta"] > 0]
    down = [_title(n) for n, t in tuning.items() if t["p_holm"] < _ALPHA and t["delta"] < 0]
    head = (f"**Tuning helped** {', '.join(up)}" if up else
            "**Tuning did not help**: no tuned choice is significantly better than its "
            "declared default")
    txt = (f"{head} (tuned - default test accuracy on the same {'/'.join(map(str, sorted(k)))} "
           f"seeds and test nodes, paired bootstrap, Holm over the losses: {each})")
    if down:
        txt += f"; significantly worse after tuning: {', '.join(down)}"
    return txt + ". "


def _supervised_sentence(best: str, refs: dict, tests: dict, digits: int) -> str:
    """The best contrastive loss against each supervised reference (issue 37's aim)."""
    f = f"{{:.{digits}f}}"
    parts = []
    for r, m in refs.items():
        t = tests.get((best, r))
        if t is None:
            continue
        if t["p_holm"] < _ALPHA:
            verdict = "significantly above it" if t["delta"] > 0 else "significantly below it"
        else:
            verdict = ("not significantly different" +
                       ("; at or above it on the point estimate" if t["delta"] >= 0 else
                        "; below it on the point estimate"))
        parts.append(f"{_sup_title(r)} {f.format(m['logreg_acc_mean'])} (95% CI "
                     f"{f.format(m['logreg_acc_ci_low'])}-{f.format(m['logreg_acc_ci_high'])}): "
                     f"{_title(best)} is {t['delta']:+.{digits}f} (paired p = {t['p_holm']:.2g} "
                     f"after Holm), {verdict}")
    if not parts:
        return ""
    return ("Against the supervised references trained end to end on the same 140 labels "
            "(tuned with the same budget, same seeds): " + "; ".join(parts) + ". ")


def _headline(st: dict, names: list[str], base: str | None, refs_best: float, digits: int,
              n_seeds: int, n_test: int, dataset: str = "Cora", *, tuning: dict | None = None,
              refs: dict | None = None, ref_tests: dict | None = None) -> str:
    """Best contrastive variant vs the strongest baseline (paired bootstrap p), the MCS, the
    default-vs-tuned verdict and the supervised references."""
    s = st["stats"]
    best = max(names, key=lambda n: s[n]["mean"])
    b = s[best]
    f = f"{{:.{digits}f}}"
    txt = (f"On {dataset} (public split, {n_test} test nodes, {n_seeds} seeds per variant, every "
           f"loss tuned with the same budget on the validation nodes), the best contrastive "
           f"loss is **{_title(best)}**: {f.format(b['mean'])} "
           f"(95% CI {f.format(b['ci_low'])}-{f.format(b['ci_high'])}). ")
    if base is not None:
        bs = s[base]
        d, p = b["delta_vs_baseline"], b["p_vs_baseline"]
        ph = b["p_vs_baseline_holm"]
        cmp = (f"The strongest baseline (highest {st.get('baseline_by', 'validation')} "
               f"accuracy), **{BASELINES[base]}**, reaches {f.format(bs['mean'])} "
               f"(95% CI {f.format(bs['ci_low'])}-{f.format(bs['ci_high'])}); "
               f"the best loss is {d:+.{digits}f} against it (paired bootstrap p = {p:.2g}, "
               f"{ph:.2g} after Holm). ")
        if b.get("beats_baseline"):
            cmp += "The best loss is significantly better than that baseline. "
        elif b.get("below_baseline"):
            cmp += "**The baseline wins: the best contrastive loss is significantly worse.** "
        else:
            cmp += ("**The baseline ties with the best contrastive loss** (no significant "
                    f"difference at alpha {_ALPHA}"
                    + ("; the baseline's point estimate is higher" if d < 0 else "") + "). ")
        txt += cmp
    mcs = [_title(n) for n in st["candidates"] if s[n].get("in_mcs")]
    top = max(st["candidates"], key=lambda n: s[n]["mean"])
    txt += (f"Highest point estimate of all rows: {_title(top)} (P(best) "
            f"{s[top]['p_best']:.2f}); 95% Model Confidence Set (selection-aware tie for "
            f"best, baselines included): {', '.join(mcs)}. ")
    txt += _tuning_sentence(tuning or {}, digits)
    txt += _supervised_sentence(best, refs or {}, ref_tests or {}, digits)
    if dataset != "Cora":
        return txt
    gap = b["mean"] - refs_best
    txt += (f"The best published public-split results are higher (GraphMAE / CCA-SSG 0.842; "
            f"MVGRL's published 0.868 is not reproduced on the public split, where reruns give "
            f"0.832-0.835): {gap:+.{digits}f} to 0.842." if gap < 0 else
            f"That is at or above GraphMAE's 0.842 ({gap:+.{digits}f}).")
    return txt


def _default_table(root: Path, names: list[str], tuned: dict, metrics: dict,
                   digits: int, tests: dict | None = None) -> Table | None:
    """Each loss's declared configuration next to its tuned choice (validation and test), with
    the paired test of tuned - default (``tests``: :func:`default_vs_tuned`)."""
    tests = tests or {}
    mdir = Path(root) / "reports" / "metrics" / "graph"
    f = f"{{:.{digits}f}}"
    rows, seeds_d = [], set()
    for n in names:
        d = _read_json(mdir / "default" / f"{n}.json")
        m = metrics.get(n)
        if d is None or m is None:
            continue
        seeds_d.add(d.get("n_seeds"))
        t = tuned.get(n) or {}
        se = t.get("best_se")
        rows.append([
            _title(n),
            f.format(d["logreg_val_acc_mean"]), f.format(d["logreg_acc_mean"]),
            f"{f.format(d['logreg_acc_ci_low'])}-{f.format(d['logreg_acc_ci_high'])}",
            (f.format(t["best_value"]) + (f" ± {se:.3f}" if se is not None else "")
             if "best_value" in t else "-"),
            f.format(m["logreg_val_acc_mean"]), f.format(m["logreg_acc_mean"]),
            f"{f.format(m['logreg_acc_ci_low'])}-{f.format(m['logreg_acc_ci_high'])}",
            f"{m['logreg_acc_mean'] - d['logreg_acc_mean']:+.{digits}f}",
            *_test_cells(tests.get(n), digits),
            f"{d.get('n_seeds', '-')} / {m.get('n_seeds', '-')}",
        ])
    if not rows:
        return None
    return Table(
        "Default vs tuned: each loss's declared configuration and its tuned choice",
        ["variant", "default val acc", "default test acc", "default 95% CI",
         "tuning objective of the choice (val, mean ± SE over tuning seeds)",
         "tuned val acc", "tuned test acc", "tuned 95% CI", "Δ test (tuned - default)",
         "paired Δ (p, Holm)", "tuning", "seeds (default / tuned)"], rows,
        note=("Default: graph.variants.<loss> as declared (also trial 0 of its study), run on "
              f"graph.final.default_seeds ({', '.join(str(x) for x in sorted(seeds_d))} "
              "seeds). Tuned: the study's choice on graph.final.seeds. Paired Δ: tuned - "
              "default on the seeds both ran and the same 1000 test nodes, paired bootstrap "
              f"over seeds (n-1 of n) and nodes ({_PAIRED_RESAMPLES:,} draws, smallest "
              f"attainable p {2 / (_PAIRED_RESAMPLES + 1):.4f} before Holm), Holm-corrected "
              "over the losses; \"helped\" / \"worse\": significant at alpha "
              f"{_ALPHA}, \"n.s.\": neither. Validation "
              "accuracy: mean over the seeds of the probe on the 500 validation nodes; test: "
              "1000 test nodes, 95% CI by the bias-corrected bootstrap over seeds and nodes. "
              "The tuning objective is the mean over the tuning seeds (disjoint from the final "
              "seeds), so it is a selected maximum and biased upwards."))


def _test_cells(t: dict | None, digits: int, up: str = "helped", down: str = "worse") -> list[str]:
    """``[Δ (p), verdict]`` cells of a paired test (:func:`_paired_tests`), or dashes."""
    if t is None:
        return ["-", "-"]
    sig = t["p_holm"] < _ALPHA
    return [f"{t['delta']:+.{digits}f} (p={t['p_holm']:.2g})",
            (up if t["delta"] > 0 else down) if sig else "n.s."]


def _supervised_table(refs: dict, names: list[str], tests: dict, digits: int) -> Table | None:
    """Each supervised reference (test accuracy, CI, choice, published number) and each loss
    against it (paired Δ, Holm over every loss x reference pair)."""
    if not refs:
        return None
    f = f"{{:.{digits}f}}"
    rows = []
    for r, m in refs.items():
        rows.append([f"reference: {_sup_title(r)}", f.format(m["logreg_acc_mean"]),
                     f"{f.format(m['logreg_acc_ci_low'])}-{f.format(m['logreg_acc_ci_high'])}",
                     f.format(m["logreg_val_acc_mean"]), m.get("n_seeds", "-"),
                     _hp(m.get("tuned")), "-", "-", _sup_paper(r) or "-"])
        for n in names:
            t = tests.get((n, r))
            if t is not None:
                rows.append([f"{_title(n)} vs {_sup_title(r)}", f.format(t["a"]), "-", "-",
                             t["n_seeds"], "-", *_test_cells(t, digits, "above", "below"), "-"])
    return Table(
        "Supervised references trained on the same 140 labels, and each loss against them",
        ["row", "test acc", "95% CI", "val acc", "seeds", "chosen hyperparameters (on "
         "validation)", "Δ loss - reference (p, Holm)", "loss vs reference", "published"],
        rows,
        note=("References (graph.supervised): trained end to end on the 140 training labels "
              "of the public split (the labels the probe of each loss sees), each tuned in its "
              "own study with the losses' budget, pruner and tuning seeds (graph.tune; trial 0 "
              "= the paper's Cora setting), the epoch chosen on the 500 validation nodes, then "
              "run on graph.final.seeds; 95% CI: bias-corrected bootstrap over seeds and test "
              "nodes, as for the losses. Loss vs reference: paired bootstrap on the common "
              f"seeds and the 1000 test nodes ({_PAIRED_RESAMPLES:,} draws), Holm over every "
              f"loss x reference pair; above / below: significant at alpha {_ALPHA}. "
              "Published: the paper's public-split accuracy (mean over its runs, with its own "
              "early stopping)."))


def _ablation_table(root: Path, names: list[str], digits: int) -> Table | None:
    from ..evaluation.stats import bootstrap_per_item, draws_for, holm, paired_pvalue, resolution_note

    data = Path(root) / "reports" / "data" / "graph"
    rows, pvals, rec = [], [], []
    n_res = draws_for(len(names), _ALPHA)
    mdir = Path(root) / "reports" / "metrics" / "graph"
    for n in names:
        ab = _correct(data / "ablation" / f"{n}_test_pred.csv")
        main = _correct(data / f"{n}_test_pred.csv")
        if ab is None or main is None:
            continue
        am, mm = _read_json(mdir / "ablation" / f"{n}.json"), _read_json(mdir / f"{n}.json")
        if am is not None and mm is not None and (
                am.get("tuned") != mm.get("tuned") or am.get("epochs") != mm.get("epochs")):
            continue  # an ablation of another configuration (not rerun since a retune)
        seeds = [c for c in ab[1] if c in main[1]]
        if not seeds:
            continue
        a = ab[0][[ab[1].index(c) for c in seeds]]
        m = main[0][[main[1].index(c) for c in seeds]]
        point, reps = bootstrap_per_item({"all_nodes": a, "batch": m}, n_resamples=n_res,
                                         seed=0)
        pvals.append(paired_pvalue(reps["all_nodes"] - reps["batch"]))
        rec.append((n, point, len(seeds)))
    if not rec:
        return None
    for (n, point, k), ph in zip(rec, holm(pvals)):
        rows.append([TITLES.get(n, n), f"{point['batch']:.{digits}f}",
                     f"{point['all_nodes']:.{digits}f}",
                     f"{point['all_nodes'] - point['batch']:+.{digits}f}", f"{ph:.2g}", k])
    return Table("Loss-batch ablation: the tuned choices with every node in each loss batch",
                 ["variant", "batch_nodes (tuned setting)", "all 2708 nodes", "Δ",
                  "p (paired, Holm)", "seeds"], rows,
                 note=("Same chosen hyperparameters and the same seeds; only the number of "
                       "nodes per loss batch differs (graph.final.ablation_batch_nodes). "
                       "The hyperparameters were tuned at the default batch, which favours "
                       "that column. " + resolution_note(n_res, len(rec)) + "."))


@style.styled
def _bar_figure(st: dict, names: list[str], path: Path, dataset: str = "Cora") -> None:
    """Mean test accuracy with its 95% CI per variant (blue) and baseline (gray) as points
    with error bars (the axis frames the scores, so it does not start at 0), published
    references as dashed lines labelled in the right margin (labels kept apart)."""
    import textwrap

    import matplotlib.pyplot as plt

    s = st["stats"]
    rows = names + [b for b in BASELINES if b in s]
    labels = [textwrap.fill(TITLES.get(n, BASELINES.get(n, n)), 18) for n in rows]
    means = np.array([s[n]["mean"] for n in rows])
    lows = np.array([s[n]["ci_low"] for n in rows])
    highs = np.array([s[n]["ci_high"] for n in rows])
    fig, ax = plt.subplots(figsize=style.figsize(4.6))
    x = np.arange(len(rows))
    for xi, n, m, lo, hi in zip(x, rows, means, lows, highs):
        ax.errorbar(xi, m, yerr=[[m - lo], [hi - m]], fmt="o", ms=7,
                    color="tab:blue" if n in names else "tab:gray")
        ax.annotate(f"{m:.3f}", (xi, m), xytext=(9, 0), textcoords="offset points",
                    va="center", ha="left")
    refs = {f"{name} {acc:.3f}": acc for name, acc, _ in (REFERENCES if dataset == "Cora" else [])}
    style.score_axis(ax, [*lows, *highs], include=list(refs.values()))
    ax.set_xlim(-0.5, len(rows) - 0.5)
    ax.set_xticks(x, labels)
    ax.grid(axis="x", visible=False)
    ax.set_ylabel("test accuracy (1000 nodes)")
    ax.set_title(f"{dataset} linear probe, mean and 95% CI over seeds and nodes: tuned "
                 "variants (blue), baselines (gray)" + ("; dashed: published" if refs else ""))
    style.reference_lines(ax, refs)
    style.save(fig, path)


@style.styled
def _tuning_figure(plots_dir: Path, names: list[str], path: Path) -> bool:
    import matplotlib.pyplot as plt
    import pandas as pd

    have = [n for n in names if (plots_dir / f"{n}.csv").exists()]
    if not have:
        return False
    fig, ax = plt.subplots(figsize=style.figsize(3.8))
    for n in have:
        df = pd.read_csv(plots_dir / f"{n}.csv")
        line, = ax.plot(range(1, len(df) + 1), df["best_so_far"], lw=2, label=TITLES.get(n, n))
        ax.scatter(range(1, len(df) + 1), df["value"], s=14, color=line.get_color(), alpha=0.6)
    ax.set_xlabel("trial (same budget for every loss)")
    ax.set_ylabel("validation accuracy (500 nodes)")
    ax.set_title("Tuning: each trial (dots) and the best so far (lines)")
    ax.legend()
    style.save(fig, path)
    return True


def _save(fig, path: Path) -> None:
    style.save(fig, path)


@style.styled
def _curve_figure(plots_dir: Path, names: list[str], path: Path) -> bool:
    import matplotlib.pyplot as plt
    import pandas as pd

    fig, axes = style.panels(len(names), height=3.4)
    drawn = False
    for ax, n in zip(axes, names):
        f = plots_dir / f"{n}.csv"
        if not f.exists():
            ax.set_visible(False)
            continue
        df = pd.read_csv(f)
        for c in [c for c in df.columns if c.startswith("loss_seed")]:
            ax.plot(df["epoch"], df[c], lw=0.6, alpha=0.5)
        ax.plot(df["epoch"], df["loss"], lw=1.8, color="k", label="mean over seeds")
        ax.set_title(TITLES.get(n, n))
        ax.set_xlabel("epoch")
        drawn = True
    axes[0].set_ylabel("training loss (nats)")
    axes[0].legend()
    if drawn:
        style.save(fig, path)
    else:
        plt.close(fig)
    return drawn


@style.styled
def _pca_figure(data_dir: Path, names: list[str], path: Path) -> bool:
    import pandas as pd

    have = [n for n in names if (data_dir / f"{n}_pca.csv").exists()]
    if not have:
        return False
    fig, axes = style.panels(len(have), height=3.6)
    for ax, n in zip(axes, have):
        df = pd.read_csv(data_dir / f"{n}_pca.csv")
        sc = ax.scatter(df["pc1"], df["pc2"], c=df["label"], cmap="tab10", s=3, vmin=0, vmax=9)
        ax.set_title(f"{TITLES.get(n, n)} (seed {int(df['seed'].iloc[0])})")
        ax.set_xticks([])
        ax.set_yticks([])
    handles, _ = sc.legend_elements()
    axes[-1].legend(handles, [f"class {i}" for i in range(len(handles))],
                    loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.suptitle("Cora encoder embeddings, 2-D PCA, coloured by class")
    style.save(fig, path)
    return True


def _comparison(st: dict, names: list[str], params, dataset: str):
    """The main table as the report's first figure and headline (:mod:`.figures`)."""
    from . import params_shorts
    from .figures import Comparison, Panel, rows_from_stats

    bases = [b for b in BASELINES if b in st["stats"]]
    rows = rows_from_stats(
        st["stats"], names + bases, kind=lambda n: "baseline" if n in BASELINES else "loss",
        short={**params_shorts(params, "graph"), **SHORT_BASELINES},
        title={**TITLES, **{b: f"baseline: {BASELINES[b]}" for b in BASELINES}},
        baseline=st["baseline"],
        published=[(n, a) for n, a, _ in (REFERENCES if dataset == "Cora" else [])])
    return Comparison("test accuracy", [Panel("", rows)],
                      title=f"{dataset}: linear-probe test accuracy, 95 % CI")


def build_section(root: Path, figures_dir: Path, digits: int = 3, params=None) -> Section | None:
    """The graph track's report section, or ``None`` when no graph metrics exist yet.

    Args:
        root: repository root (reads ``reports/{metrics,data,plots,tuned}/graph``).
        figures_dir: where the PNG figures are written.
        digits: decimals in the tables.
        params: the loaded :class:`~contrastlab.params.Params` (default: ``root/params.yaml``,
            else the schema defaults); selects and orders the variants.
    """
    root = Path(root)
    mdir = root / "reports" / "metrics" / "graph"
    if params is None:
        from ..params import load_params
        from ..utils import repo_root

        pfile = root / "params.yaml"
        params = load_params(pfile if pfile.exists() else repo_root() / "params.yaml")
    variants = [v for v in params.graph.variants if (mdir / f"{v}.json").exists()]
    if not variants:
        return None
    TITLES.clear()
    TITLES.update(params_titles(params, "graph"))
    metrics = {v: _read_json(mdir / f"{v}.json") for v in variants}
    names = _order(variants)
    st = graph_statistics(root, names)
    if st is None:
        return None
    s = st["stats"]
    base = st["baseline"]
    tuned_dir = root / "reports" / "tuned" / "graph"
    tuned = {n: _read_json(tuned_dir / f"{n}.json") for n in names}
    names = sorted(names, key=lambda n: -s[n]["mean"])
    f = f"{{:.{digits}f}}"
    base_title = BASELINES.get(base, "baseline")

    def stat_cells(n: str) -> list:
        r = s[n]
        if n == base:
            delta, mark = "(strongest baseline)", "-"
        elif "delta_vs_baseline" in r:
            delta = f"{r['delta_vs_baseline']:+.{digits}f} (p={r['p_vs_baseline_holm']:.2g})"
            mark = ("▲ better" if r.get("beats_baseline") else
                    "▼ worse" if r.get("below_baseline") else "n.s.")
        else:
            delta, mark = "-", "-"
        mean = Cell(r["mean"], r["ci_low"], r["ci_high"], digits=digits, show_ci=False,
                    source="mean over seeds; bias-corrected bootstrap CI over seeds and nodes")
        return [mean, f"{f.format(r['ci_low'])}-{f.format(r['ci_high'])}",
                f"{r['p_best']:.2f}", "yes" if r.get("in_mcs") else "no", delta, mark]

    rows = []
    for n in names:
        rows.append([TITLES.get(n, n), *stat_cells(n), metrics[n].get("n_seeds", "-"),
                     _hp((tuned[n] or {}).get("params")),
                     _cite(n, params.graph.variants[n].loss)])
    bjson = _read_json(mdir / "baselines.json") or {}
    for b in BASELINES:
        if b in s:
            info = bjson.get(b, {})
            hp = ", ".join(f"{k}={info[k]:.3g}" if isinstance(info[k], float) else
                           f"{k}={info[k]}" for k in ("K", "C", "normalize") if k in info)
            rows.append([f"baseline: {BASELINES[b]}", *stat_cells(b),
                         1 if b in _DETERMINISTIC else st["n_seeds"], hp or "-",
                         "same probe"])
    refs = supervised_rows(root, params)
    for r, m in refs.items():
        mean = Cell(m["logreg_acc_mean"], m["logreg_acc_ci_low"], m["logreg_acc_ci_high"],
                    digits=digits, show_ci=False,
                    source="mean over seeds; bias-corrected bootstrap CI over seeds and nodes")
        rows.append([f"reference: {_sup_title(r)}", mean,
                     f"{f.format(m['logreg_acc_ci_low'])}-{f.format(m['logreg_acc_ci_high'])}",
                     "-", "-", "-", "reference (not a candidate)", m.get("n_seeds", "-"),
                     _hp(m.get("tuned")),
                     "; ".join(x for x in (_cite(r, ""), _sup_paper(r)) if x)])
    ds = params.graph.dataset
    for name, acc, src in (REFERENCES if ds == "Cora" else []):
        rerun = f"; {RERUNS[name]}" if name in RERUNS else ""
        rows.append([f"*{name} (published)*", f"*{acc:.{digits}f}*", "-", "-", "-", "-", "-",
                     "-", "-", f"*{src}{rerun}*"])
    table = Table(
        f"{ds} node classification: linear probe on the frozen GCN encoder (public split)",
        ["variant", "test acc", "95% CI", "P(best)", "in 95% MCS",
         f"Δ vs {base_title} (p, Holm)", "vs baseline", "seeds",
         "chosen hyperparameters (on validation)", "source"],
        rows,
        note=("Accuracy on the 1000 test nodes of the public split, mean over the final seeds "
              "(graph.final.seeds); 95% CI: bias-corrected (BC) percentile bootstrap over seeds "
              "(n-1 of n) and test nodes (Efron & Tibshirani 1993, Sec. 14.3). "
              + _resolution(st) + ". Every row except the italic published ones competes for best: P(best) = "
              "share of bootstrap draws in which the row is the best; \"in 95% MCS\" = member "
              "of the 95% Model Confidence Set (Hansen, Lunde & Nason 2011, T_max statistic), "
              "the selection-aware set tied for best. Δ vs the strongest baseline (the "
              f"baseline with the highest {st['baseline_by']} accuracy) with the paired "
              "bootstrap p-value, Holm-corrected over the rows; ▲ / ▼: significantly better / "
              f"worse at alpha {_ALPHA}, n.s.: neither. Probe: logistic regression, C from a "
              "log grid 1e-4..1e3 chosen on the 500 validation nodes and interior to the grid "
              "(graph.probe.edge). Baselines use the same probe; deterministic ones (raw "
              "features, SGC) are one run, repeated across seeds in the paired tests; their K "
              "(SGC), C and input normalisation are chosen on validation. Every variant: the "
              "same GCN (2 layers, 128-d), the same epochs and the same tuning budget "
              "(graph.tune). MixCo here mixes node embeddings, a graph adaptation of Kim et "
              "al.'s input mix-up. Italic rows are published results, not rerun here (their "
              "encoders and training differ)."),
    )
    sec = Section("graph", f"Graph self-supervised learning on {ds}")
    tuning = default_vs_tuned(root, names)
    ref_tests = loss_vs_supervised(root, names, list(refs))
    sec.headline = _headline(st, names, base, 0.842, digits, st["n_seeds"], st["n_test"], ds,
                             tuning=tuning, refs=refs, ref_tests=ref_tests)
    sec.comparison = _comparison(st, names, params, ds)
    sec.tables.append(table)
    sut = _supervised_table(refs, names, ref_tests, digits)
    if sut is not None:
        sec.tables.append(sut)
    dt = _default_table(root, names, tuned, metrics, digits, tuning)
    if dt is not None:
        sec.tables.append(dt)
    ab = _ablation_table(root, names, digits)
    if ab is not None:
        sec.tables.append(ab)
    trows = []
    for n in names:
        t = tuned[n] or {}
        se = t.get("best_se")
        trows.append([TITLES.get(n, n), t.get("budget_trials", "-"), t.get("n_complete", "-"),
                      t.get("n_pruned", "-"), t.get("n_failed", "-"),
                      (f.format(t["best_value"]) + (f" ± {se:.3f}" if se is not None else "")
                       if "best_value" in t else "-"), t.get("best_trial", "-"),
                      ", ".join(sorted((t.get("space") or {}).keys())) or "-"])
    tp = params.graph.tune
    sec.tables.append(Table("Tuning: the same budget for every loss", [
        "variant", "trial budget", "complete", "pruned", "failed",
        "best val acc (mean ± SE)", "chosen trial", "searched"], trows,
        note=(f"Seeded TPE (Optuna; sampler seed derived per variant from graph.tune.seed) on "
              f"the linear-probe accuracy of the 500 validation nodes, mean over "
              f"{len(tp.seeds)} training seeds per trial (disjoint from the final seeds); "
              f"trial 0 is the declared default; {tp.pruner} pruning on the running mean after "
              f"each seed (a pruned trial counts against the budget). The test nodes are not "
              f"read while tuning.")))
    figures_dir = Path(figures_dir)
    bar = figures_dir / "graph_probe_accuracy.png"
    _bar_figure(st, names, bar, ds)
    sec.figures.append(Figure(f"{ds} probe accuracy with 95% CIs", bar,
                              "Tuned variants and baselines through the same probe; dashed "
                              "lines: published public-split results."))
    tfig = figures_dir / "graph_tuning.png"
    if _tuning_figure(root / "reports" / "plots" / "tune" / "graph", names, tfig):
        sec.figures.append(Figure("Tuning histories", tfig,
                                  "Validation accuracy of every trial and the best so far."))
    curves = figures_dir / "graph_loss_curves.png"
    if _curve_figure(root / "reports" / "plots" / "graph", names, curves):
        sec.figures.append(Figure("Training loss per epoch", curves,
                                  "Thin lines: seeds; thick: mean. Losses differ in scale "
                                  "across variants (MixCo adds its mix-up term, MoCHi adds "
                                  "synthetic negatives)."))
    pca = figures_dir / "graph_embeddings_pca.png"
    if _pca_figure(root / "reports" / "data" / "graph", names, pca):
        sec.figures.append(Figure(f"{ds} embeddings (PCA)", pca,
                                  "First seed's encoder outputs projected to 2-D with PCA."))
    return sec
