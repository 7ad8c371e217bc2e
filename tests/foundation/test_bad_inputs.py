"""Issue 38: every user-facing entry point answers a bad input with one line and exit 2.

Entry points: every stage script (its ``--params`` file), ``python -m contrastlab.query``
(``--code``, ``--codes``, ``--index``, ``-k``) and the scripts (``preset.py``,
``sweep.py --json``, ``stage_deps.py --root``, ``vendor_vega.py``). Bad inputs: an empty
file, a syntax error, a binary file, a directory, a huge file, a wrong encoding, a bad
``-k``. Each case runs the entry point's ``main`` in-process (as ``run_stage`` does for the
script) and checks: exit status 2, stderr is exactly one line starting with ``error:``, no
traceback; a few run as real subprocesses too.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from contrastlab.cli import MAX_TEXT_BYTES, run_stage
from contrastlab.utils import repo_root

ROOT = repo_root()
STAGES = sorted(p.stem for p in (ROOT / "stages").glob("*.py") if not p.stem.startswith("_"))


def make_bad(tmp_path: Path, kind: str, syntax: bytes) -> Path:
    """A file (or folder) of one bad kind; ``syntax`` is a syntax error in the file's language."""
    p = tmp_path / f"bad_{kind}.txt"
    if kind == "empty":
        p.write_bytes(b"")
    elif kind == "blank":
        p.write_bytes(b"  \n\n\t\n")
    elif kind == "syntax":
        p.write_bytes(syntax)
    elif kind == "binary":
        p.write_bytes(b"PK\x03\x04\x00\x00\x08\x00" + bytes(range(256)))
    elif kind == "directory":
        p.mkdir()
    elif kind == "huge":
        with open(p, "wb") as fh:  # sparse: no time or disk spent
            fh.truncate(MAX_TEXT_BYTES + 1)
    elif kind == "encoding":
        p.write_bytes("title: caf\u00e9 na\u00efve\n".encode("latin-1"))
    elif kind == "missing":
        pass
    else:  # pragma: no cover
        raise ValueError(kind)
    return p


KINDS = ["empty", "blank", "syntax", "binary", "directory", "huge", "encoding", "missing"]


