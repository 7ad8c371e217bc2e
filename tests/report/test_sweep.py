"""Sweep table (``python scripts/sweep.py``): hand-made ``dvc exp show --json``
in the shape DVC 3.67 prints (checked against a real ``dvc exp run -S`` in a throw-away
repository by the last test), rendered to ``reports/sweep.md``."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path

import pytest

from contrastlab.errors import InputError
from contrastlab.reporting.sweep import (differing_params, experiment_rows, render_sweep,
                                         sweep_tables)

ROOT = Path(__file__).resolve().parents[2]


def _script():
    import importlib.util

    spec = importlib.util.spec_from_file_location("sweep_cli", ROOT / "scripts" / "sweep.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


main = _script().main


def _entry(rev: str, name: str | None, temperature: float, trials: int,
           metrics: dict | None, error: dict | None = None) -> dict:
    """One ``revs`` / baseline entry as DVC 3.67 prints it."""
    return {
        "rev": rev, "name": name,
        "data": {
            "rev": rev, "timestamp": "2026-01-02T03:04:05",
            "params": {"params.yaml": {"data": {
                "graph": {"variants": {"ntxent": {"temperature": temperature},
                                       "mixco": {"temperature": 0.2}},
                          "tune": {"trials": trials}, "final": {"seeds": [0, 1, 2]}},
                "report": {"digits": 3}}}},
            "metrics": ({"reports/summary.json": {"data": metrics}} if metrics is not None
                        else {"reports/summary.json": {"error": {"type": "FileNotFoundError",
                                                                 "msg": "missing"}}}),
            "deps": {"stages/train_graph.py": {"hash": "0" * 32, "size": 10, "nfiles": None}},
            "outs": {}, "meta": {}},
        "error": error, "experiments": None}


def _summary(ntxent: float, mrr: float) -> dict:
    return {"graph": {"ntxent": {"logreg_acc_mean": ntxent}, "mixco": {"logreg_acc_mean": 0.79}},
            "code": {"infonce": {"mrr": mrr, "rank_at_10": 0.27}}}


def _exp(rev: str, name: str, executor: dict | None, **kw) -> dict:
    return {"revs": [_entry(rev, name, **kw)], "executor": executor, "name": name}


@pytest.fixture
def exp_show() -> list[dict]:
    """Workspace, baseline ``main`` and 3 experiments: done (another temperature), queued
    (another trial budget), failed (no metrics file)."""
    base = _entry("a" * 40, "main", 0.5, 8, _summary(0.8123, 0.1466))
    base["experiments"] = [
        _exp("b" * 40, "warm-t03", None, temperature=0.3, trials=8,
             metrics=_summary(0.8301, 0.1466)),
        _exp("c" * 40, "queued-t32", {"state": "queued", "name": "dvc-task", "local": {}},
             temperature=0.5, trials=32, metrics={}),
        _exp("d" * 40, "broken", None, temperature=0.7, trials=8, metrics=None,
             error={"type": "ReproductionError", "msg": "failed to reproduce 'train_graph'"}),
    ]
    ws = _entry("workspace", None, 0.3, 8, _summary(0.8301, 0.1466))
    ws["data"]["timestamp"] = None
    return [ws, base]


def test_rows_follow_dvc_order_and_states(exp_show):
    rows = experiment_rows(exp_show)
    assert [(r.name, r.kind, r.state) for r in rows] == [
        ("main", "baseline", "done"), ("warm-t03", "experiment", "done"),
        ("queued-t32", "experiment", "queued"), ("broken", "experiment", "failed")]
    assert rows[0].params["graph.variants.ntxent.temperature"] == 0.5
    assert rows[1].metrics["graph"]["ntxent"] == {"logreg_acc_mean": 0.8301}
    assert rows[2].metrics == {} and rows[3].metrics == {}  # queued: empty; failed: DVC error
    ws = experiment_rows(exp_show, include_workspace=True)
    assert [r.name for r in ws][0] == "workspace"


def test_only_differing_params_are_kept(exp_show):
    rows = experiment_rows(exp_show)
    assert differing_params(rows) == ["graph.variants.ntxent.temperature", "graph.tune.trials"]
    # a key present in one column only differs too
    rows[1].params["graph.new_knob"] = 1
    assert "graph.new_knob" in differing_params(rows)


def test_rendered_tables(exp_show):
    rows = experiment_rows(exp_show)
    settings, graph, code = sweep_tables(rows)
    cols = ["main", "warm-t03", "queued-t32", "broken"]
    assert settings.columns == ["setting", *cols]
    assert settings.rows == [["rev", "aaaaaaa", "bbbbbbb", "ccccccc", "ddddddd"],
                             ["state", "done", "done", "queued", "failed"],
                             ["graph.variants.ntxent.temperature", "0.5", "0.3", "0.5", "0.7"],
                             ["graph.tune.trials", "8", "8", "32", "8"]]
    # metrics with the baseline's report.digits (3); '-' where an experiment has none
    assert graph.title == "graph: logreg_acc_mean" and graph.columns == ["variant", *cols]
    assert graph.rows == [["ntxent", "0.812", "0.830", "-", "-"],
                          ["mixco", "0.790", "0.790", "-", "-"]]
    assert code.title == "code: mrr, rank_at_10"
    assert [r[0] for r in code.rows] == ["infonce mrr", "infonce rank_at_10"]
    md = render_sweep(rows, digits=2)
    assert "| ntxent | 0.81 | 0.83 | - | - |" in md
    assert "3 experiment(s)" in md and md.endswith("\n")
    assert md.index("### Settings") < md.index("### graph") < md.index("### code")


def test_repeated_names_get_their_rev(exp_show):
    base2 = copy.deepcopy(exp_show[1])
    base2["rev"] = base2["data"]["rev"] = "e" * 40
    for e in base2["experiments"]:
        e["revs"][0]["rev"] = "f" + e["revs"][0]["rev"][1:]
    rows = experiment_rows([*exp_show, base2])
    names = [r.name for r in rows]
    assert len(set(names)) == len(names) and "main (aaaaaaa)" in names


def test_no_experiments_writes_a_clear_page(exp_show, tmp_path, capsys):
    import json

    exp_show[1]["experiments"] = None
    src = tmp_path / "show.json"
    src.write_text(json.dumps(exp_show))
    out = tmp_path / "reports" / "sweep.md"
    assert main(["--json", str(src), "--out", str(out)]) == 0
    text = out.read_text()
    assert "No DVC experiments on main (aaaaaaa)" in text and "dvc exp run --queue" in text
    assert "###" not in text
    assert "no DVC experiments to compare" in capsys.readouterr().err


def test_main_writes_the_table(exp_show, tmp_path):
    import json

    src = tmp_path / "show.json"
    src.write_text(json.dumps(exp_show))
    out = tmp_path / "sweep.md"
    assert main(["--json", str(src), "--out", str(out), "--workspace"]) == 0
    text = out.read_text()
    assert "| rev | workspace | aaaaaaa |" in text
    assert not list(tmp_path.glob("*.tmp*"))  # atomic write leaves no temporary file


@pytest.mark.parametrize("bad, msg", [
    ({"rev": "x"}, "not the shape"),
    ([{"name": "main"}], "not the shape"),
    ([{"rev": "a" * 40, "data": {}, "experiments": [{"name": "e", "revs": []}]}], "revs"),
])
def test_bad_input_is_a_clear_error(bad, msg):
    with pytest.raises(InputError, match=msg):
        experiment_rows(bad)


def test_missing_json_file_and_repo(tmp_path, capsys):
    """A missing --json file fails the argument check (one error line, exit status 2); a
    missing --repo folder raises InputError (one line and exit 2 through run_stage)."""
    with pytest.raises(SystemExit) as e:
        main(["--json", str(tmp_path / "nope.json")])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no such --json file" in err[0], err
    with pytest.raises(InputError, match="no such folder"):
        main(["--repo", str(tmp_path / "nope")])


@pytest.mark.slow
def test_real_dvc_exp_show_shape(tmp_path):
    """DVC 3.x itself: a tiny stage, a baseline and one ``dvc exp run -S``; the sweep lists
    the experiment with its changed param and metric."""
    dvc = Path(sys.executable).with_name("dvc")
    if not dvc.exists():
        pytest.skip("dvc is not installed beside this interpreter")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DVC_", "GIT_"))}
    env.update(DVC_NO_ANALYTICS="1", GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com")
    (tmp_path / "params.yaml").write_text("graph:\n  variants:\n    ntxent: {temperature: 0.5}\n"
                                          "report:\n  digits: 3\n")
    (tmp_path / "make.py").write_text(
        "import json, os, yaml\n"
        "t = yaml.safe_load(open('params.yaml'))['graph']['variants']['ntxent']['temperature']\n"
        "os.makedirs('reports', exist_ok=True)\n"
        "json.dump({'graph': {'ntxent': {'logreg_acc_mean': round(1 - abs(t - 0.2), 4)}}},"
        " open('reports/summary.json', 'w'))\n")
    (tmp_path / "dvc.yaml").write_text(
        f"stages:\n  report:\n    cmd: {sys.executable} make.py\n    deps: [make.py]\n"
        "    params: [graph]\n    metrics:\n      - reports/summary.json:\n"
        "          cache: false\n")

    def run(*args: str) -> None:
        p = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=300)
        assert p.returncode == 0, f"{args}: {p.stdout}\n{p.stderr}"

    run("git", "init", "-q")
    run(str(dvc), "init", "-q")
    run(str(dvc), "repro", "-q")
    run("git", "add", "-A")
    run("git", "commit", "-qm", "base")
    run(str(dvc), "exp", "run", "-q", "-S", "graph.variants.ntxent.temperature=0.3", "-n", "t03")
    old = os.environ.copy()
    os.environ.update(env)
    try:
        assert main(["--repo", str(tmp_path)]) == 0
    finally:
        os.environ.clear()
        os.environ.update(old)
    text = (tmp_path / "reports" / "sweep.md").read_text()
    assert "1 experiment(s)" in text
    assert "| graph.variants.ntxent.temperature | 0.5 | 0.3 |" in text
    assert "| ntxent | 0.700 | 0.900 |" in text
