"""params.yaml is validated on load: clear errors naming the file and the dotted key."""

from pathlib import Path

import pytest

from contrastlab.params import ParamsError, flatten, load_params, params_hash
from contrastlab.utils import repo_root

ROOT = repo_root(Path(__file__))


def test_repository_params_file_is_valid():
    p = load_params(ROOT / "params.yaml")
    assert p.report.digits >= 1


def _write(tmp_path: Path, text: str) -> Path:
    f = tmp_path / "params.yaml"
    f.write_text(text)
    return f


def test_unknown_key_is_named_with_file(tmp_path):
    f = _write(tmp_path, "report:\n  digitz: 3\n")
    with pytest.raises(ParamsError) as e:
        load_params(f)
    msg = str(e.value)
    assert str(f) in msg and "report.digitz" in msg and "unknown key" in msg


def test_unknown_top_level_section(tmp_path):
    f = _write(tmp_path, "graphs: {}\n")
    with pytest.raises(ParamsError, match=r"graphs: unknown key"):
        load_params(f)


def test_wrong_type_is_named(tmp_path):
    f = _write(tmp_path, "report:\n  digits: three\n")
    with pytest.raises(ParamsError, match=r"report\.digits: .*integer"):
        load_params(f)


def test_out_of_range_is_named(tmp_path):
    f = _write(tmp_path, "report:\n  digits: 0\n")
    with pytest.raises(ParamsError, match=r"report\.digits: .*greater than or equal to 1.*got 0"):
        load_params(f)


def test_malformed_yaml_and_missing_file(tmp_path):
    f = _write(tmp_path, "report: [unclosed\n")
    with pytest.raises(ParamsError, match="not valid YAML"):
        load_params(f)
    with pytest.raises(ParamsError, match="not found"):
        load_params(tmp_path / "nope.yaml")
    g = _write(tmp_path, "- a\n- b\n")
    with pytest.raises(ParamsError, match="must be a mapping"):
        load_params(g)


def test_flatten_and_hash():
    flat = flatten({"a": {"b": 1, "c": [1, 2]}, "d": [{"e": 3}]})
    assert flat == {"a.b": 1, "a.c": [1, 2], "d.0.e": 3}
    assert params_hash({"x": 1}) == params_hash({"x": 1})
    assert params_hash({"x": 1}) != params_hash({"x": 2})


def test_stage_with_bad_params_exits_with_clear_error(tmp_path):
    import subprocess
    import sys

    bad = tmp_path / "params.yaml"
    bad.write_text("report:\n  digits: 99\n")
    r = subprocess.run([sys.executable, str(ROOT / "stages" / "report.py"), "--params", str(bad),
                        "--out-dir", str(tmp_path / "reports")],
                       capture_output=True, text=True, cwd=tmp_path,
                       env={**__import__("os").environ, "CONTRASTLAB_MLFLOW": "0"})
    assert r.returncode == 2
    assert "report.digits" in r.stderr and str(bad) in r.stderr
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "reports" / "comparison.md").exists()
