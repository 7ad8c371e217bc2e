"""Run untrusted Python programs against test assertions: bubblewrap isolation + a nonce verdict.

Used to tier HumanEval variants (:mod:`contrastlab.data.humaneval`) and users' own
submissions (:mod:`contrastlab.data.submissions`). Public names: :func:`run_sandboxed`,
:func:`sandbox_mode`, :func:`harden_check`, :func:`tier_of`, :class:`RunResult`,
:class:`SandboxUnavailable`, :data:`TIERS`.

**Isolation.** Every assertion of every program runs in its own fresh process under
bubblewrap (``bwrap``): new user, pid, network, IPC, UTS and cgroup namespaces, no
capabilities, a read-only view of ``/usr`` and the interpreter's prefix only (site-packages
hidden), a private size-capped tmpfs as working directory, a private ``/proc``, an empty
environment, ``--die-with-parent``; the program is pid 1 of its pid namespace, so when it ends
(or is killed at the wall-clock limit) every process it started ends too. A seccomp filter
makes ``fork``/``vfork``/non-thread ``clone`` fail, and the trusted harness sets RLIMIT_CPU,
_AS, _FSIZE, _NOFILE, _NPROC and _CORE before any untrusted code runs.

**Verdict: a nonce the program cannot produce by ending early.** For each assertion process
the supervisor (this module, outside the sandbox) draws a fresh key ``K =
secrets.token_hex(32)`` and hands it to the harness through an inherited pipe (written and
closed before the sandbox starts). The harness (trusted code that runs first inside the
sandbox) reads ``K`` and closes that pipe before it compiles any untrusted code, and keeps
``K`` only in the closure of a local function. After ``check(candidate)`` *returned*, it
writes ``HMAC-SHA256(K, "contrastlab-check-returned:<i>")`` (hex, RFC 2104; ``i`` = the
assertion's index) to a second inherited pipe. The supervisor counts assertion ``i`` as
passed only if that pipe holds exactly the expected token (``hmac.compare_digest``); the exit
status only explains failures (exception name, timeout, signal). So ``os._exit(0)`` at import
or in the function, ``sys.exit(0)``/``raise SystemExit`` (caught by the harness), a signal
killing the process, or writing guessed tokens all end as a failed assertion.

**Type-strict checks** (:func:`harden_check`, applied to every assertion): every direct call
``candidate(...)`` in the test is wrapped so that its value must be built from exact built-in
types (``None``, ``bool``, ``int``, ``float``, ``complex``, ``str``, ``bytes``, ``list``,
``tuple``, ``dict``, ``set``, ``frozenset``, nested; subclasses and other classes raise
``TypeError``), and every single comparison ``a == b`` / ``a != b`` with a candidate call on
either side uses a structural equality: ``int``/``float``/``complex`` compare by value (so
``1 == 1.0``), ``bool`` is not a number (``True != 1``, ``[0] != [False]``), other values need
the same exact type, ``list``/``tuple``/``dict`` compare element by element with the same
rule, ``set``/``frozenset``/``str``/``bytes`` with their built-in ``==``. An object whose
``__eq__`` always returns ``True`` therefore fails. The check runs with a copy of the
built-ins taken before the program ran and in its own global namespace (the program's names
copied in, minus names that shadow a built-in), so rebinding ``abs`` or ``builtins.len``
does not change what the test computes.

**Audit hook** (PEP 578, installed by the harness right before the program is compiled):
``sys._getframe``, ``sys._current_frames``, ``sys.settrace``/``setprofile``, reading
``tb_frame``/``gi_frame``/``cr_frame``/``ag_frame``, ``gc.get_objects``/``get_referrers``/
``get_referents``, ``sys.addaudithook``, ``code.__new__``, opening anything under ``/proc``
(``/proc/self/mem``), and importing ``ctypes``, ``signal``/``_signal`` (which the harness also
strips of ``signal``/``set_wakeup_fd``, since a handler receives the current frame) and the
``_test*``/``_xx*`` modules are refused. These are the Python-level ways to reach the
harness's frame or closure and read ``K``. The price: honest code that formats a traceback
(``traceback.print_exc``), asks ``logging`` for its caller, or installs a signal handler fails
with that error. The harness also binds ``exec``, ``compile`` and the built-ins it uses before
the program runs, so rebinding ``builtins.exec``/``compile`` cannot swap the check for a no-op.

**What remains possible** (the candidate runs in the harness's interpreter): CPython audit
hooks are not a security boundary (PEP 578); a program that exploits an interpreter bug
(e.g. crafted bytecode through ``marshal.loads``, which imports need and so stays allowed)
can read the process memory and so ``K``. The check imports private copies, taken before
the program ran, of the modules in :data:`_PRIVATE_MODULES` (``math``, ``copy``, ``re``, ...),
so rebinding ``math.fabs`` does not reach it; but Python-level functions of those modules
still read their real module's globals (``copy.deepcopy``'s dispatch table), other modules
are shared, and the program's own helpers that a test calls are the program's. A program can
start threads, which run on while the check runs; a test that compares with chained comparisons
(``a == b == c``) or passes ``candidate`` itself to other code gets Python's own semantics.
Nothing the program writes (files, stdout, stderr) is read back except the token pipe, and
junk on that pipe makes the assertion fail. Where bubblewrap cannot start,
:func:`sandbox_mode` refuses (:class:`SandboxUnavailable`) unless the caller allows the weak
``process`` fallback for trusted code (same harness, nonce and checks; no namespaces).
"""

