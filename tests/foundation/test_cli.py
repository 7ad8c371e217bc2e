"""run_stage: bad input -> one line and exit status 2; anything else keeps its traceback."""

import subprocess
import sys
from pathlib import Path

import pytest

from contrastlab.cli import run_stage
from contrastlab.errors import InputError, UnknownNameError
from contrastlab.losses import get_spec
from contrastlab.params import ParamsError, load_params

ROOT = Path(__file__).resolve().parents[2]


def _raiser(exc):
    def main():
        raise exc

    return main


@pytest.mark.parametrize("exc", [
    InputError("graph.variants.x: n_hard too large"),
    ParamsError("params.yaml: report.digits: must be >= 1"),
    UnknownNameError("unknown loss 'x'; known: a, b"),
    FileNotFoundError("data/x.parquet: no such file"),
    FloatingPointError("loss became nan at epoch 3"),
])
def test_input_errors_are_one_line_exit_2(exc, capsys, monkeypatch):
    monkeypatch.delenv("CONTRASTLAB_DEBUG", raising=False)
    assert run_stage(_raiser(exc)) == 2
    err = capsys.readouterr().err
    assert err == f"error: {exc.args[0]}\n"  # no quotes around a KeyError-like message, no traceback


@pytest.mark.parametrize("exc", [ValueError("a bug: shapes differ"), KeyError("missing_column"),
                                 TypeError("unexpected keyword"), IndexError("out of range")])
def test_other_errors_propagate_with_traceback(exc):
    with pytest.raises(type(exc)):
        run_stage(_raiser(exc))


def test_error_hierarchy_and_return_codes(tmp_path):
    assert issubclass(ParamsError, InputError) and issubclass(InputError, ValueError)
    assert issubclass(UnknownNameError, KeyError)  # existing ``except KeyError`` keeps working
    with pytest.raises(UnknownNameError, match="unknown loss 'nope'"):
        get_spec("nope")
    with pytest.raises(ParamsError):
        load_params(tmp_path / "missing.yaml")
    assert run_stage(lambda: None) == 0 and run_stage(lambda: 3) == 3


@pytest.mark.slow
def test_stage_bad_input_exit_2_without_traceback(tmp_path, stage_cmd):
    bad = tmp_path / "params.yaml"
    bad.write_text("graph: [not, a, mapping]\n")
    r = subprocess.run([sys.executable, *stage_cmd("train_graph@ntxent"), "--params", str(bad)],
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("error: ") and "Traceback" not in r.stderr
