"""The headline of the multi-label section (:mod:`contrastlab.reporting.multilabel`): per
metric the Friedman winner and the best contrastive row against the strongest baseline, the
contrastive rows above it on macro-F1 @0.5, and the exploratory hybrids.
"""

from __future__ import annotations

from ..evaluation.stats import baseline_p, format_p
from .multilabel_rows import BASELINES, ROWS, Rows

#: The macro-F1 column of the second Friedman family and headline: F1 at the global threshold
#: chosen on validation (the forests' probabilities are not calibrated to 0.5).
F1_KEY, F1_LABEL = "macro_f1_val_t", "macro-F1 @val-t"


def _friedman_sentences(fr: dict, label: str, rows: Rows) -> list[str]:
    """Friedman winner on ``label``, the methods within the CD, best-ranked loss vs baseline."""
    ranks = fr["avg_ranks"]
    order = sorted(ranks, key=ranks.get)
    best = order[0]
    tied = [v for v in order[1:] if ranks[v] - ranks[best] <= fr["cd"]]
    parts = [
        f"On {label}: across {fr['n_datasets']} data sets, {rows.short(best)} has the best average {label} rank "
        f"({ranks[best]:.2f} of {fr['n_methods']} distinct methods); Friedman p = {fr['friedman_p']:.3g}, "
        f"Nemenyi CD = {fr['cd']:.2f}, so {len(tied)} other method(s) are within the critical difference"
        + (f" ({', '.join(rows.short(v) for v in tied[:4])}{', ...' if len(tied) > 4 else ''})." if tied else ".")]
    cbest = min((v for v in ranks if v in rows.contrastive), key=ranks.get, default=None)
    bbest = min((v for v in ranks if v in BASELINES), key=ranks.get, default=None)
    if cbest and bbest:
        parts.append(f"The best-ranked contrastive loss on {label} is {rows.short(cbest)} ({ranks[cbest]:.2f}), the "
                     f"best-ranked baseline {rows.short(bbest)} ({ranks[bbest]:.2f})"
                     + (": a baseline ranks first." if ranks[bbest] < ranks[cbest] else "."))
    return parts


def _duels(stats: dict[str, dict], key: str, rows: Rows) -> dict[str, list[str]]:
    """Per data set, the best contrastive row against the strongest baseline on ``key``, sorted
    into ``sig_wins`` / ``wins`` (the baseline ahead) and ``closs`` / ``sig_closs`` (the row)."""
    out = {"sig_wins": [], "wins": [], "closs": [], "sig_closs": []}
    for ds, st in stats.items():
        m, base = st.get(key), st.get("_baseline")
        cands = [v for v in rows.contrastive if v in m] if m and base and base in m else []
        if not cands:
            continue
        cb = max(cands, key=lambda v: m[v]["mean"])
        txt = (f"{ds}: {rows.short(cb)} {100 * m[cb]['mean']:.1f} vs {rows.short(base)} {100 * m[base]['mean']:.1f} "
               f"(Holm {baseline_p(m[cb])})")
        btest = max((v for v in BASELINES if v in m), key=lambda v: m[v]["mean"])
        if btest != base:
            txt += f", best baseline on test {rows.short(btest)} {100 * m[btest]['mean']:.1f}"
        if m[cb]["delta_vs_baseline"] < 0:
            out["sig_wins" if m[cb].get("below_baseline") else "wins"].append(txt)
        else:
            out["sig_closs" if m[cb].get("beats_baseline") else "closs"].append(txt)
    return out


_DUEL_WORDS = {"sig_wins": "the baseline wins significantly on {k} of {n} data sets",
               "wins": "the baseline is ahead without significance on {k}",
               "closs": "the contrastive row is ahead without significance on {k}",
               "sig_closs": "the contrastive row wins significantly on {k}"}


def _metric_headline(stats: dict[str, dict], fr: dict | None, key: str, label: str, rows: Rows) -> list[str]:
    """Sentences of one metric ``key`` (named ``label`` in every claim): the Friedman winner, then
    per data set the best contrastive row (highest test value, chosen on test, which favours
    it) against the strongest baseline (chosen on validation mAP), paired bootstrap, Holm."""
    parts = _friedman_sentences(fr, label, rows) if fr else []
    d = _duels(stats, key, rows)
    n = sum(len(v) for v in d.values())
    if not n:
        return parts
    bits = [_DUEL_WORDS[k].format(k=len(v), n=n) + f" ({'; '.join(v)})" for k, v in d.items() if v]
    parts.append(f"Best contrastive row (highest test {label}, which favours it) against the strongest baseline "
                 f"(highest validation mAP) on test {label}, paired bootstrap: " + "; ".join(bits) + ".")
    if len(d["sig_wins"]) + len(d["wins"]) == n:
        parts.append(f"On every data set a baseline has the higher test {label} than every contrastive loss.")
    if not d["sig_closs"]:
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
    up, hy = [], []  # contrastive rows above the baseline on macro-F1 @0.5; hybrids against their references
    for ds, st in stats.items():
        m, base = st.get("macro_f1", {}), st.get("_baseline")
        up += [f"{ds} {rows.short(v)} {100 * m[v]['mean']:.2f} vs {rows.short(base)} "
               f"{100 * m[base]['mean']:.2f} (Holm {baseline_p(m[v])})"
               for v in rows.contrastive if base in m and v in m and m[v].get("beats_baseline")]
        pairs = st.get("_pairs", {})
        for h, ref in rows.hybrid_pairs():
            cells = [f"{100 * (m[h]['mean'] - m[ref]['mean']):+.1f} "
                     f"({format_p(pairs[(h, ref, k)], m[h].get('n_resamples'))})"
                     for k in ("map", F1_KEY)
                     if h in (m := st.get(k, {})) and ref in m and (h, ref, k) in pairs]
            if len(cells) == 2:
                hy.append(f"{ds} {rows.short(h)} − {rows.short(ref)} = {cells[0]} / {cells[1]}")
    if up:
        parts.append("On macro-F1 @0.5, contrastive rows significantly above the strongest baseline: "
                     f"{'; '.join(up)}.")
    if hy:
        parts.append(f"Hybrids (exploratory; mAP / {F1_LABEL} points): " + "; ".join(hy) + ".")
    return " ".join(parts)
