"""HumanEval tiering: assertion splitting, mutation variants, and the sandbox on hand-written
variants of HumanEval/0 (has_close_elements)."""

import pytest

from concurrent.futures import ThreadPoolExecutor

from contrastlab.data.humaneval import (load_problems, make_variants, run_sandboxed,
                                        split_assertions, tier_of, tier_problem)

SANDBOX = dict(timeout_s=3.0, assert_timeout_s=0.5, cpu_s=2, memory_mb=256, fsize_mb=1)


@pytest.fixture(scope="module")
def problem():
    return load_problems(max_problems=1)[0]


def test_split_assertions(problem):
    units = split_assertions(problem.test)
    assert len(units) == 7  # HumanEval/0 has seven asserts
    assert all(u.count("assert ") == 1 and "def check(candidate)" in u for u in units)
    # setup statements are kept in front of later asserts; `assert True` is dropped
    src = "def check(candidate):\n    import math\n    assert True\n    x = 2\n    assert candidate(x) == 4\n"
    (u,) = split_assertions(src)
    assert "import math" in u and "x = 2" in u and "assert True" not in u


CORRECT_REWRITE = '''
def has_close_elements(numbers, threshold):
    s = sorted(numbers)
    return any(b - a < threshold for a, b in zip(s, s[1:]))
'''
# Right on the asserts with a True answer, wrong on the False ones: some pass, some fail.
PARTIAL = '''
def has_close_elements(numbers, threshold):
    return len(numbers) > 0
'''
INFINITE = '''
def has_close_elements(numbers, threshold):
    while True:
        pass
'''
MEMORY_BOMB = '''
def has_close_elements(numbers, threshold):
    x = [0] * (10 ** 10)
    return True
'''


def test_tiers_of_hand_written_variants(problem):
    units = split_assertions(problem.test)
    ok = run_sandboxed(CORRECT_REWRITE, units, problem.entry_point, **SANDBOX)
    assert ok.tier == "PASS" and ok.status == "ok" and all(ok.passed)
    part = run_sandboxed(PARTIAL, units, problem.entry_point, **SANDBOX)
    assert part.tier == "PARTIAL"
    assert part.passed == [True, False, True, False, True, True, False]
    assert set(e for e, p in zip(part.errors, part.passed) if not p) == {"AssertionError"}


@pytest.mark.slow
def test_infinite_loop_and_memory_bomb_fail_without_hanging(problem):
    units = split_assertions(problem.test)
    loop = run_sandboxed(INFINITE, units, problem.entry_point, **SANDBOX)
    assert loop.tier == "FAIL" and not any(loop.passed)
    # stopped by the per-assertion alarm, the CPU limit or the wall-clock kill
    assert set(loop.errors) <= {"Timeout", "NotRun"} and loop.status in {"ok", "timeout", "killed:SIGKILL", "killed:SIGXCPU"}
    bomb = run_sandboxed(MEMORY_BOMB, units, problem.entry_point, **SANDBOX)
    assert bomb.tier == "FAIL" and "MemoryError" in bomb.errors


def test_canonical_passes_and_mutants_are_distinct(problem):
    vs = make_variants(problem.program, 6, seed=0)
    assert vs[0]["mutation"] == "canonical" and len(vs) == 7
    assert len({v["source"] for v in vs}) == len(vs)
    units = split_assertions(problem.test)
    r = run_sandboxed(vs[0]["source"], units, problem.entry_point, **SANDBOX)
    assert r.tier == "PASS"
    assert make_variants(problem.program, 6, seed=0) == vs  # seeded


def test_tier_of():
    assert tier_of([True, True]) == "PASS"
    assert tier_of([True, False]) == "PARTIAL"
    assert tier_of([False, False]) == "FAIL"
    assert tier_of([]) == "FAIL"


def test_tests_see_the_prompt_helpers():
    """HumanEval/32, 38, 50 call helpers defined in the prompt (poly, encode_cyclic, ...)
    from check(); the check takes them from the reference (the canonical program), never
    from the program under test (issue 38; test_sandbox_attacks.py)."""
    probs = {p.task_id: p for p in load_problems(max_problems=51)}
    for tid in ("HumanEval/32", "HumanEval/38", "HumanEval/50"):
        p = probs[tid]
        r = run_sandboxed(make_variants(p.program, 0)[0]["source"], split_assertions(p.test),
                          p.entry_point, reference=p.program, **SANDBOX)
        assert r.tier == "PASS", (tid, r.errors)


@pytest.mark.slow
def test_every_canonical_program_passes():
    """All 164 canonical programs PASS under the checker (type-strict ==, sets and dict keys
    included; StopIteration as RuntimeError; the checker's memory limit). Generous limits:
    this is about the checker's rules, not the machine's load."""
    probs = load_problems()
    loose = dict(timeout_s=30.0, assert_timeout_s=15.0, cpu_s=10, memory_mb=256, fsize_mb=1)
    with ThreadPoolExecutor(2) as pool:
        rows = list(pool.map(lambda p: tier_problem(p, 0, **loose)[0], probs))
    assert len(rows) == 164 and [(r["task_id"], r["errors"]) for r in rows
                                 if r["tier"] != "PASS"] == []
