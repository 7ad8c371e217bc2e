"""The code track's stage scripts end to end on a tiny real corpus (three local folders)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pandas as pd
import pytest
from _stagerun import StageResult, run_stage_here

ROOT = Path(__file__).resolve().parents[2]

FUNC = '''
def {name}(items, factor={k}):
    total = 0
    for item in items:
        total += item * factor + {k}
    return total
'''


def _run(args: list[str], cwd: Path) -> StageResult:
    """A stage script's ``main`` in this process (tests/_stagerun.py): one interpreter's imports
    for the whole chain instead of one per stage."""
    return run_stage_here(args[0], args[1:], cwd, {"CONTRASTLAB_MLFLOW": "0"})


@pytest.mark.slow
def test_code_stages_end_to_end(tmp_path):
    for r in range(3):
        d = tmp_path / "src" / f"repo{r}"
        d.mkdir(parents=True)
        (d / f"mod{r}.py").write_text("".join(FUNC.format(name=f"f{r}_{i}", k=10 * r + i) for i in range(12)))
    (tmp_path / "src" / "repo0" / "bad.py").write_bytes(b"def broken(:\n")
    sources = "\n".join(f"      - {{path: {tmp_path / 'src' / f'repo{r}'}}}" for r in range(3))
    params = tmp_path / "params.yaml"
    params.write_text(
        "code:\n  repos:\n    dists: []\n    sources:\n" + sources + "\n"
        "  split: {train: 0.34, val: 0.33, test: 0.33}\n"
        "  extract: {workers: 1}\n"
        "  teacher: {layer: 2, max_body_tokens: 32, max_sig_tokens: 16, shard_size: 16, workers: 1}\n"
        "  model: {d_model: 16, n_layers: 1, n_heads: 2, ffn: 32}\n"
        "  train: {epochs: 2, batch_size: 4, device: cpu, seeds: [0]}\n"
        "  variants:\n    infonce:\n      loss: infonce\n      search:\n"
        "        lr: {type: float, low: 1.0e-4, high: 1.0e-2, log: true}\n"
        "    plain: {loss: cosine, search: null}\n"
        "  baselines: {zeroshot_layers: [6], workers: 2}\n"
        "  tune: {trials: 2, startup_trials: 1, epochs: 1, seeds: [100, 101], pruner: none}\n")
    d = tmp_path / "data"
    common = ["--params", str(params)]
    steps = [
        ["stages/fetch_repos.py", *common, "--out", str(d / "repos")],
        ["stages/extract_functions.py", *common, "--repos", str(d / "repos"),
         "--out", str(d / "f.parquet"), "--stats", str(d / "stats.json")],
        ["stages/split_by_repo.py", *common, "--functions", str(d / "f.parquet"),
         "--out", str(d / "s.parquet"), "--summary", str(d / "s.json")],
        ["stages/teacher_states.py", *common, "--functions", str(d / "f.parquet"),
         "--out", str(d / "teacher")],
    ]
    fn = ["--functions", str(d / "f.parquet")]  # read by the lexical baselines and hybrids
    io = ["--splits", str(d / "s.parquet"), "--teacher", str(d / "teacher"),
          "--models", str(d / "models")]
    steps.append(["stages/tune_code.py", *common, *io[:4], "--variant", "infonce",
                  "--tuned", str(tmp_path / "tuned"), "--history", str(tmp_path / "th"),
                  "--journal", str(tmp_path / "journal")])
    steps.append(["stages/tune_code.py", *common, *io[:4], "--variant", "plain",
                  "--tuned", str(tmp_path / "tuned"), "--history", str(tmp_path / "th"),
                  "--journal", str(tmp_path / "journal")])
    steps.append(["stages/train_code.py", *common, *io, "--variant", "infonce",
                  "--plots", str(tmp_path / "plots"), "--tuned", str(tmp_path / "tuned")])
    steps.append(["stages/evaluate_code.py", *common, *io, "--variant", "infonce",
                  "--metrics", str(tmp_path / "metrics"), "--curves", str(tmp_path / "curves"),
                  "--history", str(tmp_path / "plots" / "infonce.csv")])
    steps.append(["stages/baselines_code.py", *common, *fn, *io[:4],
                  "--metrics", str(tmp_path / "metrics" / "baselines.json"),
                  "--ranks", str(tmp_path / "curves" / "baselines_ranks.csv")])
    steps.append(["stages/hybrid_code.py", *common, *fn, *io,
                  "--baselines", str(tmp_path / "metrics" / "baselines.json"),
                  "--metrics", str(tmp_path / "metrics" / "hybrids.json"),
                  "--ranks", str(tmp_path / "curves" / "hybrids_ranks.csv")])
    for v in ("infonce", "plain"):  # the declared configuration; checkpoints not kept
        steps.append(["stages/default_code.py", *common, *io[:4], "--variant", v,
                      "--metrics", str(tmp_path / "default"), "--ranks", str(tmp_path / "default")])
    for s in steps:
        r = _run([str(ROOT / s[0]), *s[1:]], ROOT)
        assert r.returncode == 0, f"{s[0]}: {r.stderr[-2000:]}"
    man = json.loads((d / "repos" / "manifest.json").read_text())
    assert [e["name"] for e in man["repositories"]] == ["repo0", "repo1", "repo2"]
    stats = json.loads((d / "stats.json").read_text())
    # k = 10 r + i repeats across repositories (r=0,i=10 == r=1,i=0 ...): 4 duplicate bodies
    assert stats["skipped"]["duplicate_body_across_repos"] == 4
    assert stats["functions"] == 32 and stats["skipped"]["unparsable"] == 1
    sp = pd.read_parquet(d / "s.parquet")
    assert sorted(sp["split"].unique()) == ["test", "train", "val"]
    m = json.loads((tmp_path / "metrics" / "infonce.json").read_text())
    assert m["corpus_size"] == 32 and m["n_queries"] == (sp["split"] == "test").sum()
    assert 0 <= m["rank_at_1"] <= m["rank_at_5"] <= m["rank_at_10"] <= 1
    b = json.loads((tmp_path / "metrics" / "baselines.json").read_text())
    assert set(b["baselines"]) == {"zeroshot_raw", "zeroshot_centred", "ridge", "bm25",
                                   "sentence", "zeroshot_centred_l6"}
    assert b["baselines"]["bm25"]["k1"] in (0.6, 0.9, 1.2, 1.5, 2.0)
    assert len(b["baselines"]["bm25"]["bm25_grid"]) == 25  # 5 k1 x 5 b (b up to 1.0)
    br = pd.read_csv(tmp_path / "curves" / "baselines_ranks.csv")
    assert (br.groupby("baseline").size() == m["n_queries"]).all()
    h = json.loads((tmp_path / "metrics" / "hybrids.json").read_text())
    # the trained predictor's two fusions and the untrained control's (sentence embedding)
    assert set(h["hybrids"]) == {"rrf_infonce", "fusion_infonce", "rrf_sentence", "fusion_sentence"}
    assert h["hybrids"]["fusion_infonce"]["weight"] in [round(0.1 * i, 1) for i in range(11)]
    assert h["hybrids"]["fusion_sentence"]["variant"] == "sentence"
    assert h["hybrids"]["fusion_sentence"]["n_seeds"] == 1
    # every fusion weight is picked by one rule with its margin recorded; the control is also
    # evaluated on the test queries at every grid weight (compared at each fusion's weight)
    for f in ("fusion_infonce", "fusion_sentence"):
        pick = h["hybrids"][f]["pick"]
        assert pick["choice"] == h["hybrids"][f]["weight"] and pick["n_val"] == (sp["split"] == "val").sum()
        assert pick["margin_items"] is not None and isinstance(pick["fragile"], bool)
    tbw = h["hybrids"]["fusion_sentence"]["test_by_weight"]
    assert [g["weight"] for g in tbw] == [round(0.1 * i, 1) for i in range(11)]
    assert b["baselines"]["bm25"]["pick"]["choice"] == {"k1": b["baselines"]["bm25"]["k1"],
                                                        "b": b["baselines"]["bm25"]["b"]}
    hr = pd.read_csv(tmp_path / "curves" / "hybrids_ranks.csv")
    assert len(hr) == (4 + len(tbw)) * m["n_queries"] and hr["rank"].between(1, 32).all()
    assert set(hr["hybrid"]) == set(h["hybrids"]) | {g["hybrid"] for g in tbw}
    r = pd.read_csv(tmp_path / "curves" / "infonce_ranks.csv")
    assert len(r) == m["n_queries"] and (r["rank"] >= 1).all()
    tuned = json.loads((tmp_path / "tuned" / "infonce.json").read_text())
    assert tuned["n_complete"] == 2 and 1e-4 <= tuned["params"]["lr"] <= 1e-2
    assert (tmp_path / "journal" / "infonce" / "journal.log").exists()
    th = pd.read_csv(tmp_path / "th" / "infonce.csv")
    # trial 0 is the declared configuration (code.train.lr); each trial averages 2 seeds
    assert th["lr"].iloc[0] == pytest.approx(1e-3) and th["lr"].iloc[1] != th["lr"].iloc[0]
    assert th["se"].notna().all() and tuned["best_se"] is not None
    # a variant with `search: null` is not tuned: its declared configuration is scored
    plain = json.loads((tmp_path / "tuned" / "plain.json").read_text())
    assert plain["params"] == {} and plain["n_complete"] == 1 and 0 <= plain["best_value"] <= 1
    from contrastlab.params import load_params
    from contrastlab.training.code_inputs import variant_settings
    cfg = variant_settings(load_params(params).code, "plain", tmp_path / "tuned" / "plain.json")
    assert cfg["tuned"] is False and cfg["lr"] == pytest.approx(1e-3)
    assert m["tuned"] is True and m["lr"] == pytest.approx(tuned["params"]["lr"], rel=1e-5)
    # default_code: the declared lr (trial 0) on the final seeds, tested like evaluate_code;
    # its checkpoints went to a temporary folder (no --models): nothing is left behind
    dflt = json.loads((tmp_path / "default" / "infonce.json").read_text())
    assert dflt["searched"] is True and dflt["lr"] == pytest.approx(1e-3)
    assert dflt["n_queries"] == m["n_queries"] and 0 <= dflt["rank_at_10"] <= 1
    assert len(pd.read_csv(tmp_path / "default" / "infonce_ranks.csv")) == m["n_queries"]
    assert json.loads((tmp_path / "default" / "plain.json").read_text())["searched"] is False
    assert sorted(p.name for p in (tmp_path / "default").iterdir()) == [
        "infonce.json", "infonce_ranks.csv", "plain.json", "plain_ranks.csv"]
    assert not list(Path(tempfile.gettempdir()).glob("default_code-*"))
    hist = pd.read_csv(tmp_path / "plots" / "infonce.csv")
    assert list(hist["epoch"]) == [1, 2]
    # the early-stopping epoch of each seed with its margin (validation queries), read from
    # that history under the MRR-plateau rule (code.train.early_stopping's default): the kept
    # epoch, and the smallest MRR change that moves it, in queries
    from contrastlab.models.grid_picks import pick_on_grid

    es = m["picks"]["early_stopping"]
    n_val = int((sp["split"] == "val").sum())
    assert es["rule"] == "mrr_plateau" and es["n_val"] == n_val
    assert es["chosen_seed"] == [s["best_epoch"] for s in m["per_seed"]]
    for (_, h), chosen, margin in zip(hist.groupby("seed"), es["chosen_seed"], es["margin_seed"]):
        want = pick_on_grid(list(h["epoch"]), h["val_mrr"].to_numpy(), n_val)
        assert chosen == want["choice"] and margin == pytest.approx(want["margin_items"], abs=1e-3)
    assert dflt["picks"]["early_stopping"]["chosen_seed"] == [s["best_epoch"] for s in dflt["per_seed"]]
    # a history that names another epoch than the checkpoint's: one clear line, exit 2
    other = hist.copy()
    other.loc[other["epoch"] != es["chosen_seed"][0], "val_mrr"] = 1.0
    other.to_csv(tmp_path / "other.csv", index=False)
    r = _run([str(ROOT / "stages/evaluate_code.py"), *common, *io, "--variant", "infonce",
              "--metrics", str(tmp_path / "m2"), "--curves", str(tmp_path / "c2"),
              "--history", str(tmp_path / "other.csv")], ROOT)
    assert r.returncode == 2 and "differ from the checkpoints'" in r.stderr, r.stderr[-500:]
    assert not (tmp_path / "m2" / "infonce.json").exists()
    # DVC-hashed outputs hold no wall time (a rerun must write the same bytes)
    summary = (d / "models" / "infonce" / "summary.json").read_text()
    assert "time" not in summary, summary
    from contrastlab.training.code import read_checkpoint

    _, meta = read_checkpoint(d / "models" / "infonce" / "seed0.safetensors")
    assert meta["loss"] == "infonce" and "val_rank_at_10" in meta["val"]
    assert not any("time" in k for k in meta["val"]), meta["val"]
    # bad input: one clear line, exit status 2, nothing written
    bad = tmp_path / "bad.yaml"
    bad.write_text("code:\n  train: {epochs: 0}\n")
    r = _run([str(ROOT / "stages/train_code.py"), "--params", str(bad), *io, "--variant", "infonce",
              "--plots", str(tmp_path / "plots")], ROOT)
    assert r.returncode == 2 and "code.train.epochs" in r.stderr
