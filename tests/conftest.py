"""Shared pytest setup: offline, quiet, deterministic, small thread count."""

import os
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("CONTRASTLAB_MLFLOW", "0")  # tests that check MLflow turn it back on
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# one BLAS/OpenMP thread per process: the suite runs several pytest-xdist workers on few cores,
# and a second thread per worker only spins. Measured on 2 cores (the graph end-to-end test):
# 41 s wall and 61 CPU-s with the default two threads, 26 s and 26 CPU-s with one. Tests of
# thread counts set theirs explicitly; stage subprocesses inherit this.
for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
# every `mlflow server` the tests start runs without its job runner (a huey consumer process per
# server that no test uses, a few CPU-seconds each)
os.environ.setdefault("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "false")
# stages called from tests write their wall times here, not into the checkout's reports/timings
os.environ.setdefault("CONTRASTLAB_TIMINGS", tempfile.mkdtemp(prefix="contrastlab-timings-"))

import shlex  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def yaml_load(text: str):
    """``yaml.safe_load`` through libyaml's C loader where PyYAML has it (the same objects,
    about 9 times faster on dvc.yaml)."""
    import yaml

    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def yaml_dump(data) -> str:
    """``yaml.safe_dump(data, sort_keys=False)`` through libyaml's C emitter where PyYAML has it."""
    import yaml

    return yaml.dump(data, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), sort_keys=False)


def dvc_stage_cmd(stage: str, root: Path = ROOT, **subst: str) -> list[str]:
    """``[script, *args]`` of ``stage`` (``name`` or ``name@instance``) as its ``cmd`` in
    ``root``'s dvc.yaml gives them: the script as an absolute path, the stage's data paths
    relative (run it in a folder laid out like the repository). ``${key}``/``${item}`` become
    the instance, ``${item.<k>}`` the keyword argument ``k``. Stage scripts hold no paths of
    their own: dvc.yaml is where they are written."""
    base, _, inst = stage.partition("@")
    st = yaml_load((root / "dvc.yaml").read_text())["stages"][base]
    cmd = st.get("do", st)["cmd"].replace("${key}", inst).replace("${item}", inst)
    for k, v in subst.items():
        cmd = cmd.replace("${item.%s}" % k, str(v))
    argv = shlex.split(cmd)
    assert argv[0] == "python" and "${" not in cmd, cmd
    script = next(i for i, a in enumerate(argv) if a.endswith(".py"))
    return [str(root / argv[script]), *argv[script + 1:]]


@pytest.fixture
def stage_cmd():
    """:func:`dvc_stage_cmd` for a test: ``stage_cmd("build_multilabel@yeast")``."""
    return dvc_stage_cmd


def pytest_collection_modifyitems(config, items):
    """Order the modules for ``--dist loadscope`` (scripts/test.sh): the modules with the most
    ``slow`` tests first, the others in collection order; tests keep their order inside a module.
    A worker takes a whole module at a time (its module fixtures, a browser or a server, start
    once), in this order: the long end-to-end modules start while the short ones still fill the
    other workers, instead of ending the run on one busy worker and idle others (greedy list
    scheduling, longest jobs first)."""

    def module(item) -> str:
        return item.nodeid.split("::")[0]

    slow: dict[str, int] = {}
    for item in items:
        slow[module(item)] = slow.get(module(item), 0) + bool(item.get_closest_marker("slow"))
    items.sort(key=lambda item: -slow[module(item)])
