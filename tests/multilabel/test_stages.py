"""The multi-label stage scripts end to end on the real yeast files with tiny settings."""

import json
from pathlib import Path

import pytest
import yaml

from contrastlab.utils import repo_root

ROOT = repo_root(Path(__file__).parent)


def _params(tmp: Path, **train) -> Path:
    p = {"multilabel": {
        "datasets": ["yeast"], "losses": ["bce", "mulsupcon"], "seeds": [0, 1, 2],
        "vendor_root": str(ROOT / "data" / "vendor" / "mulan"), "optional_root": str(tmp / "none"),
        "data": {"yeast": {"max_train": 300}},
        "train": {"hidden": [16], "enc_dim": 16, "proj_dim": 8, "batch_size": 64, "epochs": 2,
                  "clf_epochs": 3, "workers": 2, **train},
        "variants": {"simdis": {"kwargs": {"weighting": "log_prob"}}},
    }}
    f = tmp / "params.yaml"
    f.write_text(yaml.safe_dump(p))
    return f


class _Result:
    def __init__(self, returncode, stderr):
        self.returncode, self.stderr = returncode, stderr


def _run(args, cwd):
    """Run a stage script's ``main`` in-process through ``run_stage`` (exit status + stderr),
    with the working directory set to ``cwd`` (cheaper than a new interpreter per call)."""
    import contextlib
    import importlib.util
    import io
    import os

    from contrastlab.cli import run_stage

    script, argv = Path(args[0]), list(args[1:])
    spec = importlib.util.spec_from_file_location(f"_stage_{script.stem}", script)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    err = io.StringIO()
    old = os.getcwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            rc = run_stage(lambda: mod.main(argv))
    finally:
        os.chdir(old)
    return _Result(rc, err.getvalue())


@pytest.mark.slow
def test_build_train_weights_on_yeast(tmp_path):
    params = _params(tmp_path)
    r = _run([str(ROOT / "stages" / "build_multilabel.py"), "--dataset", "yeast", "--params", str(params)], tmp_path)
    assert r.returncode == 0, r.stderr
    meta = json.loads((tmp_path / "data/multilabel/yeast/meta.json").read_text())
    assert meta["train"]["n"] == 300 and meta["train_full"] == 1500 and meta["test"]["n"] == 917
    assert len(meta["labels"]) == 14
    r = _run([str(ROOT / "stages" / "train_multilabel.py"), "--dataset", "yeast", "--loss", "mulsupcon",
              "--params", str(params)], tmp_path)
    assert r.returncode == 0, r.stderr
    m = json.loads((tmp_path / "reports/metrics/multilabel/yeast_mulsupcon.json").read_text())
    assert m["n_seeds"] == 3 and 0 < m["micro_f1"] <= 1
    # wall time: in the timings file, never in the (DVC-declared) metrics
    from contrastlab.timings import read_timing

    assert "time_s" not in m and read_timing("multilabel", "yeast_mulsupcon")["time_s"] > 0
    assert all(isinstance(v, (int, float)) for v in m.values())
    assert {f"map_seed{s}" for s in range(3)} <= set(m)
    csv = (tmp_path / "reports/plots/multilabel/yeast_mulsupcon.csv").read_text().splitlines()
    assert csv[0].startswith("epoch,loss,loss_std") and len(csv) == 3
    r = _run([str(ROOT / "stages" / "multilabel_weights.py"), "--dataset", "yeast"], tmp_path)
    assert r.returncode == 0, r.stderr
    rel = json.loads((tmp_path / "reports/data/multilabel/yeast_simdis_relations.json").read_text())
    assert rel["n_pairs"] == 300 * 299
    assert sum(rel[f"R{i}_pairs"] for i in range(1, 6)) == rel["n_pairs"]
    assert rel["R1_weight_mean"] == 0.0 and rel["R2_weight_mean"] == 1.0
    # the report section builds from these outputs
    from contrastlab.reporting.multilabel import build_section

    s = build_section(tmp_path, tmp_path / "figs")
    titles = [t.title for t in s.tables]
    assert "yeast: Table 1 format" in titles
    assert all(f.path.exists() for f in s.figures)


def test_bad_params_and_missing_inputs_give_clear_errors(tmp_path):
    params = _params(tmp_path)
    bad = yaml.safe_load(params.read_text())
    bad["multilabel"]["variants"]["simdis"]["kwargs"] = {"no_such_kw": 1}
    params.write_text(yaml.safe_dump(bad))
    r = _run([str(ROOT / "stages" / "train_multilabel.py"), "--dataset", "yeast", "--loss", "simdis",
              "--params", str(params)], tmp_path)
    assert r.returncode == 2 and "multilabel.variants.simdis.kwargs" in r.stderr and "no_such_kw" in r.stderr
    params = _params(tmp_path)
    r = _run([str(ROOT / "stages" / "train_multilabel.py"), "--dataset", "yeast", "--loss", "bce",
              "--params", str(params)], tmp_path)
    assert r.returncode == 2 and "build_multilabel@yeast" in r.stderr
    bad = yaml.safe_load(params.read_text())
    bad["multilabel"]["datasets"] = ["yeast", "imagenet"]
    params.write_text(yaml.safe_dump(bad))
    r = _run([str(ROOT / "stages" / "build_multilabel.py"), "--dataset", "yeast", "--params", str(params)], tmp_path)
    assert r.returncode == 2 and "multilabel.datasets" in r.stderr and "imagenet" in r.stderr


def test_optional_dataset_missing_is_named(tmp_path):
    params = _params(tmp_path)
    r = _run([str(ROOT / "stages" / "build_multilabel.py"), "--dataset", "scene", "--params", str(params)], tmp_path)
    assert r.returncode == 2 and "scene-train.arff" in r.stderr and "optional_root" in r.stderr
