"""The sandbox (contrastlab.sandbox) against hostile programs: issue 13's twelve attacks and
issue 24's (ending early, fake equality, stealing the harness's key); issue 38's further
attacks (memory, /proc, fds, ptrace, shadowed helpers) are in test_sandbox_attacks.py.

Each test runs a program whose assertion passes only if its attack worked, then checks on
the trusted side that the attack had no effect: nothing read or written outside, no
connection, the test process and a sentinel process alive, no sandboxed process left after
the call, forged results ignored, an early exit or a fake-equal object never counted as a
pass. Skipped (with bubblewrap's own message) only where bubblewrap cannot start; CI
installs it (.ci/run).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
import uuid

import pytest

from contrastlab import sandbox as sbx
from contrastlab.sandbox import SandboxUnavailable, run_sandboxed, sandbox_mode
from contrastlab.utils import repo_root

from _bwrap import needs_bwrap


PWNED = "def check(candidate):\n    assert candidate() == 'pwned'\n"
LIMITS = dict(timeout_s=10.0, assert_timeout_s=5.0, cpu_s=5, memory_mb=256, fsize_mb=1)


def attack(body: str, n_assertions: int = 1, **kw) -> tuple[sbx.RunResult, str]:
    """Run ``def f(): <body>`` against assertions ``f() == 'pwned'``; returns (result, tag)."""
    tag = f"sbxtest-{uuid.uuid4().hex}"
    program = "import os, sys, time, socket, signal\n\ndef f():\n" + textwrap.indent(
        textwrap.dedent(body), "    ")
    r = run_sandboxed(program, [PWNED] * n_assertions, "f", tag=tag, **(LIMITS | kw))
    return r, tag


def processes_with(tag: str) -> list[int]:
    """Host pids whose command line contains ``tag`` (every sandboxed process carries it)."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/cmdline", "rb") as fh:
                    if tag.encode() in fh.read():
                        out.append(int(d))
            except OSError:
                continue
    return out


@needs_bwrap
def test_a_plain_program_passes_and_wrong_one_fails():
    """The attack tests below mean something: the same harness passes an honest program."""
    r, _ = attack("return 'pwned'", n_assertions=2)
    assert r.mode == "bwrap" and r.tier == "PASS" and r.status == "ok"
    r, _ = attack("return 'no'")
    assert r.tier == "FAIL" and r.errors == ["AssertionError"]


@needs_bwrap
def test_1_cannot_read_etc_hostname():
    assert os.path.exists("/etc/hostname") or os.path.exists("/etc/passwd")
    r, _ = attack("""
        for p in ('/etc/hostname', '/etc/passwd'):
            try:
                if open(p).read():
                    return 'pwned'
            except OSError:
                pass
        return 'no'
    """)
    assert r.tier == "FAIL"


@needs_bwrap
def test_2_cannot_read_a_secret_under_tmp(tmp_path):
    secret = tmp_path / "secret.txt"  # pytest's tmp_path lives under /tmp
    secret.write_text("hunter2")
    r, _ = attack(f"return 'pwned' if 'hunter2' in open({str(secret)!r}).read() else 'no'")
    assert r.tier == "FAIL" and r.errors == ["FileNotFoundError"]


@needs_bwrap
def test_3_cannot_read_the_project_or_list_home():
    params = repo_root() / "params.yaml"
    assert params.exists()
    r, _ = attack(f"""
        if os.path.exists({str(params)!r}):
            return 'pwned'
        if set(os.listdir('/')) - {{'usr', 'bin', 'sbin', 'lib', 'lib32', 'lib64', 'libx32',
                                   'etc', 'proc', 'dev', 'tmp', 'root', 'home', 'opt'}}:
            return 'pwned'
        return 'no'
    """)
    assert r.tier == "FAIL"


@needs_bwrap
def test_4_cannot_write_outside(tmp_path):
    targets = [tmp_path / "escaped.txt", repo_root() / "escaped_by_sandbox.txt"]
    r, _ = attack(f"""
        n = 0
        for p in {[str(t) for t in targets]!r} + ['/usr/escaped', '/escaped']:
            try:
                open(p, 'w').write('x')
                n += 1
            except OSError:
                pass
        return 'pwned' if n else 'no'
    """)
    assert r.tier == "FAIL"
    assert not any(t.exists() for t in targets)


