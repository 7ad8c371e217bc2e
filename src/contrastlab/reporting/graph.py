"""Graph self-supervised track section of the comparison report (Cora, public split): the
main table (tuned variants, baselines, supervised references, published results in italics),
the supervised references, default vs tuned, the loss-batch ablation, the tuning budget and the
figures. Statistics in :mod:`.graph_stats`, text and smaller tables in :mod:`.graph_text`.
"""

from __future__ import annotations

from pathlib import Path

from ..evaluation.stats import baseline_p
from ..io import read_json
from . import (Cell, Inputs, Plot, Section, Table, key_values, load_params_of, log_span,
               params_shorts, params_titles)
from .figures import Comparison, Panel, rows_from_stats
from .graph_figures import _bar_figure, _curve_figure, _pca_figure, _tuning_figure
from .graph_stats import (_ALPHA, _DETERMINISTIC, BASELINES, SHORT_BASELINES, _resolution,
                          default_vs_tuned, graph_statistics, loss_vs_supervised, supervised_rows)
from .graph_text import (REFERENCES, RERUNS, _ablation_table, _ci, _cite, _default_table, _headline,
                         _hp, _objective, _sup_paper, _sup_title, _supervised_table)
from .picks import picks_table, runs_in

__all__ = ["build_section", "REFERENCES", "RERUNS", "BASELINES", "graph_statistics",
           "default_vs_tuned", "loss_vs_supervised", "supervised_rows"]


def _comparison(g: dict):
    """The main table as the report's first figure and headline (:mod:`.figures`)."""
    st, dataset = g["st"], g["ds"]
    bases = [b for b in BASELINES if b in st["stats"]]
    rows = rows_from_stats(
        st["stats"], g["names"] + bases, kind=lambda n: "baseline" if n in BASELINES else "loss",
        short={**params_shorts(g["params"], "graph"), **SHORT_BASELINES},
        title={**g["titles"], **{b: f"baseline: {BASELINES[b]}" for b in BASELINES}},
        baseline=st["baseline"],
        published=[(n, a) for n, a, _ in (REFERENCES if dataset == "Cora" else [])])
    return Comparison("test accuracy", [Panel("", rows)],
                      title=f"{dataset}: linear-probe test accuracy, 95 % CI")


def _stat_cells(st: dict, n: str, digits: int) -> list:
    """The statistic cells of a competing row: accuracy, CI, P(best), MCS, Δ and mark."""
    r, base = st["stats"][n], st["baseline"]
    if n == base:
        delta, mark = "(strongest baseline)", "-"
    elif "delta_vs_baseline" in r:
        delta = f"{r['delta_vs_baseline']:+.{digits}f} ({baseline_p(r)})"
        mark = ("▲ better" if r.get("beats_baseline") else
                "▼ worse" if r.get("below_baseline") else "n.s.")
    else:
        delta, mark = "-", "-"
    return [_mean(r, digits, ""), _ci(r, digits, ""),
            f"{r['p_best']:.2f}", "yes" if r.get("in_mcs") else "no", delta, mark]


def _mean(m: dict, digits: int, pre: str = "logreg_acc_") -> Cell:
    """The accuracy cell of ``m``'s ``<pre>mean`` and CI (``<pre>ci_low``, ``<pre>ci_high``)."""
    return Cell(m[pre + "mean"], m[pre + "ci_low"], m[pre + "ci_high"], digits=digits,
                show_ci=False, source="mean over seeds; bias-corrected bootstrap CI over seeds and nodes")


def _baseline_rows(inp: Inputs, st: dict, digits: int) -> list[list]:
    """The feature baselines' rows, through the same probe."""
    bjson = read_json(inp.metrics / "graph" / "baselines.json", optional=True) or {}
    rows = []
    for b in [b for b in BASELINES if b in st["stats"]]:
        info = bjson.get(b, {})
        hp = key_values((k, info[k]) for k in ("K", "C", "normalize") if k in info)
        rows.append([f"baseline: {BASELINES[b]}", *_stat_cells(st, b, digits),
                     1 if b in _DETERMINISTIC else st["n_seeds"], hp or "-", "same probe"])
    return rows


def _reference_rows(refs: dict, fts: dict, digits: int, dataset: str) -> list[list]:
    """Supervised reference and fine-tuning rows (no candidates), then published ones (italic)."""
    rows = []
    for r, m in [*refs.items(), *fts.items()]:
        kind = "reference" if r in refs else "fine-tuning"
        rows.append([f"{kind}: {_sup_title(r)}", _mean(m, digits), _ci(m, digits), "-", "-", "-",
                     f"{kind} (not a candidate: labels end to end)", m.get("n_seeds", "-"),
                     _hp(m.get("tuned")), "; ".join(x for x in (_cite(r, ""), _sup_paper(r)) if x)])
    for name, acc, src in (REFERENCES if dataset == "Cora" else []):
        rerun = f"; {RERUNS[name]}" if name in RERUNS else ""
        rows.append([f"*{name} (published)*", f"*{acc:.{digits}f}*", *["-"] * 7, f"*{src}{rerun}*"])
    return rows


