"""Issue 38: programs that try to forge the sandbox's verdict (contrastlab.sandbox).

The supervisor's per-assertion nonce is made known to the test (``secrets.token_hex`` is
patched to return a marker), and every attack reports what it found through the one
channel the check reads, its return value: an assertion ``f() == 'pwned'`` passes exactly
when the attack found the marker (or reached something outside). So each test below fails
if the secret is anywhere the program can read, and a forged verdict shows as a PASS.
Controls show that each probe works where there is something to find (the same scan finds
a marker the program itself put in memory; the same helper trick passes when the check
takes its helpers from the program).
"""

from __future__ import annotations

import os
import textwrap

import pytest

from contrastlab import sandbox as sbx
from contrastlab.sandbox import run_sandboxed

from _bwrap import needs_bwrap

pytestmark = needs_bwrap

PWNED = "def check(candidate):\n    assert candidate() == 'pwned'\n"
LIMITS = dict(timeout_s=15.0, assert_timeout_s=10.0, cpu_s=10, memory_mb=512, fsize_mb=1)
MARK = "c0ffee" * 5 + "ab"  # 32 hex characters, like a real nonce


@pytest.fixture
def known_nonce(monkeypatch):
    """The supervisor's nonce becomes MARK (the attack is told it: knowing it must not help)."""
    monkeypatch.setattr(sbx.secrets, "token_hex", lambda n=None: MARK)
    return MARK


def attack(body: str, n: int = 1, **kw) -> sbx.RunResult:
    """Run ``def f(): <body>`` against ``f() == 'pwned'``. The program knows the marker only
    as two halves ``A``, ``B`` (its own memory never holds them joined, unless it joins them)
    and ``found(data)`` tells whether ``data`` holds ``A`` followed by ``B``; ``R``/``W`` are
    its request/answer pipe fds."""
    program = (PRELUDE + "\ndef f():\n" + textwrap.indent(textwrap.dedent(body), "    "))
    return run_sandboxed(program, [PWNED] * n, "f", **(LIMITS | kw))


PRELUDE = f"""
import os, sys, gc, json, struct, signal, time
A, B = {MARK[:16]!r}, {MARK[16:]!r}
R, W = int(sys.argv[1]), int(sys.argv[2])
def found(data):
    a, b = A.encode(), B.encode()
    i = data.find(a)
    while i >= 0:
        if data[i + 16:i + 32] == b:
            return True
        i = data.find(a, i + 1)
    return False
def scan(pid):
    try:
        maps = open('/proc/%s/maps' % pid).read().splitlines()
        mem = open('/proc/%s/mem' % pid, 'rb', 0)
    except OSError:
        return False
    with mem:
        for line in maps:
            lo, hi = (int(x, 16) for x in line.split()[0].split('-'))
            if 'r' not in line.split()[1] or hi - lo > 1 << 28:
                continue
            pos = lo
            while pos < hi:
                try:
                    mem.seek(pos)
                    chunk = mem.read(min(1 << 20, hi - pos) + 64)
                except (OSError, OverflowError, ValueError):
                    break
                if found(chunk):
                    return True
                pos += 1 << 20
    return False
"""


def test_control_the_memory_scan_finds_what_is_there(known_nonce):
    """The scan is not blind: once the program itself joins the halves, it finds them."""
    r = attack("held = A + B\nreturn 'pwned' if scan('self') and held else 'no'")
    assert r.tier == "PASS"


def test_the_nonce_is_in_no_memory_the_program_can_read(known_nonce):
    """/proc/self/mem, /proc/<ppid>/mem, /proc/1/mem and the memory of every pid in /proc."""
    r = attack("""
pids = {'self', '1', str(os.getppid())} | {p for p in os.listdir('/proc') if p.isdigit()}
return 'pwned' if any(scan(p) for p in sorted(pids)) else 'no'
""")
    assert r.tier == "FAIL" and r.errors == ["AssertionError"]


def test_environ_cmdline_and_files_of_every_visible_process(known_nonce):
    r = attack("""
if any(found(v.encode()) for v in os.environ.values()):
    return 'pwned'
for pid in [p for p in os.listdir('/proc') if p.isdigit()] + ['self', str(os.getppid())]:
    for name in ('environ', 'cmdline', 'stat', 'status', 'auxv', 'io'):
        try:
            if found(open('/proc/%s/%s' % (pid, name), 'rb').read()):
                return 'pwned'
        except OSError:
            pass
for root, dirs, files in os.walk('/tmp'):
    for fn in files:
        try:
            if found(open(os.path.join(root, fn), 'rb').read()):
                return 'pwned'
        except OSError:
            pass
return 'no'
""")
    assert r.tier == "FAIL" and r.errors == ["AssertionError"]


