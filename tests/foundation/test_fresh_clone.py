"""The README's fresh-clone run times against their measurements and the pipeline as it is.

Each ``reports/fresh_clone*.json`` records one measured ``bash scripts/run.sh`` on a clean
clone without a DVC remote, on one machine type (per stage: wall and CPU seconds; which stages
DVC skipped). The README states each one's total, each track's share and what the same run
costs now: the measured total less the stages that ran for want of a DVC-cached output (one not
``cache: false`` in the measured commit's ``dvc.yaml``) and have none now, so a fresh clone no
longer reruns them."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import PurePosixPath

import pytest
import yaml

from contrastlab.utils import repo_root

ROOT = repo_root()
#: stage-name prefixes of each track's share of the run (the rest: data builds of the others)
CHAINS = {"code": ("fetch_repos", "extract_functions", "split_by_repo", "teacher_states",
                   "train_code", "default_code", "evaluate_code", "baselines_code", "hybrid_code",
                   "biencoder_cache", "train_biencoder", "hybrid_biencoder"),
          "finetune": ("finetune_",)}


RECORDS = sorted(p.name for p in (ROOT / "reports").glob("fresh_clone*.json"))


def _measured(name: str = "fresh_clone.json") -> dict:
    return json.loads((ROOT / "reports" / name).read_text(encoding="utf-8"))


def _cached(stage: str, stages: dict) -> bool:
    """Whether ``stage`` (``name`` or ``name@key``) has an output in the DVC cache."""
    body = stages[stage.split("@")[0]]
    body = body.get("do", body)
    for out in body.get("outs") or []:
        spec = next(iter(out.values())) if isinstance(out, dict) else None
        if not (isinstance(spec, dict) and spec.get("cache") is False):
            return True
    return False


def _minutes(seconds: float) -> int:
    return int(round(seconds / 60))


@pytest.mark.parametrize("record", RECORDS)
def test_readme_states_the_measured_fresh_clone_run(record):
    m = _measured(record)
    assert f"`reports/{record}`" in " ".join((ROOT / "README.md").read_text().split())
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
    then = yaml.safe_load(subprocess.run(["git", "show", f"{m['commit']}:dvc.yaml"], cwd=ROOT,
                                         capture_output=True, text=True, check=True).stdout)["stages"]
    assert m["exit_status"] == 0 and m["stages"], "the measured run did not finish"
    run = m["stages"]
    gone = [r for r in run if _cached(r["stage"], then)
            and r["stage"].split("@")[0] in stages and not _cached(r["stage"], stages)]
    saved = sum(r["wall_s"] for r in gone)
    now = m["total_wall_s"] - saved
    chain = {k: sum(r["wall_s"] for r in run if r["stage"].startswith(p))
             for k, p in CHAINS.items()}
    text = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    want = (f"took {_minutes(m['total_wall_s'])} minutes wall ({_minutes(m['total_cpu_s'])} "
            f"CPU-minutes; the environment {_minutes(m['env']['wall_s'])}, the code-retrieval "
            f"chain {_minutes(chain['code'])}, the fine-tuning chain {_minutes(chain['finetune'])})")
    assert want in text, f"README should say: {want}"
    want_now = (f"{len(gone)} stages of it ({_minutes(saved)} minutes) no longer rerun on a "
                f"fresh clone, so the same run now takes about {_minutes(now)} minutes")
    assert want_now in text or not gone, f"README should say: {want_now}"
    cpu_now = (m["total_cpu_s"] - sum(r["cpu_s"] or 0 for r in gone)) / 60  # null: not per stage
    want_cpu = (f"the CPU-minutes alone, about {round(cpu_now)} now, need {round(cpu_now / 2)} "
                f"minutes on 2 fully used cores")
    assert want_cpu in text, f"README should say: {want_cpu}"
    assert f"{m['env']['cpu_s'] / 60:.1f} CPU-minutes of pip" in text
    assert m["commit"][:7] in text
    top = sorted(run, key=lambda r: -r["wall_s"])[:3]
    assert all(f"`{r['stage']}`" in text and f"{r['wall_s'] / 60:.1f} min" in text for r in top)
    moved = m.get("not_byte_identical")
    if moved:  # the values the README says the run did not reproduce
        for committed, this_run in moved["test_rank_at_10"].values():
            assert f"{100 * committed:.2f} → {100 * this_run:.2f} %" in text
        a, b = moved["finetune_answer_delta"]
        assert f"answer moved {100 * a:.1f} → {100 * b:.1f} points" in text


def test_a_stage_without_cached_outputs_is_counted_as_saved(tmp_path):
    """The rule the README's 'now' figure rests on, on a hand-made dvc.yaml: only outputs
    marked ``cache: false`` keep a stage from rerunning on a fresh clone."""
    stages = yaml.safe_load(
        "a: {cmd: x, outs: [data/a]}\n"
        "b: {foreach: [1, 2], do: {cmd: y, outs: [{reports/b.json: {cache: false}}]}}\n"
        "c: {cmd: z, outs: [{reports/c.json: {cache: false}}, data/c]}\n")
    assert _cached("a", stages) and not _cached("b@1", stages) and _cached("c", stages)
    assert RECORDS and all(re.fullmatch(r"[0-9a-f]{40}", _measured(r)["commit"]) for r in RECORDS)


def test_the_lock_size_docs_usage_states():
    """docs/usage.md states the size of ``dvc.lock`` that the per-stage digests keep it to."""
    text = " ".join((ROOT / "docs/usage.md").read_text(encoding="utf-8").split())
    m = re.search(r"`dvc.lock` to about (\d+)k lines \(it was (\d+)k", text)
    assert m, "docs/usage.md no longer states the size of dvc.lock"
    lines = len((ROOT / "dvc.lock").read_text(encoding="utf-8").splitlines())
    assert abs(lines / 1000 - int(m[1])) <= 1.5, f"dvc.lock has {lines} lines, docs say {m[1]}k"
    assert int(m[2]) > 2 * int(m[1])


def test_every_uncached_output_is_committed():
    """A ``cache: false`` output keeps its stage from rerunning on a fresh clone only if git
    has it: none may be git-ignored or missing from the index (e.g. an output under ``data/``
    without its ``.gitignore`` exception), and each of the committed ``data/`` outputs is.
    The outputs are DVC's own reading of ``dvc.yaml`` (every ``foreach`` expanded)."""
    from dvc.repo import Repo

    with Repo(str(ROOT)) as repo:
        paths = [str(o.def_path) for s in repo.index.stages for o in s.outs if not o.use_cache]
    assert "data/code/functions.parquet" in paths and "data/finetune/humaneval" in paths
    assert any(p.startswith("data/code/models/") for p in paths)
    tracked = set(subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                                 check=True).stdout.splitlines())
    folders = {str(d) for f in tracked for d in PurePosixPath(f).parents}
    missing = [p for p in paths if p not in tracked and p not in folders]
    assert not missing, f"cache: false outputs that git does not track: {missing}"
