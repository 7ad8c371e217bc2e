"""The code report table: strongest baseline picked on validation, P(best) / MCS columns,
hybrids tested against BM25, the headline says when a baseline wins."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from contrastlab.reporting.code import build_section, strongest_baseline
from contrastlab.reporting.code_stats import only_in_top10

N, REPOS = 60, 6


def _ranks(hit_share: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.where(rng.random(N) < hit_share, 1, rng.integers(20, 200, N))


def _write(root, with_hybrids: bool) -> None:
    m = root / "reports" / "metrics" / "code"
    d = root / "reports" / "data" / "code"
    m.mkdir(parents=True)
    d.mkdir(parents=True)
    ids = np.arange(N)
    repo = [f"r{i % REPOS}" for i in ids]
    base = {  # name: (test hit share, validation Rank@10)
        "zeroshot_centred": (0.05, 0.10),
        "bm25": (0.80, 0.60),
        "sentence": (0.30, 0.70),  # best on validation, weaker on test: the strongest baseline
    }
    rows, bl = [], {}
    for i, (k, (share, val)) in enumerate(base.items()):
        r = _ranks(share, i)
        rows.append(pd.DataFrame({"id": ids, "repo": repo, "baseline": k, "rank": r}))
        bl[k] = {"rank_at_10": float((r <= 10).mean()), "val_rank_at_10": val, "median_rank": 1.0}
    bl["bm25"].update(k1=1.2, b=0.75)
    (m / "baselines.json").write_text(json.dumps({"baselines": bl, "corpus_size": 500}))
    pd.concat(rows).to_csv(d / "baselines_ranks.csv", index=False)
    tr = pd.concat([pd.DataFrame({"id": ids, "repo": repo, "seed": s, "rank": _ranks(0.5, 10 + s)})
                    for s in range(3)])
    tr.to_csv(d / "infonce_ranks.csv", index=False)
    (m / "infonce.json").write_text(json.dumps({
        "loss": "infonce", "residual": True, "n_seeds": 3, "val_rank_at_10": 0.5, "lr": 1e-3,
        "temperature": 0.07, "tuned": True, "best_epoch": 3, "corpus_size": 500, "median_rank": 5}))
    if with_hybrids:
        hr = pd.concat([pd.DataFrame({"id": ids, "repo": repo, "hybrid": "rrf_infonce", "seed": s,
                                      "rank": np.where(_ranks(0.8, 1) == 1, 1,
                                                       _ranks(0.9, 20 + s))}) for s in range(3)])
        hr.to_csv(d / "hybrids_ranks.csv", index=False)
        (m / "hybrids.json").write_text(json.dumps({"hybrids": {"rrf_infonce": {
            "variant": "infonce", "kind": "rrf", "n_seeds": 3, "rrf_k": 60.0, "median_rank": 1}},
            "corpus_size": 500}))


def test_table_columns_strongest_baseline_and_hybrid_headline(tmp_path):
    _write(tmp_path, with_hybrids=True)
    s = build_section(tmp_path, tmp_path / "fig")
    t = s.tables[0]
    assert t.columns[9:] == ["P(best)", "in MCS", "Δ R@10 vs strongest baseline (pp, Holm p)"]
    rows = {r[0]: r for r in t.rows}
    sent = rows["teacher sentence embedding, all layers, mean pooling (baseline)"]
    assert sent[-1] == "(strongest baseline)"  # chosen on validation although BM25 wins on test
    bm = rows["BM25 over identifier sub-tokens (baseline)"]
    assert bm[-1].startswith("▲ ") and bm[8] == "k1=1.2, b=0.75"
    hyb = [r for n, r in rows.items() if n.startswith("BM25 + predictor, reciprocal-rank fusion")]
    assert len(hyb) == 1 and hyb[0][10] == "yes"
    assert abs(sum(float(r[9]) for r in t.rows) - 1.0) < 0.02  # P(best) over every row sums to 1
    assert "over BM25 alone" in s.headline and "does not (mean over seeds)" in s.headline


def test_headline_says_when_a_baseline_wins(tmp_path):
    _write(tmp_path, with_hybrids=False)
    s = build_section(tmp_path, tmp_path / "fig")
    assert "A baseline wins: BM25 over identifier sub-tokens (baseline)." in s.headline
    rows = {r[0]: r for r in s.tables[0].rows}
    assert rows["InfoNCE, from the zero-shot map"][10] == "no"  # out of the MCS: BM25 is far ahead


def test_strongest_baseline_and_only_in_top10_by_hand():
    metrics = {"bm25": {"val_rank_at_10": 0.4}, "ridge": {"val_rank_at_10": 0.5},
               "infonce": {"val_rank_at_10": 0.9}}
    assert strongest_baseline(metrics) == "ridge"  # trained rows never count as baselines
    ranks = {"a": np.array([[1, 20, 3, 50], [1, 5, 30, 50]]), "bm25": np.array([[30, 2, 1, 5]])}
    # only a: query 0 in both seeds -> 1.0; only BM25: queries 1, 3 (seed 0) and 2, 3 (seed 1) -> 2.0
    assert only_in_top10(ranks, "a", "bm25") == 1.0
    assert only_in_top10(ranks, "bm25", "a") == 2.0


def test_trained_fusions_are_tested_against_the_untrained_control(tmp_path):
    """With ``fusion_sentence`` (one deterministic run) beside a 3-seed trained fusion, the
    headline tests the trained fusion against the control, and the control's single run does
    not cut the trained rows to one seed."""
    _write(tmp_path, with_hybrids=True)
    m = tmp_path / "reports" / "metrics" / "code"
    d = tmp_path / "reports" / "data" / "code"
    ids = np.arange(N)
    repo = [f"r{i % REPOS}" for i in ids]
    control = _ranks(0.85, 40)
    trained = [_ranks(0.30, 50 + s) for s in range(3)]  # far below the control: 'below'
    hr = pd.concat([pd.read_csv(d / "hybrids_ranks.csv"),
                    pd.DataFrame({"id": ids, "repo": repo, "hybrid": "fusion_sentence", "seed": 0,
                                  "rank": control})]
                   + [pd.DataFrame({"id": ids, "repo": repo, "hybrid": "fusion_infonce", "seed": s,
                                    "rank": r}) for s, r in enumerate(trained)])
    hr.to_csv(d / "hybrids_ranks.csv", index=False)
    h = json.loads((m / "hybrids.json").read_text())
    h["hybrids"]["fusion_sentence"] = {"variant": "sentence", "kind": "fusion", "n_seeds": 1,
                                       "weight": 0.5, "median_rank": 1}
    h["hybrids"]["fusion_infonce"] = {"variant": "infonce", "kind": "fusion", "n_seeds": 3,
                                      "weight": 0.4, "median_rank": 9}
    (m / "hybrids.json").write_text(json.dumps(h))
    s = build_section(tmp_path, tmp_path / "fig")
    rows = {r[0]: r for r in s.tables[0].rows}
    assert any(n.startswith("BM25 + baseline, score fusion (w=0.5): teacher sentence") for n in rows)
    trained_row = next(r for n, r in rows.items() if n.startswith("BM25 + predictor, score fusion"))
    mean = np.mean([(r <= 10).mean() for r in trained]) * 100  # all three seeds count
    assert abs(100 * trained_row[3].value - mean) < 1e-9
    assert "significantly above the control: 0 of 1, below: 1." in s.headline


def test_gzipped_hybrid_ranks_give_the_same_table(tmp_path):
    import gzip
    import shutil

    _write(tmp_path, with_hybrids=True)
    plain = [[str(c) for c in r] for r in build_section(tmp_path, tmp_path / "fig").tables[0].rows]
    f = tmp_path / "reports" / "data" / "code" / "hybrids_ranks.csv"
    with open(f, "rb") as src, gzip.open(f.with_name(f.name + ".gz"), "wb") as dst:
        shutil.copyfileobj(src, dst)
    f.unlink()
    rows = [[str(c) for c in r] for r in build_section(tmp_path, tmp_path / "fig").tables[0].rows]
    assert rows == plain and any(r[0].startswith("BM25 + predictor") for r in rows)


def test_biencoder_rows_and_their_fusions_join_the_table(tmp_path):
    from contrastlab.reporting.code import _load_table

    _write(tmp_path, with_hybrids=True)
    m = tmp_path / "reports" / "metrics" / "code"
    d = tmp_path / "reports" / "data" / "code"
    ids, repo = np.arange(N), [f"r{i % REPOS}" for i in np.arange(N)]
    pd.concat([pd.DataFrame({"id": ids, "repo": repo, "seed": s, "rank": _ranks(0.9, 30 + s)})
               for s in range(3)]).to_csv(d / "biencoder_infonce_ranks.csv", index=False)
    title = "Bi-encoder fine-tuned, InfoNCE, top 1 layer, shared tower"
    (m / "biencoder_infonce.json").write_text(json.dumps({
        "title": title, "trainer": "contrastlab", "loss": "infonce", "residual": False, "n_seeds": 3,
        "val_rank_at_10": 0.8, "lr": 5e-5, "temperature": 0.05, "tuned": False, "steps": 24,
        "corpus_size": 500, "median_rank": 1}))
    pd.concat([pd.DataFrame({"id": ids, "repo": repo, "hybrid": "fusion_biencoder_infonce", "seed": s,
                             "rank": _ranks(0.95, 40 + s)}) for s in range(3)]).to_csv(
        d / "hybrids_biencoder_ranks.csv", index=False)
    (m / "hybrids_biencoder.json").write_text(json.dumps({"hybrids": {"fusion_biencoder_infonce": {
        "variant": "biencoder_infonce", "kind": "fusion", "n_seeds": 3, "weight": 0.4,
        "median_rank": 1}}, "corpus_size": 500}))
    loaded = _load_table(tmp_path, "code")
    assert {"biencoder_infonce", "fusion_biencoder_infonce", "rrf_infonce"} <= set(loaded["metrics"])
    assert "hybrids_biencoder" not in loaded["metrics"]
    rows = {r[0]: r for r in build_section(tmp_path, tmp_path / "fig").tables[0].rows}
    assert rows[title][7] == "24 steps"
    assert f"BM25 + fine-tuned encoder, score fusion (w=0.4): {title}" in rows
    s = build_section(tmp_path, tmp_path / "fig")
    assert title in s.headline  # the best trained row on validation is named


def _write_gpu(root, device: str | None = "NVIDIA H100 80GB HBM3") -> str:
    """The GPU bi-encoder folder as scripts/collect_gpu_biencoder.py writes it: the default
    table's baselines and one every-layer row."""
    import shutil

    m = root / "reports" / "metrics" / "code_biencoder_gpu"
    d = root / "reports" / "data" / "code_biencoder_gpu"
    m.mkdir(parents=True)
    d.mkdir(parents=True)
    shutil.copy(root / "reports" / "metrics" / "code" / "baselines.json", m)
    shutil.copy(root / "reports" / "data" / "code" / "baselines_ranks.csv", d)
    ids, repo = np.arange(N), [f"r{i % REPOS}" for i in np.arange(N)]
    pd.concat([pd.DataFrame({"id": ids, "repo": repo, "seed": s, "rank": np.where(
        np.random.default_rng(50 + s).random(N) < 0.97, 1, 300)}) for s in range(3)]).to_csv(
        d / "biencoder_infonce_ranks.csv", index=False)
    title = "Bi-encoder fine-tuned, InfoNCE, every layer, shared tower"
    (m / "biencoder_infonce.json").write_text(json.dumps({
        "title": title, "trainer": "contrastlab", "loss": "infonce", "residual": False, "n_seeds": 3,
        "val_rank_at_10": 0.9, "lr": 1e-4, "temperature": 0.05, "tuned": False, "steps": 300,
        "layers": "all", "max_length": 256, "batch_size": 128, "corpus_size": 500, "median_rank": 1,
        "selection": "lr and steps chosen on validation", **({"device": device} if device else {})}))
    return title


