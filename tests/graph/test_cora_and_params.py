"""fetch_graph checks on Cora, the graph params schema, and a tiny end-to-end run on the real Cora."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from contrastlab.data.cora import CORA_RAW_FILES, load_cora, prepare_cora
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
    assert names == set(CORA_RAW_FILES)


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
    assert len(g.presets["full"].seeds) >= 5


@pytest.mark.parametrize("patch,key", [
    ({"variants.ntxent.temperature": 0.0}, "graph.variants.ntxent.temperature"),
    ({"variants.mixco.alpha": [1]}, "graph.variants.mixco"),
    ({"variants.mixco.alpha": 1e12}, "graph.variants.mixco"),
    ({"variants.mochi.loss": "supcon"}, "graph.variants.mochi.loss"),
    ({"variants.ntxent.epochs": 10**6}, "graph.variants.ntxent.epochs"),
    ({"presets.fast.seeds": [2**63]}, "graph.presets.fast.seeds.0"),
    ({"train.edge_drop": [0.2, 1.0]}, "graph.train.edge_drop.1"),
    ({"train.lr": "fast"}, "graph.train.lr"),
    ({"model.activation": "tanh"}, "graph.model.activation"),
    ({"presets.fast.seeds": [1, 1]}, "graph.presets.fast.seeds"),
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


def test_params_preset_and_n_hard_cross_checks(tmp_path):
    with pytest.raises(ParamsError, match="preset 'huge'"):
        load_params(_params_with(tmp_path, {"preset": "huge"}))
    with pytest.raises(ParamsError, match="n_hard"):
        load_params(_params_with(tmp_path, {"variants.mochi.n_hard": 5000}))


# --------------------------------------------------------------------------- end to end
@pytest.mark.slow
def test_tiny_train_and_probe_on_real_cora(tmp_path, cora_root):
    """fetch -> train -> evaluate stages on the real Cora, a few epochs, two variants."""
    import importlib.util

    def stage(name):
        spec = importlib.util.spec_from_file_location(name, ROOT / "stages" / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod.main

    p = _params_with(tmp_path, {
        "presets.fast": {"seeds": [0, 1], "epochs": 8, "batch_nodes": 256},
        "preset": "fast", "threads": 1,
        "variants.mochi": {"loss": "mochi", "temperature": 0.4, "n_hard": 32, "s": 8,
                           "s_prime": 4},
    })
    out = tmp_path / "o"
    for v in ("ntxent", "mochi"):
        assert stage("train_graph")(["--variant", v, "--params", str(p), "--data", str(cora_root),
                                     "--out", str(out / "train"), "--plots", str(out / "plots")]) == 0
        assert stage("evaluate_graph")(["--variant", v, "--params", str(p), "--data", str(cora_root),
                                        "--train", str(out / "train"), "--metrics", str(out / "m"),
                                        "--report-data", str(out / "d")]) == 0
        m = json.loads((out / "m" / f"{v}.json").read_text())
        assert m["n_seeds"] == 2 and m["epochs"] == 8
        assert m["logreg_acc_mean"] > 0.5 and m["notebook_acc_mean"] > 0.5  # chance: 0.14-0.32
        assert all(isinstance(x, (int, float)) for x in m.values())
        hist = (out / "plots" / f"{v}.csv").read_text().splitlines()
        assert hist[0] == "epoch,loss,loss_seed0,loss_seed1" and len(hist) == 9
        assert len((out / "d" / f"{v}_pca.csv").read_text().splitlines()) == 2709
    # a rerun with the same seed gives identical bytes
    first = (out / "plots" / "ntxent.csv").read_bytes()
    stage("train_graph")(["--variant", "ntxent", "--params", str(p), "--data", str(cora_root),
                          "--out", str(out / "train2"), "--plots", str(out / "plots2")])
    assert (out / "plots2" / "ntxent.csv").read_bytes() == first
    # the report section renders with figures
    from contrastlab.reporting.graph import build_section

    rep = tmp_path / "rep"
    (rep / "reports" / "metrics").mkdir(parents=True)
    shutil.copytree(out / "m", rep / "reports" / "metrics" / "graph")
    shutil.copytree(out / "plots", rep / "reports" / "plots" / "graph")
    shutil.copytree(out / "d", rep / "reports" / "data" / "graph")
    sec = build_section(rep, rep / "fig")
    assert sec is not None and len(sec.figures) == 3
    assert all(f.path.exists() for f in sec.figures)
    rows = sec.tables[0].rows
    assert [r[0] for r in rows[:2]] == ["NT-Xent (SimCLR)", "MoCHi"]
    assert any("DGI" in r[0] and "0.823" in r[1] for r in rows)


def test_unknown_variant_stage_error(tmp_path):
    r = subprocess.run([sys.executable, str(ROOT / "stages" / "train_graph.py"), "--variant",
                        "nope", "--params", str(ROOT / "params.yaml")],
                       capture_output=True, text=True, env={"CONTRASTLAB_MLFLOW": "0",
                                                            "PATH": "/usr/bin:/bin"})
    assert r.returncode == 2 and "nope" in r.stderr
