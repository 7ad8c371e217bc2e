"""The report's first figure, two-sentence headline, legend and headline metrics per track
(``contrastlab.reporting.figures``), on hand-made rows and on real ``summarize`` output."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from contrastlab.reporting import Figure, Section, Table
from contrastlab.reporting.figures import (KINDS, Comparison, Panel, Row, forest_figure, legend,
                                           rows_from_stats, shorten_labels)
from contrastlab.reporting.headline import (MAX_HEADLINE_WORDS, attach, headline,
                                            headline_metrics, words)


def _row(key, est, kind="loss", *, lo=None, hi=None, mcs=False, strongest=False, p=None,
         beats=False, below=False, base=None, short=None, title=None):
    lo = est - 0.02 if lo is None else lo
    hi = est + 0.02 if hi is None else hi
    return Row(key, short or key.upper(), title or f"{key} (full name)", kind, est, lo, hi, mcs,
               strongest, None if base is None else est - base, p, beats, below)


def _tie_panel() -> Panel:
    return Panel("", [_row("a", 0.815, mcs=True, base=0.812, p=1.0),
                      _row("b", 0.802, mcs=True, base=0.812, p=1.0),
                      _row("sgc", 0.812, "baseline", mcs=True, strongest=True),
                      _row("raw", 0.60, "baseline", base=0.812, p=0.005)])


# ------------------------------------------------------------------------- rows
def test_rows_from_stats_copies_summarize_output():
    from contrastlab.evaluation.stats import summarize

    rng = np.random.default_rng(0)
    point = {"x": 0.70, "y": 0.62, "base": 0.66, "weak": 0.40}
    reps = {k: v + rng.normal(0, 0.01, 500) for k, v in point.items()}
    st = summarize(point, reps, baseline="base")
    rows = rows_from_stats(st, ["x", "y", "base", "weak", "absent"],
                           kind={"base": "baseline", "weak": "baseline"},
                           short={"x": "X"}, title=lambda n: f"{n}!", baseline="base",
                           published=[("Paper", 0.75)])
    assert [r.key for r in rows] == ["x", "y", "base", "weak", "published:Paper"]
    by = {r.key: r for r in rows}
    for k in point:  # every field straight from the statistics
        assert (by[k].estimate, by[k].low, by[k].high) == (st[k]["mean"], st[k]["ci_low"],
                                                           st[k]["ci_high"])
        assert by[k].in_mcs == st[k]["in_mcs"]
    assert by["x"].beats and not by["x"].below and by["x"].p == st["x"]["p_vs_baseline_holm"]
    assert by["weak"].below and by["base"].strongest and not by["x"].strongest
    assert by["x"].short == "X" and by["y"].short == "y" and by["y"].title == "y!"
    assert by["y"].kind == "loss" and by["base"].kind == "baseline"
    pub = by["published:Paper"]
    assert pub.kind == "published" and pub.low is None and pub.estimate == 0.75


# ------------------------------------------------------------------------- headline
def test_headline_tie_names_winner_baseline_difference_and_test():
    c = Comparison("test accuracy", [_tie_panel()])
    h = headline(c)
    assert words(h) <= MAX_HEADLINE_WORDS
    assert len(re.findall(r"[.!?](\s|$)", h)) == 2  # two sentences
    assert h.startswith("**A** scores highest, test accuracy 81.5 % [79.5, 83.5]")
    assert "+0.3 points vs the strongest baseline SGC (81.2 %" in h
    assert "paired bootstrap, Holm, p = 1.00" in h
    assert "no loss is significantly better than SGC" in h
    assert "tied for best (95 % MCS): A, SGC, B." in h


def test_headline_when_a_baseline_or_hybrid_wins():
    p = Panel("", [_row("h", 0.77, "hybrid", mcs=True),
                   _row("bm25", 0.726, "baseline", strongest=True),
                   _row("l1", 0.49, base=0.726, p=0.048, below=True),
                   _row("l2", 0.35, base=0.726, p=0.01, below=True)])
    h = headline(Comparison("test Rank@10", [p]))
    assert h.startswith("**H** scores highest, test Rank@10 77.0 % [75.0, 79.0]; the best loss, "
                        "L1, reaches 49.0 %, -23.6 points vs the strongest baseline BM25")
    assert "p = 0.048" in h and "BM25 beats every loss significantly" in h
    p.rows[3].below = False
    assert "BM25 beats the best loss significantly" in headline(Comparison("m", [p]))


def test_headline_when_a_loss_wins():
    p = Panel("", [_row("l", 0.9, mcs=True, base=0.8, p=0.0004, beats=True),
                   _row("b", 0.8, "baseline", strongest=True)])
    h = headline(Comparison("acc", [p]))
    assert "+10.0 points" in h and "p < 0.001" in h and "training with L pays off" in h


def test_headline_stays_short_with_long_labels_and_many_rows():
    long = "RRF(BM25, InfoNCE+HN (scratch))"  # the longest short label kind, 4 words
    rows = [_row(f"h{i}", 0.8 - i / 100, "hybrid", mcs=True, short=f"{long} {i}")
            for i in range(12)]
    rows += [_row("b", 0.7, "baseline", strongest=True, short="BM25 over sub-tokens"),
             _row("l", 0.5, base=0.7, p=0.01, below=True, short=long + " loss")]
    h = headline(Comparison("test Rank@10 (whole corpus)", [Panel("", rows)]))
    assert words(h) <= MAX_HEADLINE_WORDS, (words(h), h)
    assert "tied for best" in h


def test_headline_across_panels_counts_verdicts_and_combines_by_wilcoxon():
    from scipy.stats import wilcoxon

    panels, deltas = [], []
    for i, (d, below, beats) in enumerate([(-0.05, True, False), (-0.02, False, False),
                                           (0.01, False, False), (-0.04, True, False),
                                           (-0.03, True, False), (-0.01, False, False)]):
        panels.append(Panel(f"ds{i}", [
            _row("et", 0.7, "baseline", mcs=True, strongest=True),
            _row("mul", 0.7 + d, mcs=i == 2, base=0.7, p=0.01 if below else 0.5, below=below,
                 beats=beats),
            _row("any", 0.6, base=0.7, p=0.001, below=True)]))
        deltas.append(d)
    c = Comparison("test mAP", panels, primary=None)
    h = headline(c)
    p = wilcoxon(deltas).pvalue
    assert words(h) <= MAX_HEADLINE_WORDS
    assert h.startswith("**ET** is tied for best (95 % MCS) on 6 of 6 data sets")
    assert "-5.0 to +1.0 points" in h and "significantly below on 3, above on 0" in h
    assert f"Wilcoxon p = {p:.2f}" in h and "prefer ET" in h
    m = headline_metrics(c)
    assert m["best_loss"] == "mul" and m["strongest_baseline"] == "et"
    assert m["delta"] == pytest.approx(sum(deltas) / 6, abs=1e-6)
    assert m["p"] == pytest.approx(p, abs=1e-6)
    assert (m["n_panels"], m["n_above"], m["n_below"]) == (6, 0, 3)
    assert m["best_loss_value"] == pytest.approx(0.7 + sum(deltas) / 6, abs=1e-6)


def test_headline_metrics_single_panel():
    m = headline_metrics(Comparison("acc", [_tie_panel()]))
    core = {k: m.pop(k) for k in ("best_loss", "best_loss_value", "strongest_baseline",
                                   "baseline_value", "delta", "p")}
    assert core == {"best_loss": "a", "best_loss_value": 0.815, "strongest_baseline": "sgc",
                    "baseline_value": 0.812, "delta": pytest.approx(0.003), "p": 1.0}
    # what the README's answer table needs: labels, the verdict and how to show the values
    assert m["verdict"] == "level" and m["metric"] == "acc" and m["scale"] == 100.0
    assert m["best_loss_label"] and m["baseline_label"]
    no_base = Comparison("acc", [Panel("", [_row("a", 0.8)])])
    assert headline_metrics(no_base) == {}


# ------------------------------------------------------------------------- figure
def test_forest_figure_is_byte_stable_and_grey_readable(tmp_path):
    c = Comparison("test accuracy", [_tie_panel()], title="t")
    c.panels[0].rows.append(Row("published:P", "P", "P (published)", "published", 0.84))
    svg1, png1 = forest_figure(c, tmp_path / "a")
    svg2, png2 = forest_figure(c, tmp_path / "b")
    assert svg1.read_bytes() == svg2.read_bytes() and png1.read_bytes() == png2.read_bytes()
    text = svg1.read_text()
    assert "<dc:date>" not in text and "Matplotlib" not in text
    assert b"Software" not in png1.read_bytes()[:2000]
    # kinds differ by marker shape, not colour alone
    assert len({m for m, _, _ in KINDS.values()}) == len(KINDS)
    from PIL import Image

    with Image.open(png1) as im:
        assert im.size[0] > 600 and im.size[1] > 250


def test_forest_figure_small_multiples(tmp_path):
    panels = [Panel(f"ds{i}", [_row("a", 0.5 + i / 50, mcs=True),
                               _row("b", 0.45, "baseline", strongest=True),
                               _row("h", 0.47, "hybrid")]) for i in range(5)]
    svg, png = forest_figure(Comparison("mAP", panels, primary=None), tmp_path / "m")
    assert svg.stat().st_size > 0 and png.stat().st_size > 0
    with pytest.raises(ValueError):
        forest_figure(Comparison("mAP", [Panel("", [])]), tmp_path / "empty")


# ------------------------------------------------------------------------- attach
def test_attach_puts_figure_first_headline_short_and_legend_complete(tmp_path):
    comp_fig = Figure("cd", tmp_path / "cd.png")
    other = Figure("curves", tmp_path / "curves.png")
    sec = Section("graph", "Graph", headline="A long paragraph " * 30,
                  tables=[Table("main", ["row", "acc"],
                                [["a (full name)", 1.0], ["baseline: sgc (full name) †", 2.0],
                                 ["not a row", 3.0]])],
                  figures=[other, comp_fig])
    sec.comparison = Comparison("test accuracy", [_tie_panel()], lead=[comp_fig])
    attach(sec, tmp_path)
    assert sec.lead[0].path == tmp_path / "graph_comparison.svg" and sec.lead[0].path.exists()
    assert (tmp_path / "graph_comparison.png").exists()
    assert sec.lead[1:] == [comp_fig] and sec.figures == [other]
    assert words(sec.headline) <= MAX_HEADLINE_WORDS
    assert sec.notes[0].startswith("**In full.** A long paragraph")
    assert set(sec.legend) == {r.short for r in sec.comparison.panels[0].rows}
    assert sec.legend["A"] == "a (full name)"
    assert [r[0] for r in sec.tables[0].rows] == ["A", "baseline: SGC †", "not a row"]


def test_legend_spells_out_each_short_label_once():
    c1 = Comparison("m", [_tie_panel()])
    c2 = Comparison("m", [Panel("", [_row("a", 0.5), _row("z", 0.4)])])
    leg = legend([c1, c2])
    assert list(leg) == ["A", "B", "RAW", "SGC", "Z"]
    assert leg["A"] == "a (full name)"


def test_shorten_labels_longest_first():
    t = Table("t", ["row"], [["InfoNCE, from the zero-shot map"],
                             ["BM25 + predictor: InfoNCE, from the zero-shot map"],
                             ["A = InfoNCE, from scratch"]])
    shorten_labels([t], {"InfoNCE (zs)": "InfoNCE, from the zero-shot map",
                         "BM25 ⊕ InfoNCE (zs)": "BM25 + predictor: InfoNCE, from the zero-shot map",
                         "InfoNCE (scratch)": "InfoNCE, from scratch"})
    assert [r[0] for r in t.rows] == ["InfoNCE (zs)", "BM25 ⊕ InfoNCE (zs)", "A = InfoNCE (scratch)"]


# ------------------------------------------------------------------------- labels, summary
def test_short_labels_from_the_name_table():
    from contrastlab.losses.registry import LOSSES
    from contrastlab.reporting import code, short_label

    assert short_label("code", "infonce_hardneg") == "InfoNCE+HN"
    assert short_label("graph", "ntxent") == "NT-Xent" and short_label("code", "nope") == "nope"
    assert all("(" not in short_label("code", n) for n in LOSSES if n in ("infonce", "cosine"))
    m = {"loss": "infonce_hardneg", "residual": True}
    assert code._short("infonce_hardneg", m) == "InfoNCE+HN (zs)"
    assert code._short("smoothl1_scratch", {"loss": "smoothl1"}) == "SmoothL1 (scratch)"
    hyb = {"variant": "infonce_hardneg", "_variant_metrics": m}
    assert code._short("fusion_infonce_hardneg", hyb) == "BM25 ⊕ InfoNCE+HN (zs)"
    assert code._short("rrf_infonce_hardneg", hyb) == "RRF(BM25, InfoNCE+HN (zs))"
    assert code._short("bm25", {}) == "BM25"


def test_summary_lists_the_answer_first_and_is_byte_stable(tmp_path):
    from contrastlab.reporting.build import numeric, write_summary

    s = {"graph": {"z": {"m": 1.0}, "a": {"m": 2.0}},
         "answer": {"graph": {"best_loss": "a", "delta": 0.1, "p": 0.5}},
         "code": {"b": {"m": 1.0}}}
    write_summary(tmp_path / "s.json", s)
    first = (tmp_path / "s.json").read_bytes()
    write_summary(tmp_path / "s.json", dict(reversed(list(s.items()))))
    assert (tmp_path / "s.json").read_bytes() == first
    d = json.loads(first)
    assert list(d) == ["answer", "code", "graph"] and list(d["graph"]) == ["a", "z"]
    assert sorted(d) == list(d)  # first in file order and in name order
    assert numeric({"a": 1, "b": "x", "c": 0.5, "d": True}) == {"a": 1, "c": 0.5}


def test_a_secondary_panel_is_stated_in_the_take_away_within_the_word_limit():
    """primary=0, secondary=1: the first sentence is the primary panel's (compact lead words),
    the take-away keeps its verdict and names the other panel's best loss with its difference
    and p; the headline numbers stay the primary panel's."""
    cpu = Panel("2 CPU cores", [_row("bm25", 0.735, "baseline", strongest=True, mcs=True),
                                _row("fus", 0.782, "hybrid", mcs=True),
                                _row("a", 0.614, base=0.735, p=0.0047, below=True),
                                _row("b", 0.600, base=0.735, p=0.0047, below=True)])
    gpu = Panel("one H100, every layer trained",
                [_row("bm25", 0.735, "baseline", strongest=True),
                 _row("g", 0.826, base=0.735, p=0.0047, beats=True, mcs=True, short="G all")])
    c = Comparison("test Rank@10", [cpu, gpu], primary=0, secondary=1)
    h = headline(c)
    assert words(h) <= MAX_HEADLINE_WORDS, (words(h), h)
    assert h.startswith("On 2 CPU cores, **FUS** scores highest")
    assert "vs BM25 (73.5 %; p = 0.0047)" in h  # compact: no "strongest baseline", no test name
    assert "Take-away: BM25 beats every loss significantly; on one H100, every layer trained, " \
           "G all reaches 82.6 %, significantly above BM25 (+9.1, p = 0.0047)." in h
    assert headline_metrics(c)["best_loss"] == "a"  # the primary panel's numbers
    # without a secondary panel: the usual take-away with its tied list
    h1 = headline(Comparison("test Rank@10", [cpu, gpu], primary=0))
    assert "H100" not in h1 and "tied for best" in h1