def test_only_processes_of_the_sandbox_are_visible():
    """No host process (the checker, the supervisor) is in the program's /proc."""
    r = attack("""
pids = [p for p in os.listdir('/proc') if p.isdigit()]
return 'pwned' if pids != ['1'] or os.getpid() != 1 or os.getppid() != 0 else 'no'
""")
    assert r.tier == "FAIL"


def test_gc_and_frames_hold_no_secret(known_nonce):
    r = attack("""
def seen(o):
    if isinstance(o, str):
        return found(o.encode('utf-8', 'replace'))
    return isinstance(o, (bytes, bytearray)) and found(bytes(o))
for o in gc.get_objects():
    vals = (list(o.values()) if isinstance(o, dict)
            else list(o) if isinstance(o, (list, tuple)) else [o])
    if any(seen(v) for v in vals):
        return 'pwned'
fr = sys._getframe()
while fr is not None:
    if any(seen(v) for v in list(fr.f_locals.values()) + list(fr.f_globals.values())):
        return 'pwned'
    fr = fr.f_back
return 'no'
""")
    assert r.tier == "FAIL" and r.errors == ["AssertionError"]


def test_writing_a_forged_verdict_with_the_right_nonce_to_every_fd(known_nonce):
    """Even knowing the nonce, a verdict written to any fd (or any /proc fd link) is not read."""
    r = attack("""
fake = json.dumps({"nonce": A + B, "ok": True, "err": "", "gone": False}).encode()
targets = []
for fd in range(0, 1024):
    try:
        os.write(fd, fake)
    except OSError:
        pass
for pid in ['self', '1'] + [p for p in os.listdir('/proc') if p.isdigit()]:
    try:
        targets += ['/proc/%s/fd/%s' % (pid, x) for x in os.listdir('/proc/%s/fd' % pid)]
    except OSError:
        pass
for t in targets:
    try:
        with open(t, 'wb', 0) as fh:
            fh.write(fake)
    except OSError:
        pass
os._exit(0)
""")
    assert r.tier == "FAIL" and r.errors[0] in {"BadResponse", "exit:0"}


def test_inherited_fds_are_only_the_two_pipes():
    """fds 0-2 are /dev/null; besides them the program holds exactly its request pipe (read)
    and response pipe (write)."""
    r = attack("""
import stat
extra = []
for x in os.listdir('/proc/self/fd'):
    fd = int(x)
    try:
        st = os.fstat(fd)
    except OSError:
        continue  # the listdir's own fd, closed by now
    if fd <= 2:
        if not stat.S_ISCHR(st.st_mode):
            return 'pwned'
    elif stat.S_ISFIFO(st.st_mode):
        extra.append(fd)
    elif not stat.S_ISDIR(st.st_mode):
        return 'pwned'  # a file, a socket, a memfd: something was leaked
return 'pwned' if len(extra) != 2 else 'no'
""")
    assert r.tier == "FAIL" and r.errors == ["AssertionError"]


def test_ptrace_and_process_vm_readv_reach_no_outside_process():
    """ptrace(PTRACE_ATTACH / PTRACE_SEIZE) and process_vm_readv on the supervisor's host pid,
    pid 1 and a range of pids: no call succeeds."""
    r = attack(f"""
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
buf = ctypes.create_string_buffer(64)
class iovec(ctypes.Structure):
    _fields_ = [('base', ctypes.c_void_p), ('len', ctypes.c_size_t)]
local = iovec(ctypes.cast(buf, ctypes.c_void_p), 64)
remote = iovec(ctypes.c_void_p(0x400000), 64)
for pid in [{os.getpid()}, {os.getppid()}] + list(range(2, 400)):
    for req in (16, 0x4206):  # PTRACE_ATTACH, PTRACE_SEIZE
        if libc.ptrace(req, pid, None, None) == 0:
            return 'pwned'
    if libc.process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0) > 0:
        return 'pwned'
return 'no'
""")
    assert r.tier == "FAIL" and r.errors == ["AssertionError"]