@needs_bwrap
def test_5_loopback_connection_refused():
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    srv.settimeout(0.2)
    port = srv.getsockname()[1]
    got: list[bytes] = []
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                c, _ = srv.accept()
            except OSError:
                continue
            got.append(c.recv(100))
            c.close()

    th = threading.Thread(target=serve, daemon=True)
    th.start()
    try:
        # the listener works from this (host) side
        with socket.create_connection(("127.0.0.1", port), timeout=2) as c:
            c.sendall(b"host")
        time.sleep(0.3)
        assert got == [b"host"]
        r, _ = attack(f"""
            s = socket.create_connection(('127.0.0.1', {port}), timeout=2)
            s.sendall(b'exfiltrated')
            return 'pwned'
        """)
        time.sleep(0.5)
    finally:
        stop.set()
        th.join(2)
        srv.close()
    assert r.tier == "FAIL" and r.errors[0] in {"ConnectionRefusedError", "OSError", "TimeoutError"}
    assert got == [b"host"]


@needs_bwrap
def test_6_parent_environment_is_out_of_reach(monkeypatch):
    monkeypatch.setenv("CONTRASTLAB_TEST_SECRET", "s3cr3t-value")
    r, _ = attack("""
        if 's3cr3t' in repr(os.environ):
            return 'pwned'
        for p in os.listdir('/proc'):
            if p.isdigit() or p == str(os.getppid()):
                try:
                    if b's3cr3t' in open(f'/proc/{p}/environ', 'rb').read():
                        return 'pwned'
                except OSError:
                    pass
        try:
            if b's3cr3t' in open(f'/proc/{os.getppid()}/environ', 'rb').read():
                return 'pwned'
        except OSError:
            pass
        return 'no'
    """)
    assert r.tier == "FAIL"


@needs_bwrap
def test_7_cannot_kill_the_parent_or_any_host_process():
    sentinel = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        r, _ = attack(f"""
            for pid in (os.getppid(), {os.getpid()}, {sentinel.pid}, -1):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            return 'no'
        """)
        time.sleep(0.3)
        assert sentinel.poll() is None  # the sentinel process is alive
        os.kill(os.getpid(), 0)  # and so is this one
        assert r.tier == "FAIL"
    finally:
        sentinel.kill()
        sentinel.wait()


@needs_bwrap
@pytest.mark.parametrize("allow_fork", [False, True])
def test_8_forty_children_are_gone_after_the_call(allow_fork):
    r, tag = attack("""
        n = 0
        for _ in range(40):
            try:
                if os.fork() == 0:
                    time.sleep(60)
                    os._exit(0)
                n += 1
            except OSError:
                pass
        return 'pwned' if n == 40 else 'no'
    """, allow_fork=allow_fork, nproc=64)
    assert processes_with(tag) == []
    if allow_fork:
        assert r.tier == "PASS"  # the 40 children did exist (nproc=64 allows them)
    else:
        assert r.tier == "FAIL"  # the seccomp filter refused every fork


@needs_bwrap
def test_9_setsid_double_fork_child_does_not_outlive_the_call(tmp_path):
    late = tmp_path / "late.txt"
    r, tag = attack(f"""
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                time.sleep(2)
                try:
                    open({str(late)!r}, 'w').write('late')
                finally:
                    os._exit(0)
            os._exit(0)
        return 'pwned'
    """, allow_fork=True)
    assert r.tier == "PASS"  # the double fork happened
    assert processes_with(tag) == []
    time.sleep(3)
    assert processes_with(tag) == [] and not late.exists()


@needs_bwrap
def test_10_forged_results_are_ignored():
    """Three failing assertions; the program writes fake 'ok' results everywhere it can."""
    r, tag = attack("""
        fake = '{"i": 0, "ok": true, "err": ""}\\n{"i": 1, "ok": true, "err": ""}\\n' \\
               '{"i": 2, "ok": true, "err": ""}\\n'
        for p in ('results.jsonl', '/tmp/results.jsonl', '/proc/1/fd/1', '/proc/1/fd/2',
                  '/proc/self/fd/1', '/proc/self/fd/2'):
            try:
                open(p, 'a').write(fake)
            except OSError:
                pass
        print(fake)
        sys.stderr.write(fake)
        return 'no'
    """, n_assertions=3)
    assert r.tier == "FAIL" and r.passed == [False] * 3
    assert r.errors == ["AssertionError"] * 3


