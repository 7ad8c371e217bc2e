"""fetch_graph checks on Cora, the graph params schema, and a tiny end-to-end run on the real Cora."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from contrastlab.data.cora import load_cora, prepare_cora
from contrastlab.data.planetoid import raw_files
from contrastlab.params import ParamsError, load_params

ROOT = Path(__file__).resolve().parents[2]
VENDOR = ROOT / "data" / "vendor" / "planetoid" / "Cora"


@pytest.fixture(scope="module")
def cora_root(tmp_path_factory):
    out = tmp_path_factory.mktemp("cora") / "planetoid"
    stats = prepare_cora(VENDOR, out)
    assert stats == {"num_nodes": 2708, "num_features": 1433, "num_edges": 10556,
                     "num_classes": 7, "num_train": 140, "num_val": 500, "num_test": 1000}
    return out


def _vendor_copy(tmp_path):
    dst = tmp_path / "vendor"
    shutil.copytree(VENDOR, dst)
    for f in dst.rglob("*"):
        f.chmod(0o644 if f.is_file() else 0o755)
    return dst


def test_fetch_cora_checksum_mismatch(tmp_path):
    v = _vendor_copy(tmp_path)
    with open(v / "raw" / "ind.cora.graph", "ab") as f:
        f.write(b"x")
    out = tmp_path / "out"
    with pytest.raises(ValueError, match=r"ind\.cora\.graph: SHA-256 mismatch"):
        prepare_cora(v, out)
    assert not out.exists()  # nothing half-written


def test_fetch_cora_missing_file_and_sums(tmp_path):
    v = _vendor_copy(tmp_path)
    (v / "raw" / "ind.cora.tx").unlink()
    with pytest.raises(FileNotFoundError, match=r"ind\.cora\.tx"):
        prepare_cora(v, tmp_path / "out")
    (v / "SHA256SUMS").unlink()
    with pytest.raises(FileNotFoundError, match="SHA256SUMS"):
        prepare_cora(v, tmp_path / "out")
    with pytest.raises(ValueError, match="source"):
        prepare_cora(VENDOR, tmp_path / "out", source="ftp")


def test_fetch_cora_stage_exit_code(tmp_path):
    v = _vendor_copy(tmp_path)
    (v / "raw" / "ind.cora.y").write_bytes(b"corrupt")
    r = subprocess.run([sys.executable, str(ROOT / "stages" / "fetch_graph.py"),
                        "--params", str(ROOT / "params.yaml"), "--vendor", str(v),
                        "--out", str(tmp_path / "out")], capture_output=True, text=True)
    assert r.returncode == 2
    assert "ind.cora.y" in r.stderr and "mismatch" in r.stderr


def test_vendored_files_listed():
    names = {line.split()[1] for line in (VENDOR / "SHA256SUMS").read_text().splitlines()}
    assert names == set(raw_files("Cora"))


def test_load_cora_unprepared(tmp_path):
    with pytest.raises(FileNotFoundError, match="fetch_graph"):
        load_cora(tmp_path)


# --------------------------------------------------------------------------- params
def _params_with(tmp_path, graph_patch):
    base = yaml.safe_load((ROOT / "params.yaml").read_text())
    g = base["graph"]
    for dotted, value in graph_patch.items():
        *path, last = dotted.split(".")
        node = g
        for k in path:
            node = node[k]
        node[last] = value
    p = tmp_path / "params.yaml"
    p.write_text(yaml.safe_dump(base))
    return p


def test_repo_params_valid():
    g = load_params(ROOT / "params.yaml").graph
    assert set(g.variants) >= {"ntxent", "mixco", "mochi"}
    assert len(g.final.seeds) >= 5 and not set(g.final.seeds) & set(g.tune.seeds)
    assert not set(g.final.default_seeds) - set(g.final.seeds)  # paired with the tuned runs
    # protocol 2: >= 3 training seeds per trial, pruning sees one step per seed
    assert len(g.tune.seeds) >= 3 and g.tune.max_resource == len(g.tune.seeds)
    # the probe's C grid spans 1e-4..1e3 and a choice at its end is not silently kept
    assert min(g.probe.c_grid) <= 1e-4 and max(g.probe.c_grid) >= 1e3
    assert g.probe.edge in ("extend", "raise")
    # every variant gets the same budget and searches at least temperature and lr
    assert all({"temperature", "lr"} <= set(v.search) for v in g.variants.values())


@pytest.mark.parametrize("patch,key", [
    ({"variants.ntxent.temperature": 0.0}, "graph.variants.ntxent.temperature"),
    ({"variants.mixco.alpha": [1]}, "graph.variants.mixco"),
    ({"variants.mixco.alpha": 1e12}, "graph.variants.mixco"),
    ({"variants.mochi.loss": "supcon"}, "graph.variants.mochi.loss"),
    ({"train.epochs": 10**6}, "graph.train.epochs"),
    ({"final.seeds": [2**63]}, "graph.final.seeds.0"),
    ({"train.edge_drop": [0.2, 1.0]}, "graph.train.edge_drop.1"),
    ({"train.lr": "fast"}, "graph.train.lr"),
    ({"model.activation": "tanh"}, "graph.model.activation"),
    ({"final.seeds": [1, 1]}, "graph.final.seeds"),
    ({"tune.trials": 0}, "graph.tune.trials"),
    ({"variants.ntxent.search": {"bogus": {"type": "float", "low": 0, "high": 1}}},
     "graph.variants.ntxent"),
    ({"variants.ntxent.search": {"lr": {"type": "float", "low": 0, "high": 1, "log": True}}},
     "graph.variants.ntxent"),
    ({"bogus": 1}, "graph.bogus"),
])
def test_params_errors_name_key_and_file(tmp_path, patch, key):
    p = _params_with(tmp_path, patch)
    with pytest.raises(ParamsError) as e:
        load_params(p)
    assert str(p) in str(e.value) and key in str(e.value)
    # the variant name appears once (no discriminator tag repeated in the key)
    assert ".ntxent.ntxent." not in str(e.value) and ".mixco.mixco." not in str(e.value)


@pytest.mark.parametrize("patch,key", [
    ({"variants.ntxent.n_hard": 3}, "graph.variants.ntxent.n_hard"),
    ({"variants.mixco.n_hard": 3}, "graph.variants.mixco.n_hard"),
])
def test_loss_keywords_are_checked_against_the_loss_signature(tmp_path, patch, key):
    from contrastlab.params.losses import check_loss_keywords

    p = _params_with(tmp_path, patch)
    params = load_params(p)  # structurally fine: extra keys are the loss's business
    with pytest.raises(ParamsError) as e:
        check_loss_keywords(params, p)
    assert str(p) in str(e.value) and key in str(e.value) and "accepts" in str(e.value)
    check_loss_keywords(load_params(ROOT / "params.yaml"))  # the shipped file passes


def test_params_n_hard_cross_checks(tmp_path):
    with pytest.raises(ParamsError, match="n_hard"):
        load_params(_params_with(tmp_path, {"variants.mochi.n_hard": 5000}))
    with pytest.raises(ParamsError, match="n_hard"):  # the search range is checked too
        load_params(_params_with(tmp_path, {"variants.mochi.search.n_hard.high": 5000}))


def _stage(name):
    from _stagerun import stage_main

    return stage_main(ROOT / "stages" / f"{name}.py")


_TINY = {
    "train.epochs": 4, "train.batch_nodes": 256, "threads": 1,
    "tune.trials": 2, "tune.startup_trials": 1, "tune.seeds": [100],
    "final.seeds": [0, 1], "final.ablation_seeds": [0], "final.ablation_batch_nodes": 512,
    "final.default_seeds": [0], "baselines.sgc_k": [1, 2],
    "probe.c_grid": [1e-3, 1e-2, 0.1, 1.0, 10.0, 100.0],
    "variants.mochi": {"loss": "mochi", "temperature": 0.4, "n_hard": 32, "s": 8, "s_prime": 4,
                       "search": {"temperature": {"type": "float", "low": 0.1, "high": 1.0,
                                                  "log": True},
                                  "n_hard": {"type": "int", "low": 16, "high": 64}}},
    "variants.ntxent.search": {"temperature": {"type": "float", "low": 0.1, "high": 1.0},
                               "feature_mask.1": {"type": "float", "low": 0.0, "high": 0.5}},
}


# --------------------------------------------------------------------------- end to end
@pytest.mark.slow
def test_tune_final_baselines_report_on_real_cora(tmp_path, cora_root):
    """tune -> final runs -> ablation -> baselines -> report section on the real Cora."""
    p = _params_with(tmp_path, _TINY)
    out = tmp_path / "o"
    common = ["--params", str(p), "--data", str(cora_root)]
    dirs = {"tuned": out / "tuned", "metrics": out / "m", "report-data": out / "d",
            "plots": out / "plots"}
    for v in ("ntxent", "mochi"):
        assert _stage("tune_graph")(["--variant", v, *common, "--study-dir", str(out / "tune"),
                                     "--tuned", str(dirs["tuned"]),
                                     "--plots", str(out / "tplots")]) == 0
        chosen = json.loads((dirs["tuned"] / f"{v}.json").read_text())
        assert chosen["budget_trials"] == 2 and chosen["n_complete"] == 2
        # the variant's space: the track default (graph.tune.search) merged with its own keys
        space = load_params(p).graph.variants[v].search
        assert set(chosen["params"]) == set(space) >= set(_TINY[f"variants.{v}.search"] if v == "ntxent"
                                                          else _TINY["variants.mochi"]["search"])
        hist = (out / "tplots" / f"{v}.csv").read_text().splitlines()
        assert hist[0].startswith("trial,state,value,best_so_far") and len(hist) == 3
        args = [f"--{k}={d}" for k, d in dirs.items()]
        assert _stage("train_graph")(["--variant", v, *common, *args]) == 0
        m = json.loads((out / "m" / f"{v}.json").read_text())
        assert m["n_seeds"] == 2 and m["epochs"] == 4 and m["batch_nodes"] == 256
        assert m["logreg_acc_ci_low"] <= m["logreg_acc_mean"] <= m["logreg_acc_ci_high"]
        assert m["logreg_acc_mean"] > 0.5  # chance: 0.14-0.32
        # the tuned choice was applied (rounded to 6 digits in the JSON)
        for k, val in chosen["params"].items():
            head, _, tail = k.partition(".")
            got = m["config"][head][int(tail)] if tail else m["config"][head]
            assert got == pytest.approx(val)
        pred = (out / "d" / f"{v}_test_pred.csv").read_text().splitlines()
        assert pred[0] == "node,y,seed_0,seed_1" and len(pred) == 1001
        assert "time" not in json.dumps(m)  # wall times stay out of the hashed metrics
        assert _stage("train_graph")(["--variant", v, "--ablation", *common, *args]) == 0
        a = json.loads((out / "m" / "ablation" / f"{v}.json").read_text())
        assert a["batch_nodes"] == 512 and a["n_seeds"] == 1
        assert _stage("train_graph")(["--variant", v, "--default", *common, *args]) == 0
        d = json.loads((out / "m" / "default" / f"{v}.json").read_text())
        assert d["n_seeds"] == 1 and d["tuned"] == {}
        declared = _TINY["variants.mochi"]["temperature"] if v == "mochi" else 0.4
        assert d["config"]["temperature"] == pytest.approx(declared)
        assert len(m["probe_C"]) == 2 and len(m["logreg_val_acc"]) == 2
    # a rerun with the same seeds gives identical bytes
    first = (out / "d" / "ntxent_test_pred.csv").read_bytes()
    _stage("train_graph")(["--variant", "ntxent", *common, "--tuned", str(dirs["tuned"]),
                           "--metrics", str(out / "m2"), "--report-data", str(out / "d2"),
                           "--plots", str(out / "p2")])
    assert (out / "d2" / "ntxent_test_pred.csv").read_bytes() == first
    assert _stage("baselines_graph")([*common, "--metrics", str(out / "m"),
                                      "--report-data", str(out / "d")]) == 0
    b = json.loads((out / "m" / "baselines.json").read_text())
    assert set(b) == {"raw_features", "sgc", "random_gcn"} and b["random_gcn"]["n_seeds"] == 2
    assert b["sgc"]["K"] in (1, 2) and all("val_acc" in v for v in b.values())
    assert b["sgc"]["logreg_acc_mean"] > b["raw_features"]["logreg_acc_mean"]
    # the report section: headline first, baselines and references in the table
    from contrastlab.reporting.graph import build_section

    rep = tmp_path / "rep"
    for sub, src in (("metrics", out / "m"), ("plots", out / "plots"), ("data", out / "d"),
                     ("tuned", dirs["tuned"])):
        shutil.copytree(src, rep / "reports" / sub / "graph")
    shutil.copytree(out / "tplots", rep / "reports" / "plots" / "tune" / "graph")
    sec = build_section(rep, rep / "fig", params=load_params(p))
    assert sec is not None and sec.headline and "95% CI" in sec.headline
    assert all(f.path.exists() for f in sec.figures)
    rows = sec.tables[0].rows
    names = [r[0] for r in rows]
    assert names[:2] == ["NT-Xent (SimCLR)", "MoCHi"] or names[:2] == ["MoCHi", "NT-Xent (SimCLR)"]
    assert any("raw features" in n for n in names) and any("random" in n for n in names)
    assert any("SGC" in n for n in names)
    cols = sec.tables[0].columns
    assert "P(best)" in cols and "in 95% MCS" in cols and "vs baseline" in cols
    # the strongest baseline is the one with the best validation accuracy
    strongest = max(b, key=lambda k: b[k]["val_acc"])
    assert "strongest baseline" in sec.headline and strongest in (
        "sgc" if "SGC" in sec.headline else "raw_features" if "raw" in sec.headline
        else "random_gcn",)
    assert any(w in sec.headline for w in ("baseline wins", "ties", "significantly better"))
    dt = [t for t in sec.tables if t.title.startswith("Default vs tuned")]
    assert dt and len(dt[0].rows) == 2 and "1 seeds" in dt[0].note
    assert any("DGI" in n for n in names) and any("GraphMAE" in n for n in names)


def test_tune_resumes_after_interruption(tmp_path, cora_root, monkeypatch):
    """A study killed in its second trial continues: the first trial is kept, not redone."""
    p = _params_with(tmp_path, {**_TINY, "train.epochs": 1, "tune.trials": 2})
    out = tmp_path / "o"
    argv = ["--variant", "ntxent", "--params", str(p), "--data", str(cora_root),
            "--study-dir", str(out / "tune"), "--tuned", str(out / "tuned"),
            "--plots", str(out / "plots")]
    import contrastlab.training.graph_tune as tg

    real, calls = tg.fit_and_probe, []

    def flaky(*a, **k):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt  # the stage is killed during trial 1
        return real(*a, **k)

    monkeypatch.setattr(tg, "fit_and_probe", flaky)
    main = _stage("tune_graph")
    with pytest.raises(KeyboardInterrupt):
        main(argv)
    assert not (out / "tuned" / "ntxent.json").exists()
    calls.clear()
    monkeypatch.setattr(tg, "fit_and_probe", real)
    assert main(argv) == 0
    chosen = json.loads((out / "tuned" / "ntxent.json").read_text())
    assert chosen["n_complete"] == 2 and chosen["n_failed"] == 0
    hist = (out / "plots" / "ntxent.csv").read_text().splitlines()[1:]
    # trial 0 from the first run, trial 1 was interrupted (not counted), trial 2 is new
    assert [h.split(",")[0] for h in hist] == ["0", "2"]


def test_unknown_variant_stage_error(tmp_path, stage_cmd):
    r = subprocess.run([sys.executable, *stage_cmd("train_graph@nope"), "--params", str(ROOT / "params.yaml")],
                       capture_output=True, text=True, env={"CONTRASTLAB_MLFLOW": "0",
                                                            "PATH": "/usr/bin:/bin"})
    assert r.returncode == 2 and "nope" in r.stderr
