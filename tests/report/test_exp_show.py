"""``dvc exp show`` as docs/usage.md gives it: each metric declared once, compact views tested.

The test copies what ``dvc exp show`` reads (``dvc.yaml``, ``dvc.lock``, ``params.yaml``,
``.dvc/config`` and the declared metrics file ``reports/summary.json``) into a throw-away git
repository, commits it, changes one temperature in the workspace (so two rows differ), and runs
every ``dvc exp show`` line of docs/usage.md with ``--csv`` appended, to read the columns each prints.
"""

from __future__ import annotations

import csv
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def _dvc() -> str:
    exe = Path(sys.executable).with_name("dvc")
    return str(exe) if exe.exists() else "dvc"


def _readme_commands() -> list[list[str]]:
    """Every ``dvc exp show`` line of docs/usage.md's bash blocks, comment stripped, split."""
    text = (ROOT / "docs" / "usage.md").read_text(encoding="utf-8")
    cmds = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            if line.strip().startswith("dvc exp show"):
                args = shlex.split(line, comments=True)
                cmds.append(args)
    return cmds


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    if not (ROOT / "reports" / "summary.json").exists():
        pytest.skip("reports/summary.json absent: run `dvc repro report` first")
    repo = tmp_path_factory.mktemp("exp-show")
    for rel in ("dvc.yaml", "dvc.lock", "params.yaml", ".dvc/config", ".dvc/.gitignore",
                "reports/summary.json"):
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, repo / rel)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DVC_", "GIT_"))}
    env.update(DVC_NO_ANALYTICS="1", GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com")
    for args in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "copy"]):
        subprocess.run(args, cwd=repo, env=env, check=True, capture_output=True)
    # a second row that differs from HEAD in one knob and one metric
    params = yaml.safe_load((repo / "params.yaml").read_text())
    params["graph"]["variants"]["ntxent"]["temperature"] = 0.123
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    summary = (repo / "reports" / "summary.json").read_text()
    (repo / "reports" / "summary.json").write_text(
        re.sub(r'("ntxent": \{\s*"logreg_acc_mean": )[0-9.]+', r"\g<1>0.5", summary))
    return repo, env


_SHOWN: dict = {}


def _columns(repo_env, args: list[str]) -> tuple[list[str], list[list[str]]]:
    """The CSV header and rows ``dvc exp show`` prints with ``args`` in the copy; each command
    runs once per copy (the copy does not change after the fixture: three tests read the plain
    view, and each call parses the whole of dvc.lock)."""
    repo, env = repo_env
    key = (str(repo), tuple(args))
    if key not in _SHOWN:
        _SHOWN[key] = _exp_show(repo, env, args)
    return _SHOWN[key]


