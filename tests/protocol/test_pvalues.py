"""Issue 55, part 3: p-values that the draws support. Every p is the bootstrap tail p (no
normal extrapolation), a table that can redraw draws more while a Holm decision is within
Monte-Carlo error of alpha, and every p is printed by one formatter that never goes below the
floor of its draws (docs/statistics.md, "p-values")."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import norm

from contrastlab.evaluation.stats import (bootstrap_per_item, draws_for, paired_pvalue,
                                          pvalue_floor, summarize)

ROOT = Path(__file__).resolve().parents[2]


def test_a_skewed_difference_gets_the_tail_p_not_the_wald_p():
    """A light lower tail and a long upper one (the shape of a discrete kNN-purity gain): the
    normal approximation with the bootstrap SE puts p many times above the tail p. With 1,000
    stored draws and 4 tests the old rule (choose_test) switched to that Wald p."""
    rng = np.random.default_rng(0)
    r = 1000
    d = rng.exponential(1.0, r) - 0.005            # P(d <= 0) ~ 0.005
    common = rng.normal(0, 0.01, r)
    reps = {"base": 0.5 + common, "skew": 0.5 + common + d}
    reps.update({f"z{k}": 0.5 + common + rng.normal(0, 0.01, r) for k in range(3)})
    point = {k: float(np.median(v)) for k, v in reps.items()}
    point["skew"] = point["base"] + float(d.mean())
    out = summarize(point, reps, baseline="base")
    e = out["skew"]
    tail = paired_pvalue(d)
    wald = 2 * norm.sf(d.mean() / d.std(ddof=1))
    assert wald > 5 * tail                            # the two disagree: the case is skewed
    assert e["test"] == "bootstrap" and e["p_vs_baseline"] == pytest.approx(tail)
    assert e["p_floor"] == pytest.approx(pvalue_floor(r, 4))
    assert all(x["p_vs_baseline_holm"] >= x["p_floor"] for x in out.values() if "p_floor" in x)


@pytest.mark.parametrize("p, r, m, text", [
    (9e-46, 1000, 1, "p ≤ 0.002"),                  # an extrapolated Wald p: shown as the floor
    (0.0, 1000, 1, "p ≤ 0.002"),
    (2 / 1001, 1000, 1, "p ≤ 0.002"),
    (14 / 10001, 10000, 7, "p ≤ 0.0014"),
    (6 / 1001, 1000, 3, "p ≤ 0.006"),               # 0.005994 rounded up, never down
    (0.0123, 1000, 1, "p = 0.012"),
    (0.43, 1000, 1, "p = 0.43"),
    (1e-5, None, 1, "p < 0.001"),                   # an analytic p (Wilcoxon): no draws
    (None, 1000, 1, "p n/a"),
])
def test_format_p_never_prints_below_the_floor(p, r, m, text):
    from contrastlab.evaluation.stats import format_p

    assert format_p(p, r, m) == text
    if r:
        assert format_p(p, floor=pvalue_floor(r, m)) == text   # the floor given directly
        shown = float(re.search(r"[\d.e-]+$", format_p(p, r, m)).group()) if p is not None else 1
        assert shown >= pvalue_floor(r, m) * (1 - 1e-12)


def _near_alpha():
    """One 0/1 comparison whose tail p is about 0.040 (200,000 draws): 61 items where ``a``
    is right and ``b`` wrong, 40 the other way, 400 items."""
    a, b = np.zeros(400), np.zeros(400)
    a[:61], b[61:101] = 1, 1
    return {"a": a, "b": b}


def test_a_decision_near_alpha_draws_more_and_is_then_stable():
    from contrastlab.evaluation.stats import holm_unstable

    assert holm_unstable([0.045], 2000) and not holm_unstable([0.045], 40_000)
    assert not holm_unstable([0.001, 0.8], 2000)
    per = _near_alpha()
    runs = []
    for seed in range(8):
        def redraw(r, seed=seed):
            return bootstrap_per_item(per, n_resamples=r, seed=seed)

        e = summarize(*redraw(draws_for(1)), baseline="b", redraw=redraw)["a"]
        runs.append((e["n_resamples"], e["beats_baseline"], e["p_vs_baseline_holm"]))
    assert all(beats for _, beats, _ in runs)                      # the same decision each time
    assert sum(n > draws_for(1) for n, _, _ in runs) >= 6          # it took more draws
    assert all(abs(p - 0.05) > 2.576 * np.sqrt(p * (2 - p) / n) for n, _, p in runs)
    # a clear difference keeps the first draws
    clear = {"a": np.r_[np.ones(120), np.zeros(280)], "b": _near_alpha()["b"]}
    e = summarize(*bootstrap_per_item(clear, n_resamples=2000, seed=0), baseline="b",
                  redraw=lambda r: bootstrap_per_item(clear, n_resamples=r, seed=0))["a"]
    assert e["n_resamples"] == 2000 and e["beats_baseline"]


#: An f-string field that formats a p-value itself (``{ph:.2g}``, ``{t['p_holm']:.3f}``).
_RAW_P = re.compile(r"\{[^{}]*(\bp\b(?![\[.])|\bph\b|\bq\b|p_holm|p_vs_\w+)[^{}]*:\.\d+[gfe]\}")


def test_no_report_code_formats_a_p_value_without_format_p():
    files = [*sorted((ROOT / "src" / "contrastlab" / "reporting").glob("*.py")),
             ROOT / "scripts" / "multilabel_table.py"]
    hits = [f"{f.name}:{i}: {line.strip()}" for f in files
            for i, line in enumerate(f.read_text().splitlines(), 1) if _RAW_P.search(line)]
    assert not hits, "\n".join(hits)


def test_the_multilabel_table_script_prints_the_floor():
    spec = importlib.util.spec_from_file_location("ml_table", ROOT / "scripts" / "multilabel_table.py")
    ml_table = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ml_table)
    cell = {"mean": 0.4, "ci_low": 0.38, "ci_high": 0.42, "no_ci": False, "delta": 0.05,
            "p_holm": 9e-46, "n_resamples": 1000, "family_size": 15, "above": True, "below": False}
    t = {"baseline": "bce", "frequent_k": 10, "rows": {"all": {"map": cell}}, "n_seeds": {"all": 3}}
    md = ml_table.markdown(t, "ds")
    assert "p ≤ 0.03" in md and "e-46" not in md