def test_signals_cannot_reach_the_checker():
    r = attack("""
for pid in [-1, 0] + list(range(2, 4000)):
    try:
        os.kill(pid, signal.SIGSTOP)
    except OSError:
        pass
return 'no'
""")
    assert r.tier == "FAIL" and r.errors == ["AssertionError"]


@pytest.mark.parametrize("body,errors", [
    # hang up, then answer; point the answer pipe at the request pipe
    ("os.close(W)\nos.close(R)\nreturn 'pwned'", {"exit:0", "Timeout", "OSError"}),
    ("os.dup2(R, W)\nreturn 'pwned'", {"exit:0", "Timeout", "BadResponse", "OSError"}),
    ("os.write(W, struct.pack('>I', 10 ** 9))\nreturn 'pwned'", {"BadResponse"}),  # a giant length
    ("os.write(W, struct.pack('>I', 2) + b'{}')\nreturn 'pwned'", {"BadResponse"}),  # empty
    ("os.write(W, struct.pack('>I', 3) + b'[1]')\nreturn 'pwned'", {"BadResponse"}),
    ("os.kill(1, signal.SIGKILL)\nos.abort()", {"killed:SIGABRT", "killed:SIGSEGV"}),
    ("signal.alarm(0)\nsignal.setitimer(signal.ITIMER_REAL, 0)\ntime.sleep(30)", {"Timeout"}),
])
def test_exit_and_pipe_tricks_fail(body, errors):
    """Hanging up, redirecting or forging frames on the answer pipe, dying, ignoring the
    alarm: none of them passes."""
    r = attack(body, timeout_s=4.0, assert_timeout_s=2.0)
    assert r.tier == "FAIL" and r.errors[0] in errors, r.errors


def test_a_well_formed_answer_is_only_the_programs_answer():
    """A well-formed answer frame the program writes itself is an answer of the program, no
    more: writing 'pwned' on its answer pipe is the same as returning 'pwned' (the check
    passes, as it would for ``return 'pwned'``), and answers are taken in order, so a
    program that pre-answers cannot make a later call see anything but its own answers."""
    r = attack("""
data = json.dumps({"r": "pwned", "m": []}).encode()
os.write(W, struct.pack('>I', len(data)) + data)
return 'no'
""", n=1)
    assert r.tier == "PASS"  # the program's own answer to this call was 'pwned' 
    r = run_sandboxed("def f(x):\n    import os, sys, json, struct\n"
                      "    d = json.dumps({'r': 'pwned', 'm': [None]}).encode()\n"
                      "    os.write(int(sys.argv[2]), struct.pack('>I', len(d)) + d)\n"
                      "    return 'no'\n",
                      ["def check(candidate):\n    assert candidate(1) == 'no'\n"
                       "    assert candidate(2) == 'pwned'\n    assert candidate(3) == 'no'\n"],
                      "f", **LIMITS)
    assert r.tier == "FAIL"  # answers are taken in order: the third call sees the second 'no'


EVIL_CLASSES = """
class Yes:
    def __eq__(self, other):
        return True
    __hash__ = object.__hash__
class Liar(str):
    __class__ = property(lambda self: str)
    def __eq__(self, other):
        return True
    __hash__ = str.__hash__
class IntYes(int):
    def __eq__(self, other):
        return True
    __hash__ = int.__hash__
class DictYes(dict):
    def __eq__(self, other):
        return True
def gen():
    yield 'pwned'
def f():
    return {what}
"""


@pytest.mark.parametrize("what", ["Yes()", "Liar('no')", "IntYes(0)", "DictYes()",
                                  "[Yes()]", "('pwned', Yes())", "{'a': Yes()}", "gen()",
                                  "type('S', (str,), {})('pwned')", "NotImplemented", "..."])
def test_objects_that_are_not_plain_values_fail(what):
    r = run_sandboxed(EVIL_CLASSES.format(what=what), [PWNED], "f", **LIMITS)
    assert r.tier == "FAIL" and r.errors == ["TypeError"], r.errors


