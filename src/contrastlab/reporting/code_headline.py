"""The headline paragraph of the code section, and :func:`_ci`, a statistic's table cell."""

from __future__ import annotations

from ..evaluation.stats import baseline_p
from ..models.grid_picks import FRAGILE_SHARE
from . import Cell
from .code_rows import (BM25, CONTROL_HYBRID, SENTENCE, _is_baseline, _is_hybrid, _title,
                        _trained_fusions)
from .code_stats import only_in_top10


def _ci(st: dict, pct: bool, digits: int) -> Cell:
    """mean [95 % CI] (in % with one decimal for a Rank@k, else ``digits`` decimals)."""
    return Cell(st["mean"], st["ci_low"], st["ci_high"], scale=100.0 if pct else 1.0,
                digits=1 if pct else digits,
                source="mean over seeds, bootstrap CI over seeds and repository-clustered queries")


def _above_below(tests: dict, names) -> tuple[list[str], list[str]]:
    """The ``names`` significantly above / below the baseline of ``tests`` (Holm)."""
    return ([n for n in names if tests[n].get("beats_baseline")],
            [n for n in names if tests[n].get("below_baseline")])


def _same_weight_sentence(T: dict, metrics: dict, ctl_w: dict) -> str:
    """The control sentence's tail: its validation pick, and the trained fusions against it at
    each fusion's own weight (the best by that difference, with its CI and Holm p)."""
    pick = metrics[CONTROL_HYBRID].get("pick") or {}
    margin = pick.get("margin_items")
    tbest = max(ctl_w, key=lambda n: ctl_w[n]["mean"])
    e = ctl_w[tbest]
    above, below = _above_below(ctl_w, ctl_w)
    return (f" at its validation pick w={metrics[CONTROL_HYBRID].get('weight', float('nan')):g}"
            + (f" (margin {margin:.1f} validation items"
               + (f", under {100 * FRAGILE_SHARE:g} % of them" if pick.get("fragile") else "") + ")"
               if margin is not None else "")
            + f". Against the control at the same weight, the largest gain of a trained fusion "
            f"is {T[tbest]}'s {100 * e['delta_vs_baseline']:+.1f} "
            f"[{100 * e['delta_ci_low']:+.1f}, {100 * e['delta_ci_high']:+.1f}] points (control "
            f"{100 * e['control_mean']:.1f} % at w={metrics[tbest].get('weight', float('nan')):g}; "
            f"Holm {baseline_p(e)}); trained fusions significantly above the "
            f"control at their weight: {len(above)} of {len(ctl_w)}, below: {len(below)}.")


def _trained_sentences(T: dict, r10: dict, trained: list[str], tb: str,
                       baseline: str | None) -> list[str]:
    """The best trained predictor on validation against BM25 and the sentence embedding, and
    every trained row against the strongest baseline."""
    cmp = [f"{T[ref]} {_ci(r10[ref], True, 1)} % ({100 * (r10[tb]['mean'] - r10[ref]['mean']):+.1f} points)"
           for ref in (BM25, SENTENCE) if ref in r10]
    parts = [f"The best trained predictor on validation, {T[tb]}, reaches "
             f"{_ci(r10[tb], True, 1)} %" + (" against " + "; ".join(cmp) if cmp else "") + "."]
    if baseline and baseline in r10:
        above, below = _above_below(r10, trained)
        parts.append(f"Against the strongest baseline on validation ({T[baseline]}): "
                     f"significantly above (Holm): {', '.join(T[n] for n in above) or 'none'}; "
                     f"significantly below: {', '.join(T[n] for n in below) or 'none'}.")
    return parts


def _hybrid_sentences(T: dict, r10: dict, metrics: dict, hybrids: list[str], at10: dict) -> list[str]:
    """The best BM25 hybrid against BM25 alone, then the trained fusions against the control
    (at its pick, or at each fusion's own weight when evaluated there)."""
    hb = at10[BM25]
    hbest = max(hybrids, key=lambda n: r10[n]["mean"])
    sig = _above_below(hb, hybrids)[0]
    parts = [f"Best BM25 hybrid: {T[hbest]}, Rank@10 {_ci(r10[hbest], True, 1)} % "
             f"({100 * hb[hbest]['delta_vs_baseline']:+.1f} points over BM25 alone, "
             f"Holm {baseline_p(hb[hbest])}); hybrids significantly "
             f"above BM25: {len(sig)} of {len(hybrids)}."]
    ctl, ctl_w = at10.get("control"), at10.get("control_same_w")
    if not (ctl or ctl_w):
        return parts
    said = (f"The control, BM25 score-fused with the untrained sentence embedding, reaches "
            f"{_ci(r10[CONTROL_HYBRID], True, 1)} %")
    if ctl_w:
        return parts + [said + _same_weight_sentence(T, metrics, ctl_w)]
    fused = _trained_fusions(hybrids)
    tbest = max(fused, key=lambda n: r10[n]["mean"])
    above, below = _above_below(ctl, fused)
    return parts + [f"{said}; the best fusion with a trained predictor, {T[tbest]}, differs by "
                    f"{100 * ctl[tbest]['delta_vs_baseline']:+.1f} points (Holm "
                    f"{baseline_p(ctl[tbest])}); trained fusions significantly above the control: "
                    f"{len(above)} of {len(fused)}, below: {len(below)}."]


def _headline(stats: dict, metrics: dict, names: list[str], n_q: int, n_groups: int,
              corpus: int, ranks: dict | None = None, baseline: str | None = None) -> str:
    T = {n: _title(n, metrics.get(n)) for n in names}
    r10 = stats["rank_at_10"]["best"]
    best = next(n for n in names if r10[n].get("is_best"))
    tied = [n for n in names if r10[n].get("in_mcs") and n != best]
    trained = [n for n in names if not _is_baseline(n) and not _is_hybrid(n)]
    hybrids = [n for n in names if _is_hybrid(n)]
    parts = [f"On {n_q:,} test signatures from {n_groups} held-out repository groups, ranked "
             f"against {corpus:,} bodies (chance Rank@10 {1000 / corpus:.2f} %), the best row is "
             f"{T[best]} with Rank@10 {_ci(r10[best], True, 1)} % "
             f"(P(best) {r10[best].get('p_best', float('nan')):.2f})"
             + (f"; the 95 % model confidence set also holds {', '.join(T[t] for t in tied)}."
                if tied else "; the 95 % model confidence set holds it alone.")]
    if _is_baseline(best):
        parts.append(f"A baseline wins: {T[best]}.")
    if trained:
        tb = max(trained, key=lambda n: metrics[n].get("val_rank_at_10", float("-inf")))
        parts += _trained_sentences(T, r10, trained, tb, baseline)
    if hybrids and BM25 in stats["rank_at_10"]:
        parts += _hybrid_sentences(T, r10, metrics, hybrids, stats["rank_at_10"])
    if ranks is not None and trained and BM25 in ranks:
        parts.append(f"{T[tb]} puts {only_in_top10(ranks, tb, BM25):.0f} test signatures' bodies in its "
                     "top 10 that BM25 does not (mean over seeds); BM25 does so for "
                     f"{only_in_top10(ranks, BM25, tb):.0f} that it misses.")
    return " ".join(parts)