@needs_bwrap
def test_11_timeouts_end_as_fail_and_leave_nothing():
    # ignores the harness's alarm: stopped by the CPU limit or the wall-clock kill
    r, tag = attack("""
        while True:
            try:
                while True:
                    pass
            except BaseException:
                pass
    """, timeout_s=3.0, assert_timeout_s=0.5, cpu_s=1)
    assert r.tier == "FAIL" and r.errors[0] in {"killed:SIGKILL", "Timeout", "CpuLimit"}
    assert processes_with(tag) == []
    r, _ = attack("time.sleep(30)", timeout_s=3.0, assert_timeout_s=0.5)
    assert r.tier == "FAIL" and r.errors == ["Timeout"]


@needs_bwrap
def test_12_memory_bombs_end_as_fail():
    r, _ = attack("x = bytearray(10 ** 10)\nreturn 'pwned'")
    assert r.tier == "FAIL" and r.errors == ["MemoryError"]
    r, _ = attack("x = []\nwhile True:\n    x.append(' ' * 10 ** 6)")
    assert r.tier == "FAIL" and r.errors[0] in {"MemoryError", "killed:SIGKILL"}


@needs_bwrap
def test_13_large_files_and_tmpfs_are_capped():
    r, _ = attack("open('big', 'wb').write(b'x' * (8 << 20))\nreturn 'pwned'")
    assert r.tier == "FAIL" and r.errors[0] in {"OSError", "killed:SIGXFSZ"}


def test_missing_bubblewrap_refuses_unless_the_fallback_is_allowed(monkeypatch):
    monkeypatch.setattr(sbx, "_PROBE", {})
    monkeypatch.setattr(sbx.shutil, "which", lambda name: None)
    with pytest.raises(SandboxUnavailable, match="bwrap is not installed.*allow_unsandboxed"):
        sandbox_mode(False)
    with pytest.raises(SandboxUnavailable):
        run_sandboxed("def f():\n    return 1\n", [PWNED], "f")
    assert sandbox_mode(True) == "process"
    # the weak mode still takes its verdict from the token pipe, not from files or exit status
    r = run_sandboxed("def f():\n    open('results.jsonl', 'w').write('{\"i\": 0, \"ok\": true}')\n"
                      "    return 'no'\n", [PWNED], "f", mode="process")
    assert r.mode == "process" and r.tier == "FAIL"
    assert run_sandboxed("def f():\n    return 'pwned'\n", [PWNED], "f", mode="process").tier == "PASS"


# ------------------------------------------------------------------ issue 24: the nonce verdict
def run_program(program: str, unit: str = PWNED, **kw) -> sbx.RunResult:
    return run_sandboxed(program, [unit], "f", **(LIMITS | kw))


@needs_bwrap
def test_os_exit_0_at_import_fails():
    r = run_program("import os\nos._exit(0)\n\ndef f():\n    return 'no'\n")
    assert r.tier == "FAIL" and r.errors == ["exit:0"] and r.status == "exit:0"


@needs_bwrap
def test_os_exit_0_inside_the_function_fails():
    r, _ = attack("os._exit(0)")
    assert r.tier == "FAIL" and r.errors == ["exit:0"]


@needs_bwrap
def test_sys_exit_0_fails():
    r, _ = attack("sys.exit(0)")
    assert r.tier == "FAIL" and r.errors == ["SystemExit"]


@needs_bwrap
def test_raise_systemexit_fails():
    r = run_program("raise SystemExit\n\ndef f():\n    return 'no'\n")
    assert r.tier == "FAIL" and r.errors == ["SystemExit"]


@needs_bwrap
def test_killing_itself_fails():
    # the harness is pid 1 of its pid namespace, which ignores SIGKILL from inside it; abort()
    # then ends the process by a signal for sure (SIGABRT, or SIGSEGV from glibc's last resort)
    r, _ = attack("os.kill(os.getpid(), signal.SIGKILL)\nos.abort()")
    assert r.tier == "FAIL" and r.errors[0].startswith("killed:SIG")