def test_values_round_trip_exactly():
    """Every plain type the answer format carries comes back exactly (and mutations of
    list/dict/set arguments reach the check, as they would in one process)."""
    value = ("[None, True, False, 0, -1, 2 ** 200, -(2 ** 70), 1.5, -0.0, float('inf'), "
             "1e-310, 3 + 4j, 'é\\x00\\ud800', b'\\x00\\xff', (1, (2,)), {1, 'a'}, "
             "frozenset({(1, 2)}), {'k': [1, {2: 3}], (1, 2): None}, []]")
    unit = ("def check(candidate):\n    v = candidate()\n    assert v == %s\n"
            "    assert [type(x) for x in v] == [type(x) for x in %s]\n"
            "    assert str(v[9]) == 'inf' and str(v[8]) == '-0.0'\n" % (value, value))
    assert run_sandboxed("def f():\n    return %s\n" % value, [unit], "f", **LIMITS).tier == "PASS"
    mut = ("def check(candidate):\n    a, d, s = [3, 1, 2], {'x': 1}, {1}\n"
           "    assert candidate(a, d, s) is None\n    assert a == [1, 2, 3] and d == {'y': 2}"
           " and s == {1, 2}\n")
    prog = "def f(a, d, s):\n    a.sort()\n    d.clear()\n    d['y'] = 2\n    s.add(2)\n"
    assert run_sandboxed(prog, [mut], "f", **LIMITS).tier == "PASS"
    r = run_sandboxed("def f():\n    x = []\n    x.append(x)\n    return x\n", [PWNED], "f",
                      **LIMITS)
    assert r.tier == "FAIL" and r.errors == ["RecursionError"]


def test_exceptions_come_back_by_builtin_class():
    """The check sees the program's exception as the same built-in class (a test that expects
    ValueError still works) and a program-defined class only as a foreign subclass."""
    unit = ("def check(candidate):\n    try:\n        candidate()\n    except ValueError:\n"
            "        return\n    assert False\n")
    r = run_sandboxed("def f():\n    raise ValueError('x')\n", [unit], "f", **LIMITS)
    assert r.tier == "PASS"
    r = run_sandboxed("class E(ValueError):\n    pass\n\ndef f():\n    raise E()\n", [unit], "f",
                      **LIMITS)
    assert r.tier == "PASS"  # caught as a ValueError
    r = run_sandboxed("class E(KeyError):\n    pass\n\ndef f():\n    raise E()\n", [PWNED], "f",
                      **LIMITS)
    assert r.tier == "FAIL" and r.errors == ["Exception"]
    r = run_sandboxed("def f():\n    raise SystemExit(0)\n", [PWNED], "f", **LIMITS)
    assert r.tier == "FAIL" and r.errors == ["SystemExit"]


# ------------------------------------------------------------------ shadowed helpers
SHADOW = {
    # HumanEval/32: the test calls poly(coeffs, solution)
    32: "def poly(xs, x):\n    return 0.0\n\ndef find_zero(xs):\n    return 0.0\n",
    # HumanEval/33: the test compares with sort_third(...) itself
    33: "def sort_third(l):\n    return [0]\n",
    # HumanEval/38: the test encodes with encode_cyclic
    38: "def encode_cyclic(s):\n    return s\n\ndef decode_cyclic(s):\n    return s\n",
    # HumanEval/50: the test encodes with encode_shift
    50: "def encode_shift(s):\n    return s\n\ndef decode_shift(s):\n    return s\n",
}


@pytest.fixture(scope="module")
def problems():
    from contrastlab.data.humaneval import load_problems

    return load_problems(51)


@pytest.mark.parametrize("pid", sorted(SHADOW))
def test_redefining_the_tests_helper_does_not_pass(problems, pid):
    """The four HumanEval problems whose tests call a helper: a program that redefines the
    helper (and returns garbage) fails every assertion that uses it; the canonical program
    passes; and the same trick *would* pass if the check took its names from the program
    (reference = the evil program), so the test bites."""
    from contrastlab.data.humaneval import split_assertions

    p = problems[pid]
    units = split_assertions(p.test)
    kw = LIMITS | dict(timeout_s=10.0, assert_timeout_s=5.0)
    honest = run_sandboxed(p.program, units, p.entry_point, reference=p.program, **kw)
    assert honest.tier == "PASS"
    evil = run_sandboxed(SHADOW[pid], units, p.entry_point, reference=p.program, **kw)
    uses_helper = [i for i, u in enumerate(units) if "poly(" in u or "sort_third(" in u.split(
        "candidate", 1)[1] or "encode_" in u]
    assert uses_helper and not any(evil.passed[i] for i in uses_helper)
    forged = run_sandboxed(SHADOW[pid], units, p.entry_point, reference=SHADOW[pid], **kw)
    assert all(forged.passed[i] for i in uses_helper)