#: ``graph.probe.criterion`` in the report's words.
_CRITERION = {"log_loss": "lowest mean cross-entropy", "accuracy": "highest accuracy"}


def _main_note(st: dict, params) -> str:
    """The main table's caption (its sizes read from the statistics and the params)."""
    return (f"Accuracy on the {st['n_test']} test nodes of the public split, mean over the final seeds "
            "(graph.final.seeds); 95% CI: bias-corrected (BC) percentile bootstrap over seeds "
            "(n-1 of n) and test nodes (Efron & Tibshirani 1993, Sec. 14.3). "
            + _resolution(st) + ". Every row except the italic published ones competes for best: P(best) = "
            "share of bootstrap draws in which the row is the best; \"in 95% MCS\" = member "
            "of the 95% Model Confidence Set (Hansen, Lunde & Nason 2011, T_max statistic), "
            "the selection-aware set tied for best. Δ vs the strongest baseline (the "
            f"baseline with the highest {st['baseline_by']} accuracy) with the paired "
            "bootstrap p-value, Holm-corrected over the rows; ▲ / ▼: significantly better / "
            f"worse at alpha {_ALPHA}, n.s.: neither. Probe: logistic regression, C from a "
            f"log grid {log_span(params.graph.probe.c_grid)} chosen on the 500 validation nodes "
            f"({_CRITERION[params.graph.probe.criterion]}) and interior to the grid "
            "(graph.probe.edge). Baselines use the same probe; deterministic ones (raw "
            "features, SGC) are one run, repeated across seeds in the paired tests; their K "
            "(SGC), C and input normalisation are chosen on validation. Every variant: the "
            f"same GCN (2 layers, {params.graph.model.hidden_dim}-d), the same epochs and the same tuning budget "
            "(graph.tune). MixCo here mixes node embeddings, a graph adaptation of Kim et "
            "al.'s input mix-up. Italic rows are published results, not rerun here (their "
            "encoders and training differ).")


def _main_table(inp: Inputs, g: dict, digits: int) -> Table:
    """Every tuned variant and baseline as competing rows, then the references."""
    st, params, titles, ds = g["st"], g["params"], g["titles"], g["ds"]
    rows = [[titles.get(n, n), *_stat_cells(st, n, digits), g["metrics"][n].get("n_seeds", "-"),
             _hp((g["tuned"][n] or {}).get("params")), _cite(n, params.graph.variants[n].loss)]
            for n in g["names"]]
    rows += _baseline_rows(inp, st, digits) + _reference_rows(g["refs"], g["fts"], digits, ds)
    return Table(
        f"{ds} node classification: linear probe on the frozen GCN encoder (public split)",
        ["variant", "test acc", "95% CI", "P(best)", "in 95% MCS",
         f"Δ vs {BASELINES.get(st['baseline'], 'baseline')} (p, Holm)", "vs baseline", "seeds",
         "chosen hyperparameters (on validation)", "source"], rows, note=_main_note(st, params))


def _tuning_table(g: dict, digits: int) -> Table:
    """The tuning budget and outcome per variant."""
    rows = []
    for n in g["names"]:
        t = g["tuned"][n] or {}
        rows.append([g["titles"].get(n, n), *(t.get(k, "-") for k in ("budget_trials", "n_complete",
                     "n_pruned", "n_failed")), _objective(t, digits), t.get("best_trial", "-"),
                     ", ".join(sorted((t.get("space") or {}).keys())) or "-"])
    tp = g["params"].graph.tune
    return Table("Tuning: the same budget for every loss", [
        "variant", "trial budget", "complete", "pruned", "failed",
        "best val acc (mean ± SE)", "chosen trial", "searched"], rows,
        note=(f"Seeded TPE (Optuna; sampler seed derived per variant from graph.tune.seed) on "
              f"the linear-probe accuracy of the 500 validation nodes, mean over "
              f"{len(tp.seeds)} training seeds per trial (disjoint from the final seeds); "
              f"trial 0 is the declared default; {tp.pruner} pruning on the running mean after "
              f"each seed (a pruned trial counts against the budget). The test nodes are not "
              f"read while tuning."))


def _plots(inp: Inputs, g: dict) -> list[Plot]:
    """The graph section's figures, in order."""
    st, names, titles, ds = g["st"], g["names"], g["titles"], g["ds"]
    return [
        Plot(f"{ds} probe accuracy with 95% CIs", "graph_probe_accuracy.png",
             "Tuned variants and baselines through the same probe; dashed "
             "lines: published public-split results.",
             lambda p: _bar_figure(st, names, p, ds, titles)),
        Plot("Tuning histories", "graph_tuning.png",
             "Validation accuracy of every trial and the best so far.",
             lambda p: _tuning_figure(inp.plots / "tune" / "graph", names, p, titles)),
        Plot("Training loss per epoch", "graph_loss_curves.png",
             "Thin lines: seeds; thick: mean. Losses differ in scale across variants (MixCo "
             "adds its mix-up term, MoCHi adds synthetic negatives).",
             lambda p: _curve_figure(inp.plots / "graph", names, p, titles)),
        Plot(f"{ds} embeddings (PCA)", "graph_embeddings_pca.png",
             "First seed's encoder outputs projected to 2-D with PCA.",
             lambda p: _pca_figure(inp.data / "graph", names, p, titles, ds)),
    ]