@needs_bwrap
def test_guessed_tokens_on_every_fd_fail():
    """Writing token-shaped bytes to every fd the program has (its response pipe among them):
    a failing check stays failed, and junk in front of a real answer makes even a passing
    check fail (the checker accepts only well-formed answers)."""
    spray = textwrap.dedent("""
        import secrets
        for fd in range(3, 64):
            try:
                os.write(fd, secrets.token_hex(32).encode())
            except OSError:
                pass
    """)
    r, _ = attack(spray + "return 'no'")
    assert r.tier == "FAIL" and r.errors == ["BadResponse"]
    r, _ = attack(spray + "return 'pwned'")
    assert r.tier == "FAIL" and r.errors == ["BadResponse"]


STEAL = """
    import gc
    found = []
    def look(frame):
        while frame is not None:
            for v in list(frame.f_locals.values()):
                if callable(v) and getattr(v, '__name__', '') == 'earn':
                    found.append(v)
            frame = frame.f_back
    try:
        look(sys._getframe())
    except Exception:
        pass
    try:
        raise ValueError
    except ValueError as e:
        try:
            look(e.__traceback__.tb_frame)
        except Exception:
            pass
    try:
        found += [o for o in gc.get_objects() if getattr(o, '__name__', '') == 'earn']
    except Exception:
        pass
    try:
        def h(s, frame):
            look(frame)
        signal.signal(signal.SIGUSR1, h)
        os.kill(os.getpid(), signal.SIGUSR1)
    except Exception:
        pass
    try:
        import ctypes
        found.append(ctypes)
    except Exception:
        pass
    for fn in found:
        if not isinstance(fn, type(sys)):
            fn()  # writes the token once
            break
    if found:
        os._exit(0)
    return 'no'
"""


@needs_bwrap
def test_the_harness_key_is_out_of_reach_of_introspection():
    """The program looks for a token writer through frames (sys._getframe, a traceback's
    tb_frame, a signal handler's frame), gc and ctypes, calls whatever it finds and exits.
    Since issue 38 the program's process holds no writer and no key (the verdict is made in
    the checker process), so every route finds nothing that helps."""
    r, _ = attack(STEAL)
    assert r.tier == "FAIL" and r.errors[0] in {"AssertionError", "exit:0"}


# ------------------------------------------------------------------ issue 24: type-strict checks
def test_harden_check_rewrites_candidate_calls_and_equalities():
    src = sbx.harden_check("def check(candidate):\n    assert candidate(1) == 2\n"
                           "    assert candidate(2) != [3]\n    assert 1 == candidate(3) == 1\n"
                           "    assert abs(candidate(4) - 0.5) < 1e-6\n")
    lines = [ln.strip() for ln in src.splitlines()]
    assert lines[1] == "assert _cl_eq(_cl_ret(candidate(1)), 2)"
    assert lines[2] == "assert not _cl_eq(_cl_ret(candidate(2)), [3])"
    assert lines[3] == "assert 1 == _cl_ret(candidate(3)) == 1"  # chained: Python's own ==
    assert lines[4] == "assert abs(_cl_ret(candidate(4)) - 0.5) < 1e-06"
    with pytest.raises(ValueError, match="does not parse"):
        sbx.harden_check("def check(:")


ALWAYS_EQUAL = """
class Yes:
    def __eq__(self, other):
        return True
    __hash__ = object.__hash__

class YesStr(str):
    def __eq__(self, other):
        return True
    __hash__ = str.__hash__

def f():
    return {what}
"""


@needs_bwrap
@pytest.mark.parametrize("what", ["Yes()", "YesStr('no')", "[Yes()]"])
def test_an_always_equal_object_fails(what):
    r = run_program(ALWAYS_EQUAL.format(what=what))
    assert r.tier == "FAIL" and r.errors == ["TypeError"]


@needs_bwrap
@pytest.mark.parametrize("returned,expected,tier", [
    ("1.0", "1", "PASS"),            # int and float compare by value
    ("[1, 2.0]", "[1.0, 2]", "PASS"),
    ("True", "1", "FAIL"),           # bool is not a number here
    ("1", "True", "FAIL"),
    ("[0]", "[False]", "FAIL"),
    ("(1, 2)", "[1, 2]", "FAIL"),     # tuple is not list
    ("{'a': True}", "{'a': 1}", "FAIL"),
    ("{'a': [1]}", "{'a': [1.0]}", "PASS"),
    ("{True, 2}", "{1, 2}", "FAIL"),  # set elements and dict keys too (issue 58)
    ("{False: 'a'}", "{0: 'a'}", "FAIL"),
    ("frozenset({(1, True)})", "frozenset({(1, 1)})", "FAIL"),
    ("{1.0, 2}", "{2, 1}", "PASS"),
    ("{2: 'b', 1: 'a'}", "{1.0: 'a', 2: 'b'}", "PASS"),
])
def test_equality_is_type_strict(returned, expected, tier):
    r = run_program(f"def f():\n    return {returned}\n",
                    f"def check(candidate):\n    assert candidate() == {expected}\n")
    assert r.tier == tier
    # != is the negation of the same rule
    r = run_program(f"def f():\n    return {returned}\n",
                    f"def check(candidate):\n    assert candidate() != {expected}\n")
    assert r.tier == ("FAIL" if tier == "PASS" else "PASS")