def test_gpu_table_is_a_second_panel_and_the_take_away_names_its_best_loss(tmp_path):
    from contrastlab.reporting.headline import MAX_HEADLINE_WORDS, attach, words

    _write(tmp_path, with_hybrids=True)
    title = _write_gpu(tmp_path)
    s = build_section(tmp_path, tmp_path / "fig")
    gpu = s.tables[-1]
    assert "every layer trained, one NVIDIA H100 80GB HBM3" in gpu.title
    assert title in [r[0] for r in gpu.rows] and "not by `dvc repro`" in gpu.note
    assert [p.title for p in s.comparison.panels] == ["2 CPU cores", "one H100, every layer trained"]
    assert {r.short for r in s.comparison.panels[1].rows} >= {"Bi-enc InfoNCE, all layers"}
    assert any(n.startswith("GPU bi-encoder table: ") for n in s.notes)
    attach(s, tmp_path / "fig")
    assert words(s.headline) <= MAX_HEADLINE_WORDS
    assert "on one H100, every layer trained, Bi-enc InfoNCE, all layers reaches" in s.headline
    assert "significantly above" in s.headline.split("Take-away:")[1]


def test_a_folder_without_a_device_row_adds_no_gpu_table(tmp_path):
    _write(tmp_path, with_hybrids=False)
    _write_gpu(tmp_path, device=None)
    s = build_section(tmp_path, tmp_path / "fig")
    assert len(s.comparison.panels) == 1 and not any("every layer trained" in t.title for t in s.tables)