from __future__ import annotations

import ast
import builtins
import errno
import hashlib
import hmac
import json
import os
import platform
import secrets
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
    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id == "candidate":
            return ast.Call(ast.Name("_cl_ret", ast.Load()), [node], [])
        return node

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        self.generic_visit(node)
        if len(node.ops) == 1 and isinstance(node.ops[0], (ast.Eq, ast.NotEq)) and (
                _mentions(node.left, "candidate") or _mentions(node.comparators[0], "candidate")):
            call = ast.Call(ast.Name("_cl_eq", ast.Load()), [node.left, node.comparators[0]], [])
            return call if isinstance(node.ops[0], ast.Eq) else ast.UnaryOp(ast.Not(), call)
        return node


def harden_check(test_src: str) -> str:
    """Rewrite a test program for type-strict checking (rules in the module docstring).

    ``candidate(...)`` -> ``_cl_ret(candidate(...))`` (exact built-in types required) and a
    single ``x == y`` / ``x != y`` with a candidate call on either side -> ``_cl_eq(x, y)`` /
    ``not _cl_eq(x, y)``; the harness defines ``_cl_ret``/``_cl_eq`` in the check's own
    namespace. Rewriting twice only wraps twice (harmless).

    Args:
        test_src: Python source defining ``check(candidate)``.

    Returns:
        The rewritten source (``ast.unparse`` form).

    Raises:
        ValueError: the source does not parse.
    """
    try:
        tree = ast.parse(test_src)
    except SyntaxError as e:
        raise ValueError(f"test does not parse: {e}") from None
    return ast.unparse(ast.fix_missing_locations(_Harden().visit(tree)))


# ------------------------------------------------------------------ harness
#: Built-in exception names; the harness exits with ``_EXC_BASE + index`` so the supervisor
#: learns the name of the exception that ended an assertion from the exit status.
_EXC_NAMES = tuple(sorted(n for n, v in vars(builtins).items()
                          if isinstance(v, type) and issubclass(v, BaseException)))[:100]
_EXIT_TIMEOUT, _EXIT_CPU, _EXIT_OTHER, _EXC_BASE = 2, 3, 4, 10
_TOKEN_MSG = b"contrastlab-check-returned:"

