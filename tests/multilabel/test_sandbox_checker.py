"""Issue 58, the checker's side (contrastlab.sandbox): its failures cannot be swallowed by the
test, the program's StopIteration cannot end the check's iteration, large replies are read in
linear time and the checker has a memory limit. (Type-strict sets and dict keys:
test_sandbox.py::test_equality_is_type_strict; asserts on effects: test_submissions.py.)"""

from __future__ import annotations

import pytest

from contrastlab.sandbox import run_sandboxed

from _bwrap import needs_bwrap

pytestmark = needs_bwrap

LIMITS = dict(timeout_s=10.0, assert_timeout_s=2.0, cpu_s=5, memory_mb=256, fsize_mb=1)
FRAME = "import os, struct, sys\n\ndef f():\n    d = {}\n    os.write(int(sys.argv[2]), struct.pack('>I', len(d)) + d)\n    return 1\n"


@pytest.mark.parametrize("handler", ["except:", "except BaseException:"])
@pytest.mark.parametrize("program,error", [
    # ignores its own alarm and hangs: the checker's alarm fires inside candidate()
    ("import signal, time\n\ndef f():\n    signal.setitimer(signal.ITIMER_REAL, 0)\n"
     "    time.sleep(30)\n", "Timeout"),
    (FRAME.format("b'[1]'"), "BadResponse"),  # a garbled reply
    ("import os, struct, sys\n\ndef f():\n    os.write(int(sys.argv[2]), struct.pack('>I', "
     "10 ** 9))\n    return 1\n", "BadResponse"),  # a reply over the size limit
], ids=["hang", "garbled", "oversized"])
def test_a_test_cannot_swallow_the_checkers_failures(handler, program, error):
    unit = f"def check(candidate):\n    try:\n        candidate()\n    {handler}\n        pass\n"
    r = run_sandboxed(program, [unit], "f", **LIMITS)
    assert r.tier == "FAIL" and r.errors == [error], r.errors


@pytest.mark.parametrize("raised", ["StopIteration", "E", "StopAsyncIteration"])
def test_stopiteration_from_the_program_is_a_runtimeerror(raised):
    program = f"class E(StopIteration):\n    pass\n\ndef f(x):\n    raise {raised}\n"
    units = ["def check(candidate):\n    assert all(map(candidate, [1, 2]))\n",
             "def check(candidate):\n    for a, b in zip(map(candidate, [1]), [2]):\n"
             "        assert a == b\n    assert not list(filter(candidate, [1]))\n"]
    r = run_sandboxed(program, units, "f", **LIMITS)
    assert r.tier == "FAIL" and r.errors == ["RuntimeError"] * 2, r.errors
    ok = ("def check(candidate):\n    try:\n        candidate(1)\n    except RuntimeError:\n"
          "        return\n    assert False\n")
    assert run_sandboxed(program, [ok], "f", **LIMITS).tier == "PASS"


def test_a_large_honest_reply_is_read_in_linear_time():
    """32 MiB took the old checker's quadratic read about 7 s; now well under the 3 s alarm."""
    r = run_sandboxed("def f():\n    return 'a' * (32 << 20)\n",
                      ["def check(candidate):\n    assert candidate() == 'a' * (32 << 20)\n"],
                      "f", **(LIMITS | dict(assert_timeout_s=3.0)))
    assert r.tier == "PASS", r.errors


def test_the_checker_has_a_memory_limit():
    """RLIMIT_AS of the checker is twice the server's; a reply that needs more memory to
    decode is a BadResponse (the test cannot catch it), not a pass."""
    unit = ("import resource\n\ndef check(candidate):\n    assert candidate() == 1\n"
            "    assert resource.getrlimit(resource.RLIMIT_AS)[0] == 2 * (64 << 20)\n")
    assert run_sandboxed("def f():\n    return 1\n", [unit], "f",
                         **(LIMITS | dict(memory_mb=64))).tier == "PASS"
    # 1.5 M empty lists: ~14 MB of JSON, ~350 MB once decoded; the checker may use 128 MiB
    frame = "b'{\"r\":[\"l\",[' + b'[\"l\",[]],' * 1499999 + b'[\"l\",[]]]],\"m\":[]}'"
    big = ("def check(candidate):\n    try:\n        assert len(candidate()) == 1500000\n"
           "    except BaseException:\n        pass\n")
    r = run_sandboxed(FRAME.format(frame), [big], "f", **(LIMITS | dict(memory_mb=64)))
    assert r.tier == "FAIL" and r.errors == ["BadResponse"], r.errors
