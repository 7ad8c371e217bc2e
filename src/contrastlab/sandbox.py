"""Run untrusted Python programs against test assertions; a verdict the program cannot forge.

Used to tier HumanEval variants (:mod:`contrastlab.data.humaneval`) and users' own
submissions (:mod:`contrastlab.data.submissions`). The full threat model, with the attacks
tested, is in ``docs/multilabel.md`` (section "Sandbox").

**Two processes per assertion; the program never runs where the verdict is made.** The
*server* (:data:`contrastlab.sandbox_programs.SERVER`) runs the program under bubblewrap and
answers calls of its entry point; it holds no secret. The *checker*
(:data:`contrastlab.sandbox_programs.CHECKER`), an ordinary child that never executes the
program, runs the trusted reference program and the assertion in one namespace and calls
``check(candidate)`` with a proxy that sends encoded arguments to the server over a pipe. It
writes its verdict, with the supervisor's per-assertion nonce, to a pipe only the supervisor
holds. The assertion passed only if the checker reports that ``check(candidate)`` returned and
the server answered every call; the server's exit status only names failures.

Guaranteed in ``bwrap`` mode: no forged verdict (the server is pid 1 of its own pid, user,
network, IPC, UTS and cgroup namespaces, private ``/proc``, no capabilities, only its two
pipes); only exact built-in values come back (anything else is a ``TypeError``; a
``StopIteration`` becomes ``RuntimeError``, as PEP 479); malformed or oversized answers
(:data:`~contrastlab.sandbox_programs.MAX_MESSAGE`, the checker's RLIMIT_AS) and timeouts
fail the assertion even if the test catches them; the check's names are the reference's and
the assertion's, never the program's; type-strict ``==`` (:func:`harden_check`); a seccomp
filter against fork (unless ``allow_fork``), rlimits, a size-capped tmpfs, an empty
environment, and every process the program started is killed before the call returns.

Not guaranteed: the reference and the test run unsandboxed (trusted tests only); identity
checks, the program's globals, mutations nested in tuples, non-value arguments; chained
comparisons use Python's ``==``; wall-clock limits depend on load; kernel or bubblewrap
escapes. The weak ``process`` mode (no bubblewrap) is for trusted code only.
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