#: Trusted code run first in every sandboxed process (``python -I -S -c``; argv: entry point,
#: alarm seconds, 5 rlimits, assertion index, key fd, token fd, tag). It reads the program and
#: one assertion from stdin and the key from the key pipe (then closed), points fds 0-2 at
#: /dev/null, lowers its rlimits, installs the audit hook, runs program + assertion, writes the
#: token only if ``check(candidate)`` returned, and exits with a code naming the outcome.
_HARNESS = r'''
import builtins, hmac, json, os, resource as R, signal, sys, typing
def _main():
    _exit, _write, _digest, _setitimer = os._exit, os.write, hmac.digest, signal.setitimer
    _type, _id, _len, _zip, _isinstance = type, id, len, zip, isinstance
    _exec, _compile = exec, compile  # a program may rebind builtins.exec/compile
    _str, _bytes, _frozenset = str, bytes, frozenset
    _list, _tuple, _dict, _set = list, tuple, dict, set
    _TypeError, _ValueError = TypeError, ValueError
    _PermissionError, _ImportError = PermissionError, ImportError
    _REAL = signal.ITIMER_REAL
    names = __NAMES__
    a = sys.argv
    entry, per_s = a[1], float(a[2])
    cpu, mem, fsize, nofile, nproc = (int(x) for x in a[3:8])
    rfd = int(a[10])
    data = json.loads(sys.stdin.buffer.read())
    program, unit = data.pop("program"), data.pop("unit")
    del data
    def _sealed(k, msg):
        def earn():
            _write(rfd, _digest(k, msg, "sha256").hex().encode())
        return earn
    earn = _sealed(os.read(int(a[9]), 256), __MSG__ + a[8].encode())
    os.close(int(a[9]))
    _digest(b"k", b"warm-up", "sha256")  # everything the token needs is loaded now
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
    import _signal
    for m in (signal, _signal):  # a handler receives the running frame: no new handlers
        for n in ("signal", "set_wakeup_fd"):
            if hasattr(m, n):
                delattr(m, n)
    snap = dict(builtins.__dict__)
    # private copies of common modules for the check: rebinding math.fabs & co. in the real
    # modules does not reach the test (C functions look nothing up at call time)
    ModuleType = _type(sys)
    private, by_id = {}, {}
    for name in __PRIVATE__:
        real = __import__(name)
        mod = ModuleType(name)
        mod.__dict__.update(real.__dict__)
        private[name], by_id[_id(real)] = mod, mod
    _import = builtins.__import__
    def _check_import(name, globals=None, locals=None, fromlist=(), level=0):
        if level == 0 and name in private:
            return private[name]
        return _import(name, globals, locals, fromlist, level)
    snap["__import__"] = _check_import
    plain = _frozenset(map(_id, (_type(None), bool, int, float, complex, _str, _bytes, _list,
                                 _tuple, _dict, _set, _frozenset)))
    nums = _frozenset(map(_id, (int, float, complex)))
    def _cl_ret(v):
        stack, seen = [v], _set()
        while stack:
            x = stack.pop()
            t = _type(x)
            if _id(t) not in plain:
                raise _TypeError("candidate returned a value of type %s, not built from "
                                "built-in types" % t.__name__)
            if t is _list or t is _tuple or t is _set or t is _frozenset or t is _dict:
                if _id(x) in seen:
                    continue
                seen.add(_id(x))
                stack.extend(x)
                if t is _dict:
                    stack.extend(x.values())
        return v
    def _cl_eq(x, y):
        tx, ty = _type(x), _type(y)
        if _id(tx) in nums and _id(ty) in nums:
            return x == y
        if tx is not ty:
            return False
        if tx is _list or tx is _tuple:
            if _len(x) != _len(y):
                return False
            for u, v in _zip(x, y):
                if not _cl_eq(u, v):
                    return False
            return True
        if tx is _dict:
            if _len(x) != _len(y):
                return False
            for k, v in y.items():
                if k not in x or not _cl_eq(x[k], v):
                    return False
            return True
        return (x == y) is True
    hook_frames = _frozenset({"sys._getframe", "sys._current_frames", "sys._current_exceptions",
                              "sys.settrace", "sys.setprofile"})
    hook_refuse = _frozenset({"gc.get_objects", "gc.get_referrers", "gc.get_referents",
                              "sys.addaudithook", "code.__new__"})
    hook_attrs = _frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame"})
    hook_mods = _frozenset({"ctypes", "_ctypes", "signal", "_signal"})
    def _hook(event, args):
        if event in hook_frames:
            raise _ValueError("sandbox: %s is refused" % event)
        if event in hook_refuse or event.startswith("ctypes."):
            raise _PermissionError("sandbox: %s is refused" % event)
        if event == "object.__getattr__" and _len(args) > 1 and args[1] in hook_attrs:
            raise _PermissionError("sandbox: reading %s is refused" % args[1])
        if event == "open" and args and _isinstance(args[0], (_str, _bytes)):
            p = args[0] if _isinstance(args[0], _str) else args[0].decode("utf-8", "replace")
            if p == "/proc" or p.startswith("/proc/"):
                raise _PermissionError("sandbox: /proc is refused")
        if event == "import" and args:
            m = _str(args[0])
            if m in hook_mods or m.startswith("_test") or m.startswith("_xx"):
                raise _ImportError("sandbox: importing %s is refused" % m)
    code = __OTHER__
    try:
        try:
            _setitimer(_REAL, per_s)
            sys.addaudithook(_hook)
            # the program's own namespace; the check gets a copy without built-in names
            ns = {"__name__": "__candidate__"}
            _exec(_compile(program, "program.py", "exec"), ns)
            g = {k: by_id.get(_id(v), v) for k, v in ns.items() if k not in snap}
            g.update(__name__="__check__", __builtins__=_dict(snap), _cl_ret=_cl_ret,
                     _cl_eq=_cl_eq)
            _exec(_compile(unit, "check.py", "exec"), g)
            g["check"](ns[entry])
            earn()
            code = 0
        finally:
            _setitimer(_REAL, 0)
    except _Timeout:
        code = __TIMEOUT__
    except _CpuLimit:
        code = __CPU__
    except BaseException as e:
        n = _type(e).__name__
        builtin = n in names and _type(e).__module__ == "builtins"
        code = __BASE__ + names.index(n) if builtin else __OTHER__
    _exit(code)
_main()
'''
#: Modules the check imports as private copies taken before the program ran.
_PRIVATE_MODULES = ("bisect", "cmath", "collections", "copy", "functools", "heapq", "itertools",
                    "math", "operator", "random", "re", "string")
