"""Your own submissions (contrastlab.data.submissions): tiering the shipped example in the
sandbox, the already-labelled path (nothing executed), the folder layout, and malformed
inputs stopping with an InputError that names the file and the row."""

from __future__ import annotations

import re
import shutil

import pandas as pd
import pytest

from contrastlab.data import submissions as subs
from contrastlab.data.humaneval import load_problems, tier_problem
from contrastlab.errors import InputError
from contrastlab.utils import repo_root

from _bwrap import needs_bwrap


EX = repo_root() / "examples" / "submissions"
LIMITS = dict(timeout_s=10.0, assert_timeout_s=5.0, cpu_s=5, memory_mb=256)


@needs_bwrap
def test_the_example_is_tiered_as_labelled():
    rows = subs.load_submissions(EX / "submissions.csv", EX / "tests", workers=2, **LIMITS)
    labelled = pd.read_csv(EX / "labelled.csv")
    assert [r["tier"] for r in rows] == labelled["tier"].tolist()
    assert [r["tier"] for r in rows] == ["PASS", "PARTIAL", "FAIL"] * 2
    by_id = {r["submission"]: r for r in rows}
    # sum(xs) is right where no number is negative
    assert by_id["sum_positive_sums_all"]["passed"] == [True, False, True, False]
    assert by_id["sum_positive_max"]["errors"][2] == "ValueError"  # max([])
    # 1/0 instead of True/False: type-strict == fails every assertion
    assert by_id["is_palindrome_returns_int"]["errors"] == ["AssertionError"] * 4
    assert [(r["problem"], r["variant"]) for r in rows] == [
        ("sum_positive", 0), ("sum_positive", 1), ("sum_positive", 2),
        ("is_palindrome", 0), ("is_palindrome", 1), ("is_palindrome", 2)]
    assert all(tuple(r) == subs.ROW_KEYS and r["n_assertions"] == 4 for r in rows)


@needs_bwrap
def test_rows_have_the_humaneval_builder_keys():
    he = tier_problem(load_problems(max_problems=1)[0], 0, **LIMITS)[0]
    assert set(he) | {"submission"} == set(subs.ROW_KEYS)


