"""Process isolation for :mod:`contrastlab.sandbox`: the bubblewrap command line, a seccomp
filter that forbids creating processes, and small pipe/process helpers.

bubblewrap: https://github.com/containers/bubblewrap (``bwrap(1)``); seccomp classic-BPF
filters: Linux ``Documentation/userspace-api/seccomp_filter.rst``.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import platform
import select
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["bwrap_argv", "interpreter", "kill_sandbox", "no_fork_filter", "read_available",
           "read_child_pid"]


# --- seccomp: deny creating processes (threads stay allowed) --------------------------------
_BPF_LD_W_ABS, _BPF_JEQ, _BPF_JGE, _BPF_JSET, _BPF_RET = 0x20, 0x15, 0x35, 0x45, 0x06
_RET_ALLOW, _RET_KILL = 0x7FFF0000, 0x80000000
_RET_EPERM, _RET_ENOSYS = 0x00050000 | errno.EPERM, 0x00050000 | errno.ENOSYS
_CLONE_THREAD = 0x00010000
#: machine -> (AUDIT_ARCH value, clone, clone3, other process-creating syscalls, x32 bit)
_SYSCALLS = {"x86_64": (0xC000003E, 56, 435, (57, 58), 0x40000000),  # fork 57, vfork 58
             "aarch64": (0xC00000B7, 220, 435, (), 0)}


def no_fork_filter() -> bytes | None:
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


def interpreter() -> tuple[str, list[str]]:
    """The real Python binary and the folders (outside /usr) it needs: its prefixes."""
    exe = os.path.realpath(sys.executable)
    dirs = {os.path.realpath(sys.base_prefix), os.path.realpath(sys.base_exec_prefix),
            os.path.dirname(os.path.dirname(exe))}
    keep = sorted(d for d in dirs if d != "/" and not (d == "/usr" or d.startswith("/usr/")))
    return exe, [d for d in keep if not any(d != o and d.startswith(o + "/") for o in keep)]


def bwrap_argv(tmp_bytes: int, seccomp_fd: int | None, info_fd: int) -> list[str]:
    """bwrap options: new user (uid/gid 65534), pid (the program is pid 1, so its exit tears
    the namespace down), network (loopback only, down), IPC, UTS and cgroup namespaces; no
    capabilities, no nested user namespaces, a new session, killed with its parent; a
    read-only view of /usr (+ /bin, /lib* links), ld.so.cache and the interpreter's prefix
    with its site-packages hidden; a private /proc, a minimal /dev and a size-capped tmpfs
    /tmp as the only writable place and working directory (the root is read-only). No /etc
    (but ld.so.cache), no home, no project folder, an empty environment."""
    exe, prefixes = interpreter()
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


def read_child_pid(fd: int, deadline: float) -> int | None:
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


def read_available(fd: int, limit: int = 4096) -> bytes:
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


def kill_sandbox(proc: subprocess.Popen, pidfd: int | None, wait_s: float = 5.0) -> None:
    """End a sandboxed process and everything it started, and reap it.

    With ``pidfd`` (the sandbox's pid 1, from bwrap's ``--info-fd``) the pid namespace goes
    with its pid 1, and the kernel has emptied it when the pidfd turns readable; without it
    (the ``process`` mode) the process group is killed (a ``setsid`` child escapes there)."""
    if pidfd is not None:
        with contextlib.suppress(ProcessLookupError):
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        select.select([pidfd], [], [], wait_s)
    else:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    try:
        proc.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        proc.kill()  # bwrap itself: --die-with-parent then ends the sandbox
        proc.wait()