for _k, _v in {"__NAMES__": repr(_EXC_NAMES), "__MSG__": repr(_TOKEN_MSG),
               "__PRIVATE__": repr(_PRIVATE_MODULES),
               "__OTHER__": str(_EXIT_OTHER), "__TIMEOUT__": str(_EXIT_TIMEOUT),
               "__CPU__": str(_EXIT_CPU), "__BASE__": str(_EXC_BASE)}.items():
    _HARNESS = _HARNESS.replace(_k, _v)


def _expected_token(key: bytes, index: int) -> bytes:
    """What the harness writes after check ``index`` returned: hex HMAC-SHA256 (RFC 2104)."""
    return hmac.new(key, _TOKEN_MSG + str(index).encode(), hashlib.sha256).hexdigest().encode()


def _verdict(rc: int | None, token_ok: bool, got_bytes: bool) -> tuple[bool, str, str]:
    """(passed, error name, status) of one assertion process: passed iff the token is right;
    the exit status names the failure."""
    if token_ok:
        return True, "", "ok"
    if rc is None:
        return False, "Timeout", "timeout"
    if rc == 0:  # ended with status 0 without the token: os._exit(0) before the check returned
        return False, ("BadToken" if got_bytes else "exit:0"), ("ok" if got_bytes else "exit:0")
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



def _read_available(fd: int, limit: int = 4096) -> bytes:
    """What is in pipe ``fd`` now (non-blocking; a writer left alive cannot stall us)."""
    os.set_blocking(fd, False)
    buf = b""
    while len(buf) < limit:
        try:
            chunk = os.read(fd, limit - len(buf))
        except BlockingIOError:
            break
        if not chunk:
            break
        buf += chunk
    return buf


def _run_one(mode: str, payload: bytes, args: list[str], *, index: int, timeout_s: float,
             fsize_mb: int, allow_fork: bool, tag: str) -> tuple[int | None, str, bool, bool]:
    """One harness process for assertion ``index``.

    Returns (exit status or ``None`` after the wall-clock kill, bwrap's stderr, token right,
    token pipe non-empty). Every process the program started is gone when this returns: in
    ``bwrap`` mode the program is pid 1 of its pid namespace, whose exit (or kill) ends all
    its descendants, and the kernel finishes that before the sandbox's exit is reported."""
    exe, _ = _interpreter()
    key = secrets.token_hex(32).encode()
    key_r, key_w = os.pipe()
    res_r, res_w = os.pipe()
    os.write(key_w, key)  # 64 bytes < PIPE_BUF: never blocks
    os.close(key_w)
    cmd_tail = [exe, "-I", "-S", "-c", _HARNESS, *args, str(index), str(key_r), str(res_w), tag]
    rc: int | None
    try:
        with tempfile.TemporaryFile() as err:
            if mode == "process":
                with tempfile.TemporaryDirectory(prefix="sbx_run_") as cwd:
                    try:
                        proc = subprocess.Popen(cmd_tail, stdin=subprocess.PIPE,
                                                stdout=subprocess.DEVNULL, stderr=err, env={},
                                                cwd=cwd, start_new_session=True,
                                                pass_fds=(key_r, res_w))
                    finally:
                        os.close(key_r)
                        os.close(res_w)
                        key_r = res_w = -1
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
                got = _read_available(res_r)
                return rc, "", hmac.compare_digest(got, _expected_token(key, index)), bool(got)
            info_r, info_w = os.pipe()
            sec_fd = None
            fds = [info_w, key_r, res_w]
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
                for fd in (info_w, key_r, res_w):
                    os.close(fd)
                key_r = res_w = -1
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
            got = _read_available(res_r)
            err.seek(0)
            return (rc, err.read(4000).decode(errors="replace"),
                    hmac.compare_digest(got, _expected_token(key, index)), bool(got))
    finally:
        for fd in (key_r, res_w, res_r):
            if fd >= 0:
                os.close(fd)