def test_cpu_budget_preset_is_its_own_table_and_a_panel_the_summary_states(tmp_path):
    """reports/metrics/code_biencoder_cpu (scripts/biencoder_cpu.sh): its own table with the
    preset named, a panel between the default CPU one and the GPU one, and in the summary's
    ``more`` (the README's rows), not in the headline."""
    import shutil

    from contrastlab.reporting.headline import headline_metrics

    _write(tmp_path, with_hybrids=True)
    _write_gpu(tmp_path)
    m = tmp_path / "reports" / "metrics" / "code_biencoder_cpu"
    d = tmp_path / "reports" / "data" / "code_biencoder_cpu"
    shutil.copytree(tmp_path / "reports" / "metrics" / "code_biencoder_gpu", m)
    shutil.copytree(tmp_path / "reports" / "data" / "code_biencoder_gpu", d)
    meta = json.loads((m / "biencoder_infonce.json").read_text())
    meta.pop("device")
    (m / "biencoder_infonce.json").write_text(json.dumps({**meta, "layers": "3", "steps": 384}))
    s = build_section(tmp_path, tmp_path / "fig")
    titles = [t.title for t in s.tables]
    cpu = next(t for t in s.tables if "compute curve's best CPU budget" in t.title)
    assert "presets/code-biencoder-cpu.yaml" in cpu.title and "scripts/biencoder_cpu.sh" in cpu.note
    assert titles.index(cpu.title) < next(i for i, t in enumerate(titles) if "every layer trained" in t)
    assert [p.title for p in s.comparison.panels] == [
        "2 CPU cores", "2 CPU cores, CPU-budget preset", "one H100, every layer trained"]
    assert s.comparison.secondary == 2 and s.comparison.more == (1,)
    nums = headline_metrics(s.comparison)
    assert nums["secondary"]["panel"] == "one H100, every layer trained"
    (more,) = nums["more"]
    assert more["panel"] == "2 CPU cores, CPU-budget preset"
    assert more["strongest_baseline"] == nums["strongest_baseline"]  # the same corpus, the same BM25