def _exp_show(repo, env, args: list[str]) -> tuple[list[str], list[list[str]]]:
    p = subprocess.run([_dvc(), *args[1:], "--csv"], cwd=repo, env=env, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, f"{args}: {p.stderr}"
    rows = list(csv.reader(io.StringIO(p.stdout)))
    return rows[0], rows[1:]


def test_readme_lists_four_compact_views():
    cmds = _readme_commands()
    assert len(cmds) == 4 and all(c[:3] == ["dvc", "exp", "show"] for c in cmds), cmds


def test_answer_view_is_narrow_and_first(repo):
    """The first view: each track's answer (difference to the strongest baseline and its p),
    a column pair per track of ``summary.json``'s ``answer``; also first in the plain view."""
    import json

    header, _ = _columns(repo, _readme_commands()[0])
    answer = json.loads((ROOT / "reports" / "summary.json").read_text()).get("answer")
    if not answer:
        pytest.skip("reports/summary.json has no answer yet: run `dvc repro report`")
    want = [f"answer.{t}.{k}" for t, h in answer.items() for k in ("delta", "p") if k in h]
    assert header[0] == "Experiment" and sorted(header[1:]) == sorted(want)
    assert len(header) <= 1 + 2 * len(answer)
    plain, _ = _columns(repo, ["dvc", "exp", "show"])
    metrics = [c for c in plain if c in set(_summary_metrics())]
    assert metrics[:len(want)] and all(c.startswith("answer.") for c in metrics[:len(want)])


def test_default_view_declares_each_metric_once(repo):
    header, _ = _columns(repo, ["dvc", "exp", "show"])
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    headline = params["report"]["headline"]
    metric_cols = [c for c in header if re.fullmatch(r"(graph|code|multilabel)\.[\w-]+\.\w+", c)
                   and ".variants." not in c and c.split(".")[-1] in
                   {m for ms in headline.values() for m in ms}]
    assert 0 < len(metric_cols) <= 60
    # not declared twice: a per-variant metrics file shows up only as the dependency column
    # of a stage that reads it (a column named by its path), never as metric columns
    # (``<file>:<metric>``)
    assert not [c for c in header if c.startswith("reports/metrics/") and not (ROOT / c).exists()]
    assert not any("time_s" in c for c in header)  # wall times are not metrics


def test_temperature_next_to_probe_accuracy(repo):
    """Every graph variant's temperature (params.yaml) beside the probe accuracy of each one
    that has run (summary.json): a variant just added by the recipe has only the former."""
    header, rows = _columns(repo, _readme_commands()[1])
    variants = list(yaml.safe_load((ROOT / "params.yaml").read_text())["graph"]["variants"])
    ran = [v for v in variants if f"graph.{v}.logreg_acc_mean" in set(_summary_metrics())]
    assert {"ntxent", "mixco", "mochi"} <= set(ran)
    assert sorted(header) == sorted(["Experiment"]
                                    + [f"graph.variants.{v}.temperature" for v in variants]
                                    + [f"graph.{v}.logreg_acc_mean" for v in ran])
    i_t = header.index("graph.variants.ntxent.temperature")
    i_m = header.index("graph.ntxent.logreg_acc_mean")
    assert {(r[i_t], r[i_m]) for r in rows if r[i_t] == "0.123"} == {("0.123", "0.5")}


def _leaves(obj: dict, prefix: str = "") -> list[str]:
    """Dotted names of the leaves of nested dicts as ``dvc exp show`` names its columns
    (a list is one value; an empty dict has no column)."""
    out = []
    for k, v in obj.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        out += _leaves(v, key) if isinstance(v, dict) else [key]
    return out


def _summary_metrics() -> list[str]:
    import json

    return _leaves(json.loads((ROOT / "reports" / "summary.json").read_text()))


def test_headline_metrics_of_every_track(repo):
    header, _ = _columns(repo, _readme_commands()[2])
    assert header[0] == "Experiment"
    tracks = {c.split(".")[0] for c in header[1:]}
    assert tracks == {"graph", "code", "multilabel"}
    assert all(re.search(r"\.(logreg_acc_mean|rank_at_10|mrr|macro_f1)$", c) for c in header[1:])
    # exactly the non-ablation headline metrics of summary.json, each once
    want = [m for m in _summary_metrics() if "/" not in m and not m.startswith("answer.")]
    assert sorted(header[1:]) == sorted(want)


def test_readme_states_the_plain_column_count(repo):
    """docs/usage.md's sentence "A plain `dvc exp show` prints N columns ... A of DVC's own, M
    headline metrics, all P keys of `params.yaml` and D files and folders" against a
    recount of what plain ``dvc exp show`` prints in the copy. The sentence describes the
    built project: while the report is out of date (a variant added and not run yet) the
    count is not checked; once it is rebuilt, the sentence must say the new count."""
    from _dvcstatus import skip_if_report_changed

    skip_if_report_changed(ROOT, "run `dvc repro`, then update the column count in docs/usage.md")
    header, _ = _columns(repo, ["dvc", "exp", "show"])
    text = " ".join((ROOT / "docs" / "usage.md").read_text(encoding="utf-8").split())
    m = re.search(r"A plain `dvc exp show` prints (\d+) columns.*?(\d+) of DVC's own.*?"
                  r"the (\d+) headline metrics.*?all (\d+) keys of `params.yaml`.*?"
                  r"the (\d+) files and folders", text)
    assert m, "docs/usage.md no longer states how many columns plain `dvc exp show` prints"
    total, own, n_metrics, n_params, n_deps = map(int, m.groups())
    metrics = set(_summary_metrics())
    params = set(_leaves(yaml.safe_load((repo[0] / "params.yaml").read_text())))
    got_own = [c for c in header if c in {"Experiment", "rev", "typ", "Created", "parent"}]
    got_metrics = [c for c in header if c in metrics]
    got_params = [c for c in header if c in params and c not in metrics]
    got_deps = [c for c in header if c not in {*got_own, *got_metrics, *got_params}]
    assert all("/" in c or c.endswith(".py") or (ROOT / c).is_dir() for c in got_deps), \
        got_deps  # paths only
    got = (len(header), len(got_own), len(got_metrics), len(got_params), len(got_deps))
    assert got == (total, own, n_metrics, n_params, n_deps), (
        f"docs/usage.md says {total} columns = {own} + {n_metrics} metrics + {n_params} params + "
        f"{n_deps} deps; dvc exp show prints {got[0]} = {got[1]} + {got[2]} + {got[3]} + "
        f"{got[4]}: update the numbers in docs/usage.md")


def test_only_changed_shows_the_changed_knob_and_metric(repo):
    header, _ = _columns(repo, _readme_commands()[3])
    assert "graph.variants.ntxent.temperature" in header
    assert "graph.ntxent.logreg_acc_mean" in header
    assert len(header) <= 10, header
