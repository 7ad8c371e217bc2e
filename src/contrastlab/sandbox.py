"""Run untrusted Python programs against test assertions; a verdict the program cannot forge.

Used to tier HumanEval variants (:mod:`contrastlab.data.humaneval`) and users' own
submissions (:mod:`contrastlab.data.submissions`). Public names: :func:`run_sandboxed`,
:func:`sandbox_mode`, :func:`harden_check`, :func:`tier_of`, :class:`RunResult`,
:class:`SandboxUnavailable`, :data:`TIERS`.

**Two processes per assertion; the program never runs where the verdict is made.** For
assertion ``i`` the supervisor (this module) starts

- the *server* (:data:`contrastlab.sandbox_programs.SERVER`) under bubblewrap: it runs the
  program, then answers calls of its entry point. It holds no secret: there is no key, no
  token and nothing in its memory, files or inherited fds that the supervisor trusts;
- the *checker* (:data:`contrastlab.sandbox_programs.CHECKER`), an ordinary child process
  that never executes a byte of the program: it runs the reference program (the problem's
  own helpers, e.g. ``poly`` of HumanEval/32) and the assertion in one namespace, and calls
  ``check(candidate)`` with a proxy ``candidate`` that sends the encoded arguments to the
  server over a pipe and decodes the answer. It writes its verdict to a pipe whose only
  other end is held by the supervisor.

The assertion passed only if the checker reports that ``check(candidate)`` returned, with the
supervisor's per-assertion nonce, and the server was alive for every call; the server's exit
status only names failures (exception name, timeout, signal).

**What is guaranteed** (``bwrap`` mode, Linux, bubblewrap working):

- *No forged verdict from inside.* The verdict channel, the nonce and the checker's memory
  are outside the server's namespaces: the server is pid 1 of its own pid namespace with a
  private ``/proc`` (no other process of the host is visible, so no ``/proc/<pid>/mem``,
  ``environ``, ``fd`` of the checker or the supervisor), in its own user namespace with no
  capabilities (``ptrace``/``process_vm_readv`` of an outside process is impossible), and it
  inherits only its request pipe (read end) and response pipe (write end). Reading its own
  memory (``/proc/self/mem``, ``gc``, frames, ``ctypes``) finds nothing to steal: the
  server's code is public and holds no secret. Ending early (``os._exit(0)``,
  ``sys.exit``, a signal, closing its pipes) leaves the checker's call without an answer, a
  failed assertion; bytes that are not a well-formed answer, or an answer over
  :data:`~contrastlab.sandbox_programs.MAX_MESSAGE` bytes or the checker's memory limit
  (RLIMIT_AS, twice the server's), are ``BadResponse``. Such a failure, and the checker's
  alarm (``Timeout``), fails the assertion even if the test catches the exception
  (``except:``) and returns; every later call in that check raises it again. Replies are
  read in time linear in their size.
- *Only values come back.* Return values (and arguments changed in place) travel in the
  value format of :mod:`contrastlab.sandbox_programs` and are decoded by the checker into
  exact built-in types (``None``, ``bool``, ``int``, ``float``, ``complex``, ``str``,
  ``bytes``, ``list``, ``tuple``, ``dict``, ``set``, ``frozenset``, nested); a value of any
  other class (an object whose ``__eq__`` always returns ``True``, a ``str`` subclass) is a
  ``TypeError`` at the call. An exception the program raises is re-raised in the check as
  the same built-in class (or a fresh subclass of its nearest built-in base, reported as
  ``Exception``), except that ``StopIteration`` (and ``StopAsyncIteration``, subclasses
  too) becomes ``RuntimeError``, as PEP 479 does for generators: it cannot silently end a
  ``map``/``filter``/``zip``/``for`` in the check (``all(map(candidate, xs))``).
- *The test's names are the test's.* The check's global namespace is the reference program's
  names plus the assertion's own; nothing of the program is in it, so a program that
  redefines a helper the test calls (``poly``, ``encode_cyclic`` ...), ``abs``, ``math.fabs``
  or ``builtins.exec`` changes nothing in the check.
- *Type-strict comparisons* (:func:`harden_check`, applied to every assertion): a single
  ``a == b`` / ``a != b`` with a candidate call on either side, or anywhere in an ``assert``
  statement, uses a structural equality: ``int``/``float``/``complex`` by value
  (``1 == 1.0``), ``bool`` is not a number (``True != 1``, ``[0] != [False]``,
  ``{True, 2} != {1, 2}``, ``{False: 'a'} != {0: 'a'}``), other values need the same exact
  type, containers element by element (set elements and dict keys too) with the same rule.
- *Isolation of the server*: new user, pid, network, IPC, UTS and cgroup namespaces, no
  capabilities, read-only ``/usr`` and the interpreter's prefix (site-packages hidden), a
  size-capped private tmpfs, an empty environment, ``--die-with-parent``; a seccomp filter
  makes ``fork``/``vfork``/non-thread ``clone`` fail (unless ``allow_fork``); RLIMIT_CPU,
  _AS, _FSIZE, _NOFILE, _NPROC and _CORE; everything it started is killed before the call
  returns (the pid namespace ends with its pid 1).

**What is not guaranteed.** The checker trusts the reference program and the test (they run
unsandboxed, with rlimits, as this user): pass only trusted tests. A test that relies on the
*identity* of what the candidate returns (``candidate(x) is x``), on the program's own globals,
on a mutation of an argument nested inside a tuple, or that passes arguments which are not
built-in values (a function, an object) cannot be checked this way (such an argument is a
``TypeError``). Chained comparisons (``a == b == c``) use Python's own ``==`` on the decoded
built-in values. Wall-clock limits make tiers of programs that run near the limit depend on
the machine's load. A kernel or bubblewrap escape (namespaces, seccomp) is out of scope. In
the weak ``process`` mode (no bubblewrap; for trusted code only) the server runs as this
user: it can read and write what this user can, reach the network and, where the kernel's
ptrace policy allows, other processes of this user: no guarantee against hostile code.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field

from .errors import parse_python
from .sandbox_isolation import (bwrap_argv, interpreter, kill_sandbox, no_fork_filter,
                                read_available, read_child_pid)
from .sandbox_programs import (CHECKER, EXC_BASE, EXC_NAMES, EXIT_CPU, EXIT_OTHER, EXIT_TIMEOUT,
                               SERVER)

__all__ = ["RunResult", "SandboxUnavailable", "TIERS", "harden_check", "run_sandboxed",
           "sandbox_mode", "tier_of"]

#: Correctness tiers: all assertions passed, some, none.
TIERS = ("PASS", "PARTIAL", "FAIL")


class SandboxUnavailable(RuntimeError):
    """bubblewrap cannot start on this machine, so untrusted code is not executed."""


# ------------------------------------------------------------------ check hardening
def _mentions(node: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node))


class _Harden(ast.NodeTransformer):
    strict = False  # inside an assert statement: every single ==/!= is type-strict

    def visit_Assert(self, node: ast.Assert) -> ast.AST:
        self.strict = True
        self.generic_visit(node)
        self.strict = False
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id == "candidate":
            return ast.Call(ast.Name("_cl_ret", ast.Load()), [node], [])
        return node

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        self.generic_visit(node)
        if len(node.ops) == 1 and isinstance(node.ops[0], (ast.Eq, ast.NotEq)) and (
                self.strict or _mentions(node, "candidate")):
            call = ast.Call(ast.Name("_cl_eq", ast.Load()), [node.left, node.comparators[0]], [])
            return call if isinstance(node.ops[0], ast.Eq) else ast.UnaryOp(ast.Not(), call)
        return node


def harden_check(test_src: str) -> str:
    """Rewrite a test program for type-strict checking (rules in the module docstring).

    ``candidate(...)`` -> ``_cl_ret(candidate(...))`` (exact built-in types required) and a
    single ``x == y`` / ``x != y`` with a candidate call on either side, or inside an
    ``assert`` statement, -> ``_cl_eq(x, y)`` / ``not _cl_eq(x, y)``; the checker process defines ``_cl_ret``/``_cl_eq`` in the check's own
    namespace. Rewriting twice only wraps twice (harmless).

    Args:
        test_src: Python source defining ``check(candidate)``.

    Returns:
        The rewritten source (``ast.unparse`` form).

    Raises:
        ValueError: the source does not parse.
    """
    tree = parse_python(test_src, "test")
    return ast.unparse(ast.fix_missing_locations(_Harden().visit(tree)))


# ------------------------------------------------------------------ supervisor
def _explain(rc: int | None) -> tuple[str, str]:
    """(error name, status) of a server that ended before the check returned, from its exit
    status (``None``: killed at the wall-clock limit)."""
    if rc is None:
        return "Timeout", "timeout"
    if rc == 0:  # ended with status 0 before the check returned: os._exit(0), closed pipes
        return "exit:0", "exit:0"
    if rc == EXIT_TIMEOUT:
        return "Timeout", "ok"
    if rc == EXIT_CPU:
        return "CpuLimit", "ok"
    if rc == EXIT_OTHER:
        return "Exception", "ok"
    if EXC_BASE <= rc < EXC_BASE + len(EXC_NAMES):
        return EXC_NAMES[rc - EXC_BASE], "ok"
    sig = -rc if rc < 0 else (rc - 128 if rc > 128 else 0)  # bwrap reports a signal as 128 + n
    if sig:
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = str(sig)
        return f"killed:{name}", f"killed:{name}"
    return f"exit:{rc}", f"exit:{rc}"


def _feed(proc: subprocess.Popen, payload: bytes) -> None:
    """Write ``payload`` to a child's stdin and close it (a child that died first is fine)."""
    for step in (lambda: proc.stdin.write(payload), proc.stdin.close):
        with contextlib.suppress(OSError):  # BrokenPipeError is an OSError
            step()