def test_labelled_rows_are_used_without_execution(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("labelled rows must not be executed")

    monkeypatch.setattr(subs, "run_sandboxed", boom)
    rows = subs.load_submissions(EX / "labelled.csv")
    assert [r["tier"] for r in rows] == ["PASS", "PARTIAL", "FAIL"] * 2
    assert all(r["status"] == "labelled" and r["n_assertions"] == 0 and r["passed"] == []
               for r in rows)
    assert rows[0]["submission"] == "row1" and "sum(x for x in xs if x > 0)" in rows[0]["source"]
    y, names = subs.label_matrix(rows)
    assert names == ["problem_sum_positive", "problem_is_palindrome", "tier_PASS",
                     "tier_PARTIAL", "tier_FAIL"]
    assert y.dtype.name == "uint8" and y.shape == (6, 5) and (y.sum(1) == 2).all()
    assert y[4].tolist() == [0, 1, 0, 1, 0]  # is_palindrome, PARTIAL


def test_parquet_reads_like_csv(tmp_path):
    pq = tmp_path / "labelled.parquet"
    pd.read_csv(EX / "labelled.csv").to_parquet(pq)
    assert subs.read_submissions(pq) == subs.read_submissions(EX / "labelled.csv")


@needs_bwrap
def test_folder_layout(tmp_path):
    df = pd.read_csv(EX / "submissions.csv")
    for rec in df.itertuples():
        (tmp_path / "subs" / rec.problem).mkdir(parents=True, exist_ok=True)
        (tmp_path / "subs" / rec.problem / f"{rec.submission}.py").write_text(rec.code)
    (tmp_path / "subs" / "__pycache__").mkdir()
    (tmp_path / "subs" / "__pycache__" / "x.py").write_text("junk")
    rows = subs.load_submissions(tmp_path / "subs", EX / "tests", **LIMITS)
    got = {r["submission"]: r["tier"] for r in rows}
    assert got == {"is_palindrome/is_palindrome_case_sensitive.py": "PARTIAL",
                   "is_palindrome/is_palindrome_correct.py": "PASS",
                   "is_palindrome/is_palindrome_returns_int.py": "FAIL",
                   "sum_positive/sum_positive_correct.py": "PASS",
                   "sum_positive/sum_positive_max.py": "FAIL",
                   "sum_positive/sum_positive_sums_all.py": "PARTIAL"}


def _csv(tmp_path, text: str):
    f = tmp_path / "subs.csv"
    f.write_text(text)
    return f


@pytest.mark.parametrize("text,match", [
    ("problem,source\np,def f(): pass\n", r"missing column\(s\) \['code'\]"),
    ("problem,code\np,def f(): pass\np,   \n", r"row 2: empty code"),
    ("problem,code\np,x = 1\nbad name,x = 2\n", r"row 2: problem 'bad name'"),
    ("problem,code\n,x = 1\n", r"row 1: problem '' is empty"),
    ("problem,tier,code\np,PASS,x = 1\np,PASS,x = 1\np,good,x = 1\n",
     r"row 3: tier 'good' is not one of"),
    ("problem,code\n", r"no rows"),
    ('problem,code\np,"x = 1\n', r"cannot read submissions"),
])
def test_malformed_tables_name_the_file_and_row(tmp_path, text, match):
    f = _csv(tmp_path, text)
    with pytest.raises(InputError, match=match) as e:
        subs.read_submissions(f)
    assert str(e.value).startswith(f"{f}:")


def test_non_text_parquet_cell_names_the_row(tmp_path):
    f = tmp_path / "subs.parquet"
    pd.DataFrame({"problem": ["p", "p"], "code": ["x = 1", None]}).to_parquet(f)
    with pytest.raises(InputError, match=rf"^{re.escape(str(f))}: row 2: column 'code' is missing"):
        subs.read_submissions(f)
    pd.DataFrame({"problem": [7, 8], "code": ["x = 1", "x = 2"]}).to_parquet(f)
    with pytest.raises(InputError, match=rf"^{re.escape(str(f))}: row 1: column 'problem' holds"):
        subs.read_submissions(f)


def test_bad_paths_and_test_files(tmp_path):
    with pytest.raises(InputError, match="no such submissions"):
        subs.read_submissions(tmp_path / "missing.csv")
    with pytest.raises(InputError, match=r"must be \.csv, \.parquet"):
        subs.read_submissions(_csv(tmp_path, "").rename(tmp_path / "subs.txt"))
    with pytest.raises(InputError, match="need a folder of test files"):
        subs.load_submissions(EX / "submissions.csv")
    tests = tmp_path / "tests"
    shutil.copytree(EX / "tests", tests)
    (tests / "is_palindrome.py").unlink()
    TP = re.escape(str(tests / "is_palindrome.py"))
    with pytest.raises(InputError, match=rf"^{TP}: no test file"):
        subs.load_submissions(EX / "submissions.csv", tests)
    (tests / "is_palindrome.py").write_text("def check(candidate):\n"
                                            "    assert candidate('') == 1\n")
    with pytest.raises(InputError, match=rf"^{TP}: needs .*ENTRY_POINT"):
        subs.read_tests(tests, ["is_palindrome"])
    (tests / "is_palindrome.py").write_text("ENTRY_POINT = 'f'\ndef check(candidate:\n")
    with pytest.raises(InputError, match=rf"^{TP}: cannot read the test"):
        subs.read_tests(tests, ["is_palindrome"])
    (tests / "is_palindrome.py").write_text("ENTRY_POINT = 'f'\ndef check(candidate):\n    pass\n")
    with pytest.raises(InputError, match="no assert that calls candidate"):
        subs.read_tests(tests, ["is_palindrome"])
    units, entry = subs.read_tests(EX / "tests", ["sum_positive"])["sum_positive"]
    assert entry == "sum_positive" and len(units) == 4


def test_label_matrix_rejects_an_unknown_tier():
    rows = subs.load_submissions(EX / "labelled.csv")
    rows[1]["tier"] = "MAYBE"
    with pytest.raises(InputError, match=r"rows\[1\] \(submission 'row2'\): tier 'MAYBE'"):
        subs.label_matrix(rows)


def test_empty_folder_and_empty_file_in_a_folder(tmp_path):
    (tmp_path / "subs" / "p").mkdir(parents=True)
    with pytest.raises(InputError, match="no submissions"):
        subs.read_submissions(tmp_path / "subs")
    bad = tmp_path / "subs" / "p" / "a.py"
    bad.write_text("  \n")
    with pytest.raises(InputError, match=rf"^{re.escape(str(bad))}: empty"):
        subs.read_submissions(tmp_path / "subs")


EFFECTS = '''ENTRY_POINT = "sort_in_place"


def check(candidate):
    x = [3, 1, 2]
    candidate(x)
    assert x == [1, 2, 3]
    assert True
    y = [2, 1]
    assert candidate(y) is None
    assert y == [1, 2]
'''


def test_asserts_on_the_programs_effects_are_kept_in_order(tmp_path):
    """Issue 58: an assert without a candidate call after one is kept, run after everything
    before it (earlier asserts as expressions); ``assert True`` is dropped."""
    (tmp_path / "sort.py").write_text(EFFECTS)
    units, _ = subs.read_tests(tmp_path, ["sort"])["sort"]
    assert len(units) == 3 and all(u.count("assert ") == 1 for u in units)
    assert units[0].rstrip().endswith("candidate(x)\n    assert x == [1, 2, 3]")
    last = units[2].split("def check(candidate):")[1].split("\n")
    assert [ln.strip() for ln in last if ln.strip()] == [
        "x = [3, 1, 2]", "candidate(x)", "x == [1, 2, 3]", "True", "y = [2, 1]",
        "candidate(y) is None", "assert y == [1, 2]"]


def test_an_assert_that_tests_nothing_of_the_program_is_refused(tmp_path):
    (tmp_path / "p.py").write_text("ENTRY_POINT = 'f'\n\ndef check(candidate):\n    x = [1]\n"
                                   "    assert x == [1]\n    assert candidate(x) == 1\n")
    with pytest.raises(InputError, match=r"p\.py: line 5: assert tests nothing of the program"):
        subs.read_tests(tmp_path, ["p"])


@needs_bwrap
def test_a_no_op_in_place_sort_does_not_pass(tmp_path):
    (tmp_path / "sort.py").write_text(EFFECTS)
    rows = [{"problem": "sort", "code": f"def sort_in_place(x):\n    {body}\n", "tier": None,
             "submission": str(i)} for i, body in enumerate(
        ["x.sort()", "pass", "x[:] = [True, 2, 3][:len(x)]"])]
    out = subs.tier_submissions(rows, tmp_path, **LIMITS)
    assert [r["passed"] for r in out] == [[True] * 3, [False, True, False], [False, True, False]]
    assert [r["tier"] for r in out] == ["PASS", "PARTIAL", "PARTIAL"]