_PROBE: dict[str, str] = {}


def sandbox_mode(allow_unsandboxed: bool = False) -> str:
    """``"bwrap"`` when bubblewrap starts a sandboxed Python here (probed once per process: a
    one-assertion program must earn its token), else ``"process"`` if ``allow_unsandboxed``
    (the weaker guard: separate process, rlimits, process group; for trusted code only).

    Raises:
        SandboxUnavailable: bubblewrap is missing or cannot start (message says why and how
            to fix it) and ``allow_unsandboxed`` is false.
    """
    if "bwrap" not in _PROBE:
        if shutil.which("bwrap") is None:
            _PROBE["bwrap"] = "bwrap is not installed (Debian/Ubuntu package: bubblewrap)"
        else:
            payload = json.dumps({"program": "def f():\n    return 1\n",
                                  "unit": harden_check("def check(candidate):\n"
                                                       "    assert candidate() == 1\n")})
            rc, err, ok, _ = _run_one("bwrap", payload.encode(), ["f", "5", "5", str(256 << 20),
                                      str(1 << 20), "64", "64"], index=0, timeout_s=30,
                                      fsize_mb=1, allow_fork=False, tag="probe")
            _PROBE["bwrap"] = "" if ok else (err.strip() or f"exit status {rc}, no token")
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
    if any(passed):
        return "PARTIAL"
    return "FAIL"


@dataclass
class RunResult:
    """Per-assertion outcome of one program: ``passed[i]`` (the assertion's token came back)
    and ``errors[i]`` (``""`` when passed; else a built-in exception name, ``Timeout``,
    ``CpuLimit``, ``killed:<signal>``, ``exit:<code>`` (``exit:0``: the process ended before
    the check returned), ``BadToken`` (wrong bytes on the token pipe), or ``Exception`` for an
    exception class that is not a built-in)."""

    passed: list[bool]
    errors: list[str]
    status: str  # "ok" | "timeout" | "killed:<signal>" | "exit:<code>" (first abnormal end)
    tier: str = field(default="")
    mode: str = field(default="bwrap")

    def __post_init__(self):
        self.tier = tier_of(self.passed)


def run_sandboxed(program: str, assertions: list[str], entry_point: str, *,
                  timeout_s: float = 3.0, assert_timeout_s: float = 1.0, cpu_s: int = 2,
                  memory_mb: int = 512, fsize_mb: int = 1, nofile: int = 64, nproc: int = 16,
                  allow_fork: bool = False, mode: str = "bwrap", tag: str = "") -> RunResult:
    """Run ``program`` against each assertion, one fresh sandboxed process per assertion.

    Assertion ``i`` passed only if its process wrote the HMAC token of its fresh key after
    ``check(candidate)`` returned (module docstring); every assertion is first rewritten by
    :func:`harden_check` (type-strict values and ``==``).

    Args:
        program: the program's source (defines ``entry_point``).
        assertions: programs each defining ``check(candidate)``
            (e.g. from :func:`contrastlab.data.humaneval.split_assertions`).
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
        ValueError: unknown ``mode``, or an assertion that does not parse.
    """
    if mode not in ("bwrap", "process"):
        raise ValueError(f"mode must be 'bwrap' or 'process', not {mode!r}")
    if mode == "bwrap":
        sandbox_mode(False)  # raises SandboxUnavailable with the reason
    args = [entry_point, str(assert_timeout_s), str(int(cpu_s)), str(int(memory_mb) << 20),
            str(int(fsize_mb) << 20), str(int(nofile)), str(int(nproc))]
    units = [harden_check(u) for u in assertions]
    passed, errors, status = [], [], "ok"
    for i, unit in enumerate(units):
        payload = json.dumps({"program": program, "unit": unit}).encode()
        rc, err, ok, got = _run_one(mode, payload, args, index=i, timeout_s=timeout_s,
                                    fsize_mb=fsize_mb, allow_fork=allow_fork,
                                    tag=tag or "contrastlab-sandbox")
        if mode == "bwrap" and rc == 1 and err.startswith("bwrap:"):
            raise SandboxUnavailable(f"bubblewrap failed: {err.strip()}")
        ok, e, st = _verdict(rc, ok, got)
        passed.append(ok)
        errors.append(e)
        if status == "ok" and st != "ok":
            status = st
    return RunResult(passed, errors, status, mode=mode)