def load_script(path: Path):
    spec = importlib.util.spec_from_file_location(f"_entry_{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def run_main(main, argv, capsys) -> tuple[int, str]:
    """Exit status and stderr of ``main(argv)`` run as a script runs it (``run_stage``)."""
    capsys.readouterr()
    try:
        rc = run_stage(lambda: main(argv))
    except SystemExit as e:  # argparse usage errors
        rc = e.code
    return rc, capsys.readouterr().err


def assert_one_line(rc, err, *words):
    assert rc == 2, (rc, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), err
    assert "Traceback" not in err
    low = lines[0].lower()
    assert any(w in low for w in words), (words, err)


#: what the message must mention for each kind (any of the words)
WORDS = {"empty": ("empty",), "blank": ("empty",), "syntax": ("yaml", "python", "json"),
         "binary": ("binary", "nul"), "directory": ("directory", "folder"),
         "huge": ("mib", "limit"), "encoding": ("utf-8",), "missing": ("no such", "not found")}


@pytest.fixture(scope="module")
def stage_modules():
    sys.path.insert(0, str(ROOT / "stages"))
    try:
        yield {name: load_script(ROOT / "stages" / f"{name}.py") for name in STAGES}
    finally:
        sys.path.remove(str(ROOT / "stages"))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("stage", STAGES)
def test_every_stage_answers_a_bad_params_file(stage, kind, stage_modules, tmp_path, capsys):
    bad = make_bad(tmp_path, kind, b"graph:\n  lr: [0.1, 0.2\n  epochs: 3\n")
    rc, err = run_main(stage_modules[stage].main, ["--params", str(bad)], capsys)
    assert_one_line(rc, err, *WORDS[kind])
    assert str(bad) in err


def test_a_params_file_that_fails_the_schema_names_the_key(stage_modules, tmp_path, capsys):
    """Past the file checks, the schema's own error (ParamsError) is still exit 2."""
    p = tmp_path / "params.yaml"
    p.write_text("graph:\n  no_such_key_here: 1\n", encoding="utf-8")
    rc, err = run_main(stage_modules["validate_params"].main,
                       ["--params", str(p), "--out", str(tmp_path / "o.json"),
                        "--loss-code", str(tmp_path / "lc.json")], capsys)
    assert rc == 2 and "no_such_key_here" in err and "Traceback" not in err


# ------------------------------------------------------------------ python -m contrastlab.query
@pytest.fixture
def index_dir(tmp_path):
    d = tmp_path / "index"
    d.mkdir()
    return d


@pytest.mark.parametrize("kind", KINDS)
def test_query_code_file(kind, index_dir, tmp_path, capsys):
    from contrastlab.query import main

    bad = make_bad(tmp_path, kind, b"def f(:\n    return 1\n")
    rc, err = run_main(main, ["--index", str(index_dir), "--code", str(bad)], capsys)
    assert_one_line(rc, err, *WORDS[kind])


@pytest.mark.parametrize("kind", KINDS)
def test_query_codes_file(kind, index_dir, tmp_path, capsys):
    from contrastlab.query import main

    bad = make_bad(tmp_path, kind, b'[{"code": "def f(): pass"},')
    bad = bad.rename(bad.with_suffix(".json")) if bad.exists() else bad
    rc, err = run_main(main, ["--index", str(index_dir), "--codes", str(bad)], capsys)
    assert_one_line(rc, err, *WORDS[kind])


@pytest.mark.parametrize("records,words", [
    ('{"code": "def f(:\\n  pass"}', ("python", "line 1")),
    ('{"code": "   "}', ("empty",)),
    ('{"id": 3}', ("code",)),
    ('"just a string"', ("code",)),
])
def test_query_codes_records(records, words, index_dir, tmp_path, capsys):
    from contrastlab.query import main

    p = tmp_path / "subs.jsonl"
    p.write_text('{"code": "def g():\\n    return 1\\n"}\n' + records + "\n", encoding="utf-8")
    rc, err = run_main(main, ["--index", str(index_dir), "--codes", str(p)], capsys)
    assert_one_line(rc, err, *words)
    assert "record 1" in err


@pytest.mark.parametrize("k", ["0", "-3", "x", "2.5", "", "10001", "1e3"])
def test_query_bad_k(k, index_dir, tmp_path, capsys):
    from contrastlab.query import main

    code = tmp_path / "a.py"
    code.write_text("def f():\n    return 1\n", encoding="utf-8")
    rc, err = run_main(main, ["--index", str(index_dir), "--code", str(code), "-k", k], capsys)
    assert_one_line(rc, err, "-k")


@pytest.mark.parametrize("what", ["missing", "file", "empty folder"])
def test_query_bad_index(what, tmp_path, capsys):
    from contrastlab.query import main

    code = tmp_path / "a.py"
    code.write_text("def f():\n    return 1\n", encoding="utf-8")
    idx = tmp_path / "idx"
    if what == "file":
        idx.write_text("x")
    elif what == "empty folder":
        idx.mkdir()
    rc, err = run_main(main, ["--index", str(idx), "--code", str(code)], capsys)
    assert_one_line(rc, err, "index", "folder")


# ------------------------------------------------------------------ scripts/
@pytest.mark.parametrize("kind", KINDS)
def test_preset_script(kind, tmp_path, capsys):
    mod = load_script(ROOT / "scripts" / "preset.py")
    bad = make_bad(tmp_path, kind, b"graph: {lr: [1,\n")
    params = tmp_path / "params.yaml"
    params.write_text("graph: {}\n", encoding="utf-8")
    rc, err = run_main(mod.main, [str(bad), "--params", str(params)], capsys)
    assert_one_line(rc, err, *WORDS[kind])
    assert params.read_text(encoding="utf-8") == "graph: {}\n"  # untouched
    rc, err = run_main(mod.main, [str(params), "--params", str(bad)], capsys)
    assert_one_line(rc, err, *WORDS[kind])


@pytest.mark.parametrize("kind", KINDS)
def test_sweep_script_json(kind, tmp_path, capsys):
    mod = load_script(ROOT / "scripts" / "sweep.py")
    bad = make_bad(tmp_path, kind, b'{"a": [1, 2')
    rc, err = run_main(mod.main, ["--json", str(bad), "--out", str(tmp_path / "s.md")], capsys)
    assert_one_line(rc, err, *WORDS[kind])
    assert not (tmp_path / "s.md").exists()


@pytest.mark.parametrize("root", ["missing", "file", "folder without dvc.yaml"])
def test_stage_deps_script_root(root, tmp_path, capsys):
    mod = load_script(ROOT / "scripts" / "stage_deps.py")
    p = tmp_path / "r"
    if root == "file":
        p.write_text("x")
    elif root != "missing":
        p.mkdir()
    rc, err = run_main(mod.main, ["--root", str(p)], capsys)
    assert_one_line(rc, err, "dvc.yaml")


@pytest.mark.parametrize("what", ["missing", "file", "empty folder"])
def test_vendor_vega_script(what, tmp_path):
    p = tmp_path / "npm"
    if what == "file":
        p.write_text("x")
    elif what == "empty folder":
        p.mkdir()
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "vendor_vega.py"), str(p)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
    assert out.stderr.startswith("error:") and "Traceback" not in out.stderr


# ------------------------------------------------------------------ as real processes
@pytest.mark.parametrize("argv", [
    ["stages/finetune_data.py", "--params", "{dir}", "--out", "x", "--report", "y"],
    ["stages/train_graph.py", "--params", "{bin}"],
    ["-m", "contrastlab.query", "--index", "{dir}", "--code", "{bin}"],
    ["-m", "contrastlab.query", "--index", "{dir}", "--code", "{py}", "-k", "0"],
])
def test_real_processes_exit_2_with_one_line(argv, tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "b").write_bytes(b"\x00\x01")
    (tmp_path / "p.py").write_text("def f(:\n")
    argv = [a.format(dir=tmp_path / "d", bin=tmp_path / "b", py=tmp_path / "p.py") for a in argv]
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    out = subprocess.run([sys.executable, *argv], cwd=ROOT, capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.returncode == 2, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and out.stderr.startswith("error:")