def _load(inp: Inputs, params) -> dict | None:
    """The graph track's data (rows best first); ``None`` when it has not run."""
    mdir = inp.metrics / "graph"
    variants = [v for v in params.graph.variants if (mdir / f"{v}.json").exists()]
    if not variants:
        return None
    titles = params_titles(params, "graph")
    names = [v for v in titles if v in variants] + sorted(v for v in variants if v not in titles)
    if (st := graph_statistics(inp, names)) is None:
        return None
    return {"params": params, "ds": params.graph.dataset, "st": st, "titles": titles,
            "metrics": {v: read_json(mdir / f"{v}.json", optional=True) for v in variants},
            "tuned": {n: read_json(inp.tuned / "graph" / f"{n}.json", optional=True) for n in names},
            "names": sorted(names, key=lambda n: -st["stats"][n]["mean"]),
            "refs": supervised_rows(inp, params),
            "fts": supervised_rows(inp, params, method="finetune")}


def _picks_table(inp: Inputs, g: dict) -> Table | None:
    """The graph track's validation picks (the probe's C, the baselines' configuration, the
    supervised references' early-stopping epoch) and their margins in validation nodes."""
    mdir = inp.metrics / "graph"
    runs = {"self-supervised, final runs": g["metrics"],
            "self-supervised, declared configuration": runs_in(mdir / "default"),
            "loss-batch ablation": runs_in(mdir / "ablation"),
            "baselines": read_json(mdir / "baselines.json", optional=True) or {},
            "supervised and fine-tuned references": runs_in(mdir / "supervised")}
    return picks_table(
        runs, items="nodes", group="Rows",
        titles={"C": "linear-probe C", "configuration": "features, normalisation and C",
                "early_stopping": "early-stopping epoch"},
        note="The probe keeps the C of " + _probe_rule(g["metrics"]) + "; raw "
             "features and SGC choose their normalisation (and SGC its K) with C on the same "
             "criterion. The tuning trials' probe kept the C of "
             + _CRITERION[g["params"].graph.tune.probe_criterion] + " on validation "
             "(graph.tune.probe_criterion). The supervised "
             "references and the fine-tuned encoder keep the epoch of "
             + _supervised_rule(runs["supervised and fine-tuned references"]) + ".")


def _probe_rule(runs: dict) -> str:
    """The final runs' linear-probe C rule, as their committed picks name it."""
    crits = {((r.get("picks") or {}).get("C") or {}).get("criterion", "") for r in runs.values()}
    if crits == {"validation log-loss"}:
        return ("lowest mean validation cross-entropy (graph.probe.criterion; a mean over nodes, "
                "so the margin is the jackknife removal count; ties: an interior C, then the smaller)")
    return ("highest validation accuracy, a count of nodes, so its margin is the gap to the "
            "runner-up (ties: an interior C, then the smaller)")


def _supervised_rule(refs: dict) -> str:
    """The supervised references' early-stopping rule, as their committed picks name it."""
    crits = {(r.get("picks") or {}).get("early_stopping", {}).get("criterion", "") for r in refs.values()}
    if all(c.startswith("validation cross-entropy") for c in crits):
        return ("lowest validation cross-entropy (the papers' criterion; a mean over nodes, so "
                "the margin is the jackknife removal count; ties: the earlier epoch)")
    return ("highest validation accuracy (ties: the lower validation loss, then the earlier "
            "epoch)")


def build_section(root: Inputs | Path, figures_dir: Path, digits: int = 3, params=None) -> Section | None:
    """The graph track's report section, or ``None`` when no graph metrics exist yet;
    ``params`` (default: ``root/params.yaml``) selects and orders the variants."""
    inp = Inputs.of(root)
    if (g := _load(inp, params if params is not None else load_params_of(inp.root))) is None:
        return None
    names, refs = g["names"], g["refs"]
    tuning = default_vs_tuned(inp, names)
    ref_tests = loss_vs_supervised(inp, names, list(refs))
    ft_tests = loss_vs_supervised(inp, list(g["fts"]), list(refs), sub="supervised")
    return Section(
        "graph", f"Graph self-supervised learning on {g['ds']}",
        headline=_headline(g, digits, tuning, ref_tests, ft_tests),
        comparison=_comparison(g),
        tables=[_main_table(inp, g, digits), _supervised_table(g, ref_tests, digits, ft_tests),
                _default_table(inp, g, digits, tuning), _ablation_table(inp, g, digits),
                _tuning_table(g, digits), _picks_table(inp, g)],
        figures=_plots(inp, g)).build(figures_dir)
