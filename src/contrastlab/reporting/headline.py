"""A track's two-sentence headline (:func:`headline`), its numbers for ``summary.json``
(:func:`headline_metrics`) and :func:`attach`, from its
:class:`~contrastlab.reporting.figures.Comparison`; the rows tied for best are the 95 % model
confidence set (Hansen, Lunde & Nason 2011); across panels the differences are combined by the
Wilcoxon signed-rank test (Demsar 2006, Sec. 3.1.3).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

from ..evaluation.stats import format_p
from . import Figure
from .figures import Comparison, Panel, Row, forest_figure, legend, shorten_labels

__all__ = ["attach", "headline", "headline_metrics", "words", "MAX_HEADLINE_WORDS"]

#: The headline's length limit (words, numbers counted as words).
MAX_HEADLINE_WORDS = 60


def _names(rows: Sequence[Row], n: int = 3) -> str:
    s = [r.short for r in rows]
    return ", ".join(s[:n]) + (f" and {len(s) - n} more" if len(s) > n else "")


def _lead_words(c: Comparison, best: Row, base: Row | None, compact: bool = False) -> str:
    """``, +0.3 points vs the strongest baseline SGC (81.2 %; test, p)``; empty without one.
    ``compact``: ``, +0.3 points vs SGC (81.2 %; p)`` (a headline that states a second panel)."""
    if base is None or best is base:
        return ""
    vs, test = ("", "") if compact else ("the strongest baseline ", f"{c.test}, ")
    return (f", {c.scale * (best.estimate - base.estimate):+.{c.digits}f} points vs {vs}{base.short} "
            f"({c.fmt_unit(base.estimate)}; {test}{format_p(best.p, floor=best.p_floor)})")


def words(text: str) -> int:
    """Words of a headline as a reader counts them (Markdown marks dropped)."""
    return len(text.replace("**", "").split())


def _panel_verdict(c: Comparison, p: Panel, n_named: int = 3, compact: bool = False) -> tuple[str, str]:
    best, base, top = p.best_loss(), p.baseline(), p.top()
    if best is None or top is None:
        return "", ""
    mcs = [r for r in sorted(p.rows, key=lambda r: -r.estimate) if r.in_mcs]
    d = _lead_words(c, best, base, compact)
    on = f"On {p.title}, " if p.title and len(c.panels) > 1 else ""
    if top is best:
        first = f"{on}**{best.short}** scores highest, {c.metric} {c.fmt_ci(best)}{d}."
    else:
        first = (f"{on}**{top.short}** scores highest, {c.metric} {c.fmt_ci(top)}; the best loss, "
                 f"{best.short}, reaches {c.fmt_unit(best.estimate)}{d}.")
    tied = (f"tied for best (95 % MCS): {_names(mcs, n_named)}." if mcs and n_named else
            f"{len(mcs)} rows are tied for best (95 % MCS)." if mcs else "")
    if base is None:
        verdict = "no baseline ran"
    elif best.beats:
        verdict = f"training with {best.short} pays off here"
    elif best.below:
        every = all(r.below for r in p.get("loss"))
        verdict = f"{base.short} beats {'every' if every else 'the best'} loss significantly"
    else:
        verdict = f"no loss is significantly better than {base.short}"
    return first, f"Take-away: {verdict}; {tied}"


def _secondary(c: Comparison) -> str:
    """``on <panel>, <best loss> reaches <value>, significantly above <baseline> (<diff>, <p>)``;
    empty without a secondary panel with a loss."""
    if c.secondary is None or c.primary is None:
        return ""
    p = c.panels[c.secondary]
    best, base = p.best_loss(), p.baseline()
    if best is None:
        return ""
    verdict = ("significantly above" if best.beats else "significantly below" if best.below
               else "level with")
    head = f"on {p.title}, {best.short} reaches {c.fmt_unit(best.estimate)}"
    if base is None or base is best:
        return head
    d = f"{c.scale * (best.estimate - base.estimate):+.{c.digits}f}"
    return f"{head}, {verdict} {base.short} ({d}, {format_p(best.p, floor=best.p_floor)})"


def _most(rows: Sequence[Row], key: Callable[[Row], str],
          count: Callable[[list[Row]], int]) -> tuple[str, list[Row]]:
    """``(key, its rows)`` of the group with the highest ``count`` (ties: the higher mean)."""
    groups: dict[str, list[Row]] = {}
    for r in rows:
        groups.setdefault(key(r), []).append(r)
    k = max(groups, key=lambda g: (count(groups[g]), sum(r.estimate for r in groups[g]) / len(groups[g])))
    return k, groups[k]


def _across(c: Comparison) -> tuple[str, str, dict]:
    """Sentences and numbers of a multi-panel comparison (``primary=None``)."""
    per = [(p, p.best_loss(), p.baseline()) for p in c.panels]
    per = [(p, b, s) for p, b, s in per if b is not None and s is not None]
    n = len(per)
    if not n:
        return "", "", {}
    deltas = [b.estimate - s.estimate for _, b, s in per]
    above = sum(b.beats for _, b, _ in per)
    below = sum(b.below for _, b, _ in per)
    rows = [r for p, _, _ in per for r in p.rows]
    # the row most often tied for best (95 % MCS), ties broken by the mean estimate
    win, won = _most([r for r in rows if r.kind != "published"], lambda r: r.short,
                     lambda g: sum(r.in_mcs for r in g))
    k = sum(r.in_mcs for r in won)
    lo, hi = min(deltas), max(deltas)
    p_w = _wilcoxon(deltas)
    first = (f"**{win}** is tied for best (95 % MCS) on {k} of {n} {c.noun}s; the best loss is "
             f"{c.scale * lo:+.{c.digits}f} to {c.scale * hi:+.{c.digits}f} points from the "
             f"strongest baseline ({c.metric}), significantly below on {below}, above on "
             f"{above} ({c.test}; Wilcoxon {format_p(p_w)}).")
    if above == 0 and below == 0:
        second = (f"Take-away: no loss differs significantly from the strongest baseline on "
                  f"any {c.noun}.")
    elif above == 0:
        second = (f"Take-away: no contrastive loss is significantly above the strongest baseline "
                  f"on any {c.noun}" + (f"; prefer {win}." if won[0].kind == "baseline" else "."))
    elif above == n:
        second = f"Take-away: a contrastive loss beats the strongest baseline on every {c.noun}."
    else:
        second = (f"Take-away: no loss wins consistently; above the strongest baseline on "
                  f"{above}, below on {below} of {n} {c.noun}s.")
    bl, _ = _most([b for _, b, _ in per], lambda r: r.key, len)  # the most frequent, by estimate
    sb, _ = _most([s for _, _, s in per], lambda r: r.key, len)
    label = {r.key: r.short for r in rows}
    est = {k: [r.estimate for r in rows if r.key == k] for k in (bl, sb)}  # every panel's rows
    nums = {"best_loss": bl, "strongest_baseline": sb, "delta_min": lo, "delta_max": hi,
            "best_loss_label": label[bl], "baseline_label": label[sb],
            "delta": sum(deltas) / n, "p": p_w, "n_panels": n, "n_above": above,
            "n_below": below, "best_loss_value": sum(est[bl]) / len(est[bl]),
            "baseline_value": sum(est[sb]) / len(est[sb])}
    return first, second, nums


def _wilcoxon(deltas: Sequence[float]) -> float | None:
    """Two-sided Wilcoxon signed-rank p of the per-panel differences (Demsar 2006,
    Sec. 3.1.3); ``None`` under two panels or when every difference is 0."""
    if len(deltas) < 2 or all(d == 0 for d in deltas):
        return None
    from scipy.stats import wilcoxon

    return float(wilcoxon(deltas).pvalue)


def headline(c: Comparison) -> str:
    """Two sentences (Markdown, the winner in bold), at most :data:`MAX_HEADLINE_WORDS`
    words: what won, by how much, with its interval and test; and the take-away (with
    ``c.secondary``, also that panel's best loss). Details are dropped to fit the limit."""
    if c.primary is None:
        first, second, _ = _across(c)
        text = f"{first} {second}".strip()
        if words(text) > MAX_HEADLINE_WORDS:  # the take-away without its advice
            text = f"{first} {second.split(';')[0].rstrip('.')}.".strip()
        return text
    if extra := _secondary(c):  # compact first sentence; verdict, then the other panel's best loss
        first, second = _panel_verdict(c, c.panels[c.primary], 0, compact=True)
        for text in (f"{first} {second.split(';')[0]}; {extra}.",   # verdict; other panel
                     f"{first} Take-away: {extra}.",                  # the other panel alone
                     f"{first} Take-away: {extra.split(', significantly')[0].split(', level')[0]}."):
            if words(text) <= MAX_HEADLINE_WORDS:
                break
        return text.strip()
    first, second = _panel_verdict(c, c.panels[c.primary])
    for n in (3, 2, 1, 0):  # fewer rows named, then none, then the verdict alone
        text = f"{first} {_panel_verdict(c, c.panels[c.primary], n)[1]}".strip()
        if words(text) <= MAX_HEADLINE_WORDS:
            return text
    return f"{first} {second.split(';')[0]}.".strip()


def headline_metrics(c: Comparison) -> dict[str, Any]:
    """The headline's numbers: ``best_loss``, ``strongest_baseline``, their values,
    ``delta`` (metric units) with its 95 % CI ``delta_low`` / ``delta_high``, ``p`` (Holm) and
    ``verdict``; across panels the mean difference, its range and the Wilcoxon p; a secondary
    panel's under ``secondary``, further panels' (``c.more``) in the list ``more``. ``{}`` without a loss or a baseline; floats to 6 decimals."""
    def rnd(d: dict) -> dict:
        return {k: round(v, 6) if isinstance(v, float) else v for k, v in d.items()
                if v is not None}

    def panel(i: int) -> dict:
        p = c.panels[i]
        b, s = p.best_loss(), p.baseline()
        if b is None or s is None:
            return {}
        # a fixed reference (no interval or a point, e.g. the tier-blind 50 %): the difference's
        # CI is the row's own, shifted
        fixed = b.low is not None and (s.low is None or s.low == s.high)
        return {"best_loss": b.key, "best_loss_label": b.short, "baseline_label": s.short,
                "best_loss_value": b.estimate, "strongest_baseline": s.key,
                "baseline_value": s.estimate, "delta": b.estimate - s.estimate, "p": b.p,
                "p_floor": b.p_floor,
                "delta_low": b.delta_low if b.delta_low is not None or not fixed else b.low - s.estimate,
                "delta_high": b.delta_high if b.delta_high is not None or not fixed else b.high - s.estimate,
                "verdict": "above" if b.beats else "below" if b.below else "level",
                "panel": p.title or None}

    if c.primary is None:
        nums = _across(c)[2]
    else:
        nums = panel(c.primary)
        if not nums:
            return {}
        if second := (panel(c.secondary) if c.secondary is not None else {}):
            nums["secondary"] = rnd(second)
        if more := [rnd(m) for m in map(panel, c.more) if m]:
            nums["more"] = more
    if nums:
        nums.update(metric=c.metric, scale=c.scale, unit=c.unit)
    return rnd(nums)


def attach(section, figures_dir: Path) -> None:
    """Give a track's :class:`~contrastlab.reporting.Section` its first figure
    (``<figures_dir>/<track>_comparison.svg``), two-sentence headline (its full paragraph moves
    to the notes) and legend, from ``section.comparison`` (nothing when it is ``None``)."""
    c = section.comparison
    if c is None or not any(p.rows for p in c.panels):
        return
    svg, _ = forest_figure(c, Path(figures_dir) / f"{section.track}_comparison")
    what = (f"one panel per {c.noun}, rows in one order (mean rank)" if len(c.panels) > 1
            else "rows sorted by the estimate")
    caption = (f"Every row's {c.metric} with its 95 % CI ({what}); circles: contrastive "
               "losses, squares: baselines, diamonds: hybrids, filled: in the 95 % model "
               "confidence set (tied for best, Hansen, Lunde & Nason 2011); dashed line and "
               "grey band: the strongest baseline (chosen on validation) and its CI"
               + ("; | ticks: published results, not rerun here"
                  if any(p.get("published") for p in c.panels) else "") + ".")
    fig = Figure(c.title or f"{section.title}: {c.metric} with 95 % CIs", svg, caption)
    lead_ids = {id(f) for f in c.lead}
    section.figures = [f for f in section.figures if id(f) not in lead_ids]
    section.lead = [fig, *c.lead]
    if section.headline:
        section.notes.insert(0, f"**In full.** {section.headline}")
    section.headline = headline(c)
    section.legend = legend([c])
    shorten_labels(section.tables, section.legend)
