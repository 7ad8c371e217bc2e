"""The README's answer table is generated from reports/summary.json and agrees with it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from contrastlab.reporting import readme

ROOT = Path(__file__).resolve().parents[2]


def _answer(**over) -> dict:
    a = {"title": "Graph", "metric": "test accuracy", "scale": 100.0, "unit": "%",
         "best_loss": "mixco", "best_loss_label": "MixCo", "best_loss_value": 0.8168,
         "strongest_baseline": "sgc", "baseline_label": "SGC", "baseline_value": 0.812,
         "delta": 0.0048, "delta_low": -0.017, "delta_high": 0.025, "p": 1.0, "verdict": "level"}
    return {**a, **over}


committed = pytest.mark.skipif(not (ROOT / "reports" / "summary.json").exists()
                               or not (ROOT / "README.md").exists(),
                               reason="no committed results in this tree (a copy of the code)")


@committed
def test_committed_readme_block_is_generated_from_the_committed_summary():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert readme.render_block(ROOT / "reports") in text, (
        "README's answer table differs from reports/summary.json: run "
        "`python -m contrastlab.reporting.readme`")
    # the block is on the first screen: before the long sections
    assert text.index(readme.BEGIN) < text.index("## The tracks")


@committed
def test_every_answer_entry_has_a_row_with_its_numbers():
    summary = json.loads((ROOT / "reports" / "summary.json").read_text())
    table = readme.answer_table(summary)
    rows = table.splitlines()[2:]
    n_extra = sum(("secondary" in a) + len(a.get("more", [])) for a in summary["answer"].values())
    assert len(rows) == len(summary["answer"]) + n_extra
    for a in summary["answer"].values():
        for p in ([a] + ([{**a, **a["secondary"]}] if "secondary" in a else [])
                  + [{**a, **m} for m in a.get("more", [])]):
            cell = f"{p['best_loss_label']} {100 * p['best_loss_value']:.1f} %"
            assert any(cell in r for r in rows), cell
            if "n_panels" not in p:  # the CI contains its difference
                assert p["delta_low"] <= p["delta"] <= p["delta_high"]


def test_row_states_difference_ci_and_verdict():
    cov = {"graph": 0.95}
    t = readme.answer_table({"answer": {"graph": _answer()}}, cov)
    row = t.splitlines()[2]
    assert "| SGC 81.2 % | MixCo 81.7 % | +0.5 [-1.7, +2.5] | level, not significant" in row
    below = readme.answer_table({"answer": {"graph": _answer(
        delta=-0.05, delta_low=-0.08, delta_high=-0.02, p=0.001, verdict="below")}}, cov)
    assert "-5.0 [-8.0, -2.0] | below, significantly" in below
    # a verdict that disagrees with the numbers is a different table
    assert readme.answer_table({"answer": {"graph": _answer(verdict="above")}}, cov) != t


@pytest.mark.parametrize("cov", [None, {}, {"graph": 0.90}, {"graph": 0.99}, {"code": 0.95}])
def test_an_interval_without_simulated_coverage_in_the_target_is_not_printed(cov):
    row = readme.answer_table({"answer": {"graph": _answer()}}, cov).splitlines()[2]
    assert "| +0.5° | level" in row and "[" not in row


def test_a_secondary_panel_has_its_own_coverage():
    a = _answer(secondary={"best_loss_label": "GPU row", "delta": 0.09, "delta_low": 0.05,
                           "delta_high": 0.12, "panel": "one GPU"})
    rows = readme.answer_table({"answer": {"graph": a}}, {"graph": 0.95, "graph_secondary": 0.91}
                               ).splitlines()[2:]
    assert "[-1.7, +2.5]" in rows[0] and "| +9.0° |" in rows[1]


def test_further_panels_follow_with_their_own_coverage_keys():
    a = _answer(secondary={"best_loss_label": "GPU row", "delta": 0.09, "delta_low": 0.05,
                           "delta_high": 0.12, "panel": "one GPU"},
                more=[{"best_loss_label": "CPU preset", "delta": 0.04, "delta_low": 0.01,
                       "delta_high": 0.07, "panel": "CPU budget"}])
    rows = readme.answer_table({"answer": {"graph": a}},
                               {"graph": 0.95, "graph_secondary": 0.95, "graph_more1": 0.99}).splitlines()[2:]
    assert len(rows) == 3 and "CPU budget" in rows[2] and "| +4.0° |" in rows[2]
    ok = readme.answer_table({"answer": {"graph": a}}, {"graph_more1": 0.95}).splitlines()[4]
    assert "| +4.0 [+1.0, +7.0] |" in ok
    labels = readme.row_labels({"answer": {"graph": a}})
    assert list(labels) == ["graph", "graph_secondary", "graph_more1"]
    note = readme.coverage_note({"graph_more1": 0.95, "graph": 0.96}, labels)
    assert "(graph 0.960; graph, CPU budget 0.950;" in note  # table order, the row's panel


@committed
def test_every_interval_the_readme_prints_has_simulated_coverage_in_the_target():
    from contrastlab.reporting.coverage_rule import HI, LO

    summary = json.loads((ROOT / "reports" / "summary.json").read_text())
    cov = json.loads((ROOT / "reports" / "metrics" / "coverage.json").read_text()).get("delta", {})
    block = readme.render_block(ROOT / "reports")
    pairs = [(k, row) for t, a in summary["answer"].items()
             for k, row in zip([key for key, _ in readme._rows_of(t, a)],
                               readme.answer_table({"answer": {t: a}}, cov).splitlines()[2:])]
    assert len(pairs) == len(readme.answer_table(summary, cov).splitlines()[2:])
    for key, row in pairs:
        assert row in block
        if re.search(r"\| [+-]\d+\.\d \[", row):  # an interval is printed
            assert key in cov and LO <= cov[key] <= HI, (key, cov.get(key))


def test_check_mode_fails_on_a_stale_readme(tmp_path):
    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "summary.json").write_text(json.dumps({"answer": {"graph": _answer()}}))
    (reports / "comparison.md").write_text("# r\n\n![fig](figures/graph_comparison.svg)\n")
    md = tmp_path / "README.md"
    md.write_text(f"# x\n\n{readme.BEGIN}\n| old | table |\n{readme.END}\n\n## The tracks\n")
    assert readme.main(["--readme", str(md), "--reports", str(reports), "--check"]) == 1
    assert readme.main(["--readme", str(md), "--reports", str(reports)]) == 0
    assert readme.main(["--readme", str(md), "--reports", str(reports), "--check"]) == 0
    text = md.read_text()
    assert "MixCo 81.7 %" in text and "reports/figures/graph_comparison.svg" in text
    assert re.search(r"## The tracks\n$", text)
    md.write_text("# no block\n")
    assert readme.main(["--readme", str(md), "--reports", str(reports)]) == 2


@committed
def test_committed_multilabel_doc_block_is_generated_from_the_committed_runs():
    """docs/multilabel.md's results tables and headline are the committed runs' (rewritten by
    the same command as the README's answer)."""
    from contrastlab.reporting import multilabel_doc

    text = (ROOT / "docs" / "multilabel.md").read_text(encoding="utf-8")
    block = multilabel_doc.render_block(ROOT)
    assert block in text, "docs/multilabel.md's results block is stale: run `python -m contrastlab.reporting.readme`"
    assert block.count("\n| ") >= 2 * 10  # both tables with their rows
    assert "> **Headline.**" in block and "> **In full.**" in block  # the report's prose
    # and every generated block of the docs (docs/statistics.md's F1 operating point too)
    assert readme.update_docs(ROOT, check=True) == []


def test_multilabel_doc_block_marks_each_sets_best_and_escapes_bars(tmp_path):
    import json

    from contrastlab.reporting import multilabel_doc

    mdir = tmp_path / "reports" / "metrics" / "multilabel"
    mdir.mkdir(parents=True)
    vals = {"simdis": (0.5, 0.4), "extratrees": (0.6, 0.3)}
    for v, (m, f) in vals.items():
        (mdir / f"yeast_{v}.json").write_text(json.dumps({"map": m, "macro_f1_val_t": f}))
    block = multilabel_doc.render_block(tmp_path)
    rows = [line for line in block.splitlines() if line.startswith("| ") and "yeast" not in line]
    simdis = [r for r in rows if "\\|P\\|" in r]
    assert len(simdis) == 2 and "| 50.00 |" in simdis[0] and "| **40.00** |" in simdis[1]
    et = [r for r in rows if r.startswith("| ExtraTrees (baseline)")]
    assert "| **60.00** |" in et[0] and "| 30.00 |" in et[1]
    assert block.startswith(multilabel_doc.BEGIN) and block.endswith(multilabel_doc.END)


def test_operating_point_table_flags_columns_off_the_operating_point(tmp_path):
    import json

    from contrastlab.reporting import multilabel_doc

    keys = ("micro_f1", "macro_f1", "micro_f1_val_t", "macro_f1_val_t")
    real = {"micro_f1": 0.6, "macro_f1": 0.4, "micro_f1_val_t": 0.62, "macro_f1_val_t": 0.5, "threshold_val": 0.25}
    sim = {"micro_f1": 0.61, "macro_f1": 0.5, "micro_f1_val_t": 0.62, "macro_f1_val_t": 0.49}
    cov = {"_operating_point": {"yeast": {"real_median_row": real, "simulated_mean": sim,
                                          "simulated_threshold_val": 0.3,
                                          "coverage_whole_rows": dict.fromkeys(keys, 0.93)}},
           "yeast": {"micro_f1": 0.95, "micro_f1_val_t": 0.91, "macro_f1_val_t": 0.94}}
    (tmp_path / "reports" / "metrics").mkdir(parents=True)
    (tmp_path / "reports" / "metrics" / "coverage.json").write_text(json.dumps(cov))
    row = [r for r in multilabel_doc.render_operating_point(tmp_path).splitlines() if r.startswith("| yeast")][0]
    # macro-F1 @0.5 simulated 0.10 from the real value: not at the operating point (*), no coverage kept
    assert "| 0.950 / -* / 0.910 / 0.940 |" in row and "| 0.25 / 0.30 |" in row
    assert row.endswith("| 0.930 / 0.930 / 0.930 / 0.930 |")


def test_docs_blocks_quote_the_report_sections(tmp_path):
    """docs/code.md's seed-corpus block and the results blocks of docs/finetune.md and
    docs/graph.md are cut from reports/comparison.md: the named section to the next heading,
    the lead paragraph, image paths made relative to docs/; a placeholder before the results
    exist; a stale block is reported by --check and rewritten otherwise."""
    (tmp_path / "docs").mkdir()
    blocks = {b.removeprefix("<!-- ").split(":")[0]: (f, b, e, r) for f, b, e, r in readme.REPORT_EXCERPTS}
    seed_file, seed_begin, seed_end, seed = blocks["seed corpus"]
    ft_file, ft_begin, ft_end, ft = blocks["finetune results"]
    *_, graph = blocks["graph results"]
    *_, gpu = blocks["gpu bi-encoder"]
    assert "seed corpus" in seed(tmp_path) and "No results" in seed(tmp_path)  # no report yet
    rep = tmp_path / "reports"
    rep.mkdir()
    (rep / "comparison.md").write_text(
        "# r\n\n## Graph self-supervised learning on Cora\n\n**Headline.** g.\n\n### Picks\n\n| p |\n\n"
        "## Code retrieval\n\nSeed-corpus preset: BM25 62.0 %.\n\n### Main table\n\n| a |\n\n"
        "### Seed-corpus preset (bash x)\n\n| row | R@10 |\n|---|---|\n| BM25 | 62.0 |\n\n"
        "### Next\n\n| b |\n\n## Fine-tuning the code encoder (HumanEval)\n\n**Headline.** no.\n\n"
        "![fig](figures/ft.svg)\n\n### Split (a)\n\n| c |\n\n## Run: provenance\n\nx\n", encoding="utf-8")
    block = seed(tmp_path)
    assert block.startswith(seed_begin) and block.endswith(seed_end)
    assert "### Seed-corpus preset (bash x)" in block and "| BM25 | 62.0 |" in block
    assert "Seed-corpus preset: BM25 62.0 %." in block and "### Next" not in block and "| a |" not in block
    assert "No GPU bi-encoder results" in gpu(tmp_path)  # no such section in this report
    g = graph(tmp_path)
    assert "**Headline.** g." in g and "| p |" in g and "## Graph" not in g and "Code retrieval" not in g
    block = ft(tmp_path)
    assert "## Fine-tuning" not in block and "**Headline.** no." in block and "### Split (a)" in block
    assert "](../reports/figures/ft.svg)" in block and "provenance" not in block
    doc = tmp_path / ft_file
    doc.write_text(f"# FT\n\n{ft_begin}\nold\n{ft_end}\n\nmore\n", encoding="utf-8")
    assert doc in readme.update_docs(tmp_path, check=True)
    assert "old" in doc.read_text(encoding="utf-8")               # --check writes nothing
    readme.update_docs(tmp_path)
    assert block in doc.read_text(encoding="utf-8") and doc.read_text(encoding="utf-8").endswith("more\n")
    assert doc not in readme.update_docs(tmp_path, check=True)


@committed
def test_readme_prose_fine_tuning_answer_is_the_committed_one():
    """The README's reproducibility paragraph quotes the fine-tuning answer's difference as
    the clean clone reproduced it; it must be the committed summary's (points, one decimal)."""
    text = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    m = re.search(r"the fine-tuning answer, (-?\d+\.\d) points, is the committed one", text)
    assert m, "README no longer quotes the fine-tuning answer's difference"
    a = json.loads((ROOT / "reports" / "summary.json").read_text(encoding="utf-8"))["answer"]["finetune"]
    assert float(m.group(1)) == round(100 * a["delta"], 1)