def _run_one(mode: str, program: str, unit: str, reference: str, entry: str, *,
             per_s: float, limits: list[int], timeout_s: float, fsize_mb: int,
             allow_fork: bool, tag: str) -> tuple[bool, str, str, str]:
    """One assertion: server + checker (module docstring).

    Returns (passed, error name, status, the server's stderr, where bwrap reports its own
    failures). Every process either child started is gone when this returns."""
    exe, _ = interpreter()
    nonce = secrets.token_hex(16)
    deadline = time.monotonic() + timeout_s
    req_r, req_w = os.pipe()
    resp_r, resp_w = os.pipe()
    ver_r, ver_w = os.pipe()
    info_r = info_w = sec_fd = pidfd = -1
    open_fds = [req_r, req_w, resp_r, resp_w, ver_r, ver_w]
    server = checker = None
    s_tail = [exe, "-I", "-S", "-c", SERVER, str(req_r), str(resp_w), tag]
    try:
        with tempfile.TemporaryFile() as err, \
                tempfile.TemporaryDirectory(prefix="sbx_run_") as cwd:
            s_fds = [req_r, resp_w]
            if mode == "bwrap":
                info_r, info_w = os.pipe()
                open_fds += [info_r, info_w]
                flt = None if allow_fork else no_fork_filter()
                if flt is not None:
                    sec_fd = os.memfd_create("contrastlab-seccomp", 0)
                    open_fds.append(sec_fd)
                    os.write(sec_fd, flt)
                    os.lseek(sec_fd, 0, os.SEEK_SET)
                tmp_bytes = max(4, 4 * fsize_mb) * 1024 * 1024
                argv = bwrap_argv(tmp_bytes, None if sec_fd < 0 else sec_fd, info_w)[:-1] + s_tail
                s_fds += [info_w] + ([sec_fd] if sec_fd >= 0 else [])
            else:
                argv = s_tail
            server = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                      stderr=err, env={}, cwd=cwd, pass_fds=tuple(s_fds),
                                      start_new_session=True)
            checker = subprocess.Popen([exe, "-I", "-S", "-c", CHECKER, str(req_w), str(resp_r),
                                        str(ver_w), tag], stdin=subprocess.PIPE,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                       env={}, cwd=cwd, pass_fds=(req_w, resp_r, ver_w),
                                       start_new_session=True)
            for fd in s_fds + [req_w, resp_r, ver_w]:  # the children hold them now
                os.close(fd)
                open_fds.remove(fd)
            _feed(server, json.dumps({"program": program, "entry": entry, "per_s": per_s,
                                      "limits": limits}).encode())
            _feed(checker, json.dumps({"reference": reference, "unit": unit, "per_s": per_s,
                                       "cpu": limits[0], "mem": 2 * limits[1],
                                       "nonce": nonce}).encode())
            if mode == "bwrap":
                child = read_child_pid(info_r, deadline)
                if child is not None:
                    try:
                        pidfd = os.pidfd_open(child)
                    except ProcessLookupError:
                        pidfd = -1
            with contextlib.suppress(subprocess.TimeoutExpired):
                checker.wait(timeout=max(0.0, deadline - time.monotonic()))
            verdict = _read_verdict(ver_r, nonce) if checker.returncode is not None else None
            rc: int | None = None
            if verdict is not None and verdict["gone"]:
                try:  # the server ended (or closed its pipe): its exit status says why
                    rc = server.wait(timeout=max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    rc = None
            kill_sandbox(server, pidfd if pidfd >= 0 else None)
            if checker.returncode is None:
                kill_sandbox(checker, None)
            err.seek(0)
            stderr = err.read(4000).decode(errors="replace")
    finally:
        for fd in open_fds + ([pidfd] if pidfd >= 0 else []):
            os.close(fd)
        for p in (server, checker):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
    if verdict is None:
        return False, "Timeout", "timeout", stderr
    if verdict["ok"]:
        return True, "", "ok", stderr
    if verdict["gone"]:
        return (False, *_explain(rc), stderr)
    return False, verdict["err"], "ok", stderr


def _read_verdict(fd: int, nonce: str) -> dict | None:
    """The checker's verdict, or ``None`` when none came (killed at the wall-clock limit,
    crashed) or it does not carry this assertion's nonce."""
    raw = read_available(fd, 1 << 12)
    try:
        v = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(v, dict) or v.get("nonce") != nonce:
        return None
    return {"ok": v.get("ok") is True, "gone": v.get("gone") is True,
            "err": str(v.get("err") or "CheckError")}


_PROBE: dict[str, str] = {}


def sandbox_mode(allow_unsandboxed: bool = False) -> str:
    """``"bwrap"`` when bubblewrap starts a sandboxed Python here (probed once per process: a
    one-assertion program must pass), else ``"process"`` if ``allow_unsandboxed`` (the weak
    guard: separate process, rlimits, process group; for trusted code only).

    Raises:
        SandboxUnavailable: bubblewrap is missing or cannot start (message says why and how
            to fix it) and ``allow_unsandboxed`` is false.
    """
    if "bwrap" not in _PROBE:
        if shutil.which("bwrap") is None:
            _PROBE["bwrap"] = "bwrap is not installed (Debian/Ubuntu package: bubblewrap)"
        else:
            unit = harden_check("def check(candidate):\n    assert candidate() == 1\n")
            ok, e, _, err = _run_one("bwrap", "def f():\n    return 1\n", unit, "", "f", per_s=5.0,
                                     limits=[5, 256 << 20, 1 << 20, 64, 64], timeout_s=30,
                                     fsize_mb=1, allow_fork=False, tag="probe")
            _PROBE["bwrap"] = "" if ok else (err.strip() or f"the probe failed ({e})")
    why = _PROBE["bwrap"]
    if not why:
        return "bwrap"
    if allow_unsandboxed:
        return "process"
    raise SandboxUnavailable(
        f"bubblewrap cannot start a sandbox here ({why}); untrusted code is not executed "
        "without it. Install bubblewrap (apt-get install bubblewrap) and allow user "
        "namespaces, or, for trusted code only, set multilabel.humaneval.allow_unsandboxed: true.")


def tier_of(passed: list[bool]) -> str:
    """``PASS`` if every assertion passed, ``FAIL`` if none did (or there are none), else ``PARTIAL``."""
    if passed and all(passed):
        return "PASS"
    return "PARTIAL" if any(passed) else "FAIL"


@dataclass
class RunResult:
    """Per-assertion outcome of one program: ``passed[i]`` (the checker reported that
    ``check(candidate)`` returned) and ``errors[i]`` (``""`` when passed; else a built-in
    exception name, ``Timeout``, ``CpuLimit``, ``killed:<signal>``, ``exit:<code>``
    (``exit:0``: the program's process ended before the check returned), ``BadResponse``
    (bytes from the program that are not a well-formed answer, or too large), or
    ``Exception`` for an exception class that is not a built-in; ``Timeout``/``BadResponse``/
    exits count even where the test caught the exception; the program's ``StopIteration`` is
    ``RuntimeError``)."""

    passed: list[bool]
    errors: list[str]
    status: str  # "ok" | "timeout" | "killed:<signal>" | "exit:<code>" (first abnormal end)
    tier: str = field(default="")
    mode: str = field(default="bwrap")

    def __post_init__(self):
        self.tier = tier_of(self.passed)


def run_sandboxed(program: str, assertions: list[str], entry_point: str, *,
                  reference: str = "", timeout_s: float = 3.0, assert_timeout_s: float = 1.0,
                  cpu_s: int = 2, memory_mb: int = 512, fsize_mb: int = 1, nofile: int = 64,
                  nproc: int = 16, allow_fork: bool = False, mode: str = "bwrap",
                  tag: str = "") -> RunResult:
    """Run ``program`` against each assertion: a fresh sandboxed server and a fresh checker
    per assertion (module docstring); every assertion is first rewritten by
    :func:`harden_check` (type-strict ``==``).

    Args:
        program: the untrusted program's source (defines ``entry_point``).
        assertions: programs each defining ``check(candidate)``
            (e.g. from :func:`contrastlab.data.humaneval.split_assertions`); trusted.
        entry_point: the function under test.
        reference: trusted source run before each assertion in the check's namespace: the
            helpers and imports the test may use (HumanEval: the canonical program). The
            program's own names are never visible to the check.
        timeout_s: wall-clock limit of each assertion, start-up included (then both
            processes are killed and the assertion counts as ``Timeout``).
        assert_timeout_s: alarm on program + calls (server) and on the check (checker).
        cpu_s: RLIMIT_CPU seconds; memory_mb: RLIMIT_AS (MiB; the checker gets twice
            that); fsize_mb: RLIMIT_FSIZE (MiB,
            also sizes the private tmpfs); nofile: RLIMIT_NOFILE; nproc: RLIMIT_NPROC (all
            of the server).
        allow_fork: keep process creation allowed (else a seccomp filter makes fork/vfork and
            non-thread clone fail with EPERM in ``bwrap`` mode). Either way every process the
            program started is killed before the call returns.
        mode: ``"bwrap"`` (see :func:`sandbox_mode`) or ``"process"``: the weak fallback
            for trusted code (no namespaces; module docstring).
        tag: a word appended to both children's command lines (to find their processes).

    Returns:
        :class:`RunResult`.

    Raises:
        SandboxUnavailable: ``mode="bwrap"`` and bubblewrap cannot start.
        ValueError: unknown ``mode``, or an assertion that does not parse.
    """
    if mode not in ("bwrap", "process"):
        raise ValueError(f"mode must be 'bwrap' or 'process', not {mode!r}")
    if mode == "bwrap":
        sandbox_mode(False)  # raises SandboxUnavailable with the reason
    limits = [int(cpu_s), int(memory_mb) << 20, int(fsize_mb) << 20, int(nofile), int(nproc)]
    units = [harden_check(u) for u in assertions]
    passed, errors, status = [], [], "ok"
    for unit in units:
        ok, e, st, err = _run_one(mode, program, unit, reference, entry_point,
                                  per_s=float(assert_timeout_s), limits=limits,
                                  timeout_s=timeout_s, fsize_mb=fsize_mb, allow_fork=allow_fork,
                                  tag=tag or "contrastlab-sandbox")
        if mode == "bwrap" and not ok and err.startswith("bwrap:"):
            raise SandboxUnavailable(f"bubblewrap failed: {err.strip()}")
        passed.append(ok)
        errors.append(e)
        if status == "ok" and st != "ok":
            status = st
    return RunResult(passed, errors, status, mode=mode)