@needs_bwrap
def test_rebinding_builtins_does_not_change_the_check():
    unit = "def check(candidate):\n    assert abs(candidate() - 0.5) < 1e-6\n"
    honest = run_program("def f():\n    return 0.5\n", unit)
    assert honest.tier == "PASS"
    r = run_program("import builtins\nbuiltins.abs = lambda x: 0\n\ndef abs(x):\n    return 0\n\n"
                    "def f():\n    builtins.abs = lambda x: 0\n    return 3.0\n", unit)
    assert r.tier == "FAIL" and r.errors == ["AssertionError"]


@needs_bwrap
def test_rebinding_exec_and_compile_does_not_neuter_the_check():
    """The harness compiles and runs the check after the program ran: it must not use the
    program's ``builtins.compile``/``exec`` (which here would replace the check by a no-op)."""
    r = run_program("import builtins\n_c = builtins.compile\n"
                    "builtins.compile = lambda *a, **k: _c('def check(candidate):\\n    pass\\n',"
                    " 'x', 'exec')\n_e = builtins.exec\n"
                    "builtins.exec = lambda c, g=None, *a: _e(_c('def check(candidate):\\n    pass\\n',"
                    " 'x', 'exec'), g)\n\ndef f():\n    return 'no'\n")
    assert r.tier == "FAIL" and r.errors == ["AssertionError"]


@needs_bwrap
def test_patching_math_does_not_reach_the_check():
    """The check imports private copies of common modules (math, copy, ...) taken before the
    program ran, both through ``import`` in the test and through the program's own names."""
    unit = ("import math\n\ndef check(candidate):\n    import math as m\n"
            "    assert m.fabs(candidate() - 1.0) < 1e-6\n    assert math.isclose(candidate(), 1.0)\n")
    assert run_program("def f():\n    return 1.0\n", unit).tier == "PASS"
    r = run_program("import math\nmath.fabs = lambda x: 0.0\nmath.isclose = lambda *a, **k: True\n\n"
                    "def f():\n    return 5.0\n", unit)
    assert r.tier == "FAIL" and r.errors == ["AssertionError"]
    r = run_program("import math\n\ndef f():\n    math.isclose = lambda *a, **k: True\n"
                    "    return 5.0\n", "def check(candidate):\n    x = candidate()\n"
                    "    assert math.isclose(x, 1.0)\n",
                    reference="import math\n")  # math: the reference's name
    assert r.tier == "FAIL" and r.errors == ["AssertionError"]


@needs_bwrap
def test_the_tests_own_names_take_precedence():
    """A program that defines a name the test file also defines (a helper, ``expected``) does
    not change what the test computes; the check sees the reference program's names (its
    helpers), never the program's."""
    unit = ("EXPECTED = 'pwned'\n\ndef ok(x):\n    return x == EXPECTED\n\n"
            "def check(candidate):\n    assert ok(candidate())\n    assert helper() == 2\n")
    ref = "def helper():\n    return 2\n"
    r = run_program("def ok(x):\n    return True\n\nEXPECTED = 'no'\n\ndef helper():\n"
                    "    return 2\n\ndef f():\n    return 'no'\n", unit, reference=ref)
    assert r.tier == "FAIL" and r.errors == ["AssertionError"]
    r = run_program("def f():\n    return 'pwned'\n", unit, reference=ref)
    assert r.tier == "PASS"
    # the program's own helper is not the test's: without a reference the name is missing
    r = run_program("def helper():\n    return 2\n\ndef f():\n    return 'pwned'\n", unit)
    assert r.tier == "FAIL" and r.errors == ["NameError"]
