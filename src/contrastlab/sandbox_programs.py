"""The two child programs of :mod:`contrastlab.sandbox` and the value format they exchange.

- :data:`SERVER` runs the untrusted program (inside bubblewrap): it executes the program,
  then answers calls of its entry point, one message per call, until its request pipe closes.
  It holds no secret and writes nothing the supervisor trusts.
- :data:`CHECKER` runs the trusted side (never any submission code): it executes the
  reference program and one assertion of the test, calls ``check(candidate)`` where
  ``candidate`` is a proxy that sends the arguments to the server and decodes its answer,
  and writes the verdict to a pipe only the supervisor reads.

Both are sources for ``python -I -S -c`` (no site-packages, no environment, no project on
the path), so they share the codec below as text.

Messages: a 4-byte big-endian length, then UTF-8 JSON. Values (arguments, return values) are
built only from exact built-in types and encoded as: ``None``/``bool``/``str`` as JSON;
``["i", hex]`` int, ``["f", float.hex()]`` float, ``["c", re, im]`` complex, ``["b", hex]``
bytes, ``["l"|"t"|"s"|"z", [items]]`` list/tuple/set/frozenset, ``["d", [[k, v], ...]]`` dict.
The checker decodes with this grammar only (anything else is a ``BadResponse``), so what
comes back from the program is data of exact built-in types: no object of the program's
classes, no ``__eq__`` of its own, ever reaches the check.
"""

from __future__ import annotations

import builtins

__all__ = ["CHECKER", "EXC_NAMES", "EXIT_CPU", "EXIT_OTHER", "EXIT_TIMEOUT", "EXC_BASE",
           "MAX_MESSAGE", "SERVER"]

#: Built-in exception names; a process exits with ``EXC_BASE + index`` so the supervisor
#: learns the name of the exception that ended it from the exit status.
EXC_NAMES = tuple(sorted(n for n, v in vars(builtins).items()
                         if isinstance(v, type) and issubclass(v, BaseException)))[:100]
EXIT_TIMEOUT, EXIT_CPU, EXIT_OTHER, EXC_BASE = 2, 3, 4, 10
#: Largest message (bytes) the checker accepts from the program.
MAX_MESSAGE = 64 << 20

_CODEC = r'''
import json as _json, os as _os, struct as _struct
_MAXDEPTH = 400
_failed = []  # the checker's own failures, first first: a check that catches one still fails
class _Stop(BaseException):
    def __init__(self):
        _failed.append(type(self))
class _Bad(_Stop):
    pass
class _Gone(_Stop):
    pass
def _enc(v, d=0):
    t = type(v)
    if d > _MAXDEPTH:
        raise RecursionError("value nested too deeply")
    if v is None or t is bool or t is str:
        return v
    if t is int:
        return ["i", "%x" % v]
    if t is float:
        return ["f", v.hex()]
    if t is complex:
        return ["c", v.real.hex(), v.imag.hex()]
    if t is bytes:
        return ["b", v.hex()]
    if t is list or t is tuple or t is set or t is frozenset:
        tag = "l" if t is list else "t" if t is tuple else "s" if t is set else "z"
        return [tag, [_enc(x, d + 1) for x in v]]
    if t is dict:
        return ["d", [[_enc(k, d + 1), _enc(x, d + 1)] for k, x in v.items()]]
    raise TypeError("value of type %s, not built from built-in types" % t.__name__)
def _dec(x, d=0):
    t = type(x)
    if x is None or t is bool or t is str:
        return x
    if t is not list or len(x) < 2 or type(x[0]) is not str or d > _MAXDEPTH:
        raise _Bad()
    g, n = x[0], len(x)
    try:
        if g == "i" and n == 2 and type(x[1]) is str:
            return int(x[1], 16)
        if g == "f" and n == 2 and type(x[1]) is str:
            return float.fromhex(x[1])
        if g == "c" and n == 3 and type(x[1]) is str and type(x[2]) is str:
            return complex(float.fromhex(x[1]), float.fromhex(x[2]))
        if g == "b" and n == 2 and type(x[1]) is str:
            return bytes.fromhex(x[1])
    except (ValueError, OverflowError):
        raise _Bad() from None
    if n != 2 or type(x[1]) is not list:
        raise _Bad()
    if g == "l":
        return [_dec(y, d + 1) for y in x[1]]
    if g == "t":
        return tuple(_dec(y, d + 1) for y in x[1])
    try:
        if g == "s":
            return set(_dec(y, d + 1) for y in x[1])
        if g == "z":
            return frozenset(_dec(y, d + 1) for y in x[1])
        if g == "d":
            out = {}
            for kv in x[1]:
                if type(kv) is not list or len(kv) != 2:
                    raise _Bad()
                out[_dec(kv[0], d + 1)] = _dec(kv[1], d + 1)
            return out
    except TypeError:  # an unhashable element
        raise _Bad() from None
    raise _Bad()
def _send(fd, obj):
    data = _json.dumps(obj, separators=(",", ":")).encode()
    data = _struct.pack(">I", len(data)) + data
    while data:
        data = data[_os.write(fd, data):]
def _read_n(fd, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = _os.read(fd, min(n - len(buf), 1 << 20))
        if not chunk:
            return None
        buf += chunk
    return buf
def _recv(fd, cap):
    head = _read_n(fd, 4)
    if head is None:
        return None
    n = _struct.unpack(">I", head)[0]
    if n > cap:
        raise _Bad()
    body = _read_n(fd, n)
    if body is None:
        return None
    try:
        return _json.loads(body)
    except (ValueError, RecursionError):
        raise _Bad() from None
'''

#: The untrusted side (argv: request fd, response fd, tag; stdin: JSON with ``program``,
#: ``entry``, ``per_s``, ``limits`` = [cpu s, address space, file size, nofile, nproc]).
#: Exit status: 0 when the request pipe closed, ``EXIT_TIMEOUT``/``EXIT_CPU`` at its alarm
#: or CPU limit, ``EXC_BASE + i`` when loading the program raised built-in exception ``i``.
SERVER = _CODEC + r'''
import resource as _R, signal as _signal, sys as _sys
def _main():
    a = _sys.argv
    req, resp = int(a[1]), int(a[2])
    data = _json.loads(_sys.stdin.buffer.read())
    program, entry, per_s = data["program"], data["entry"], float(data["per_s"])
    cpu, mem, fsize, nofile, nproc = (int(x) for x in data["limits"])
    del data
    names = __NAMES__
    null = _os.open(_os.devnull, _os.O_RDWR)
    for fd in (0, 1, 2):
        _os.dup2(null, fd)
    _os.close(null)
    for lim, want in ((_R.RLIMIT_CPU, (cpu, cpu + 1)), (_R.RLIMIT_AS, (mem, mem)),
                      (_R.RLIMIT_FSIZE, (fsize, fsize)), (_R.RLIMIT_NOFILE, (nofile, nofile)),
                      (_R.RLIMIT_NPROC, (nproc, nproc)), (_R.RLIMIT_CORE, (0, 0))):
        hard = _R.getrlimit(lim)[1]
        _R.setrlimit(lim, tuple(v if hard == _R.RLIM_INFINITY else min(v, hard) for v in want))
    class _Timeout(BaseException):
        pass
    class _CpuLimit(BaseException):
        pass
    def _alarm(signum, frame):
        raise _Timeout()
    def _xcpu(signum, frame):
        raise _CpuLimit()
    _signal.signal(_signal.SIGALRM, _alarm)
    _signal.signal(_signal.SIGXCPU, _xcpu)
    def _builtin_name(e):
        for c in type(e).__mro__:
            if c.__module__ == "builtins" and c.__name__ in names:
                return c.__name__
        return "BaseException"
    code = __OTHER__
    try:
        try:
            _signal.setitimer(_signal.ITIMER_REAL, per_s)
            ns = {"__name__": "__candidate__"}
            exec(compile(program, "program.py", "exec"), ns)
            fn = ns[entry]
            _send(resp, {"ready": 1})
            while True:
                msg = _recv(req, 1 << 62)
                if msg is None:
                    break
                args = [_dec(x) for x in msg["a"]]
                kw = {k: _dec(v) for k, v in msg["k"].items()}
                try:
                    out = {"r": _enc(fn(*args, **kw))}
                    out["m"] = [_enc(x) if type(x) in (list, dict, set) else None for x in args]
                except (_Timeout, _CpuLimit):
                    raise
                except BaseException as e:
                    t = type(e)
                    plain = t.__module__ == "builtins" and t.__name__ in names
                    out = {"e": t.__name__ if plain else "", "b": _builtin_name(e)}
                _send(resp, out)
            code = 0
        finally:
            _signal.setitimer(_signal.ITIMER_REAL, 0)
    except _Timeout:
        code = __TIMEOUT__
    except _CpuLimit:
        code = __CPU__
    except BaseException as e:
        n = type(e).__name__
        builtin = n in names and type(e).__module__ == "builtins"
        code = __BASE__ + names.index(n) if builtin else __OTHER__
    _os._exit(code)
_main()
'''

#: The trusted side (argv: request fd, response fd, verdict fd, tag; stdin: JSON with
#: ``reference``, ``unit``, ``per_s``, ``cpu``, ``mem`` (its RLIMIT_AS), ``nonce``). It writes
#: one JSON verdict: ``{"nonce", "ok", "err", "gone"}`` (``gone``: the program's process ended
#: or closed its pipe before the check returned; the supervisor then names the failure from its
#: exit status). Its own failures (``Timeout``, ``BadResponse``, ``gone``) are recorded when
#: raised, so a check that catches them (``except:``) and returns still fails.
CHECKER = _CODEC + r'''
import builtins as _builtins, resource as _R, signal as _signal, sys as _sys
def _main():
    a = _sys.argv
    req, resp, ver = int(a[1]), int(a[2]), int(a[3])
    data = _json.loads(_sys.stdin.buffer.read())
    names = __NAMES__
    null = _os.open(_os.devnull, _os.O_RDWR)
    for fd in (0, 1, 2):
        _os.dup2(null, fd)
    _os.close(null)
    cpu = int(data["cpu"]) + 1
    hard = _R.getrlimit(_R.RLIMIT_CPU)[1]
    _R.setrlimit(_R.RLIMIT_CPU, (cpu, cpu + 1) if hard == _R.RLIM_INFINITY else (min(cpu, hard), hard))
    for lim, v in ((_R.RLIMIT_CORE, 0), (_R.RLIMIT_AS, int(data["mem"]))):
        hard = _R.getrlimit(lim)[1]
        _R.setrlimit(lim, (v, v) if hard == _R.RLIM_INFINITY else (min(v, hard), hard))
    class _Timeout(_Stop):
        pass
    def _alarm(signum, frame):
        raise _Timeout()
    _signal.signal(_signal.SIGALRM, _alarm)
    _signal.signal(_signal.SIGPIPE, _signal.SIG_IGN)
    def _raise_from(msg):
        e, b = msg.get("e"), msg.get("b")
        if type(e) is not str or type(b) is not str:
            raise _Bad()
        cls = getattr(_builtins, e, None) if e in names else None
        if cls is None:
            base = getattr(_builtins, b, None) if b in names else None
            if not (isinstance(base, type) and issubclass(base, BaseException)):
                base = Exception
            if base in (BaseException, Exception) or issubclass(base, (SystemExit, KeyboardInterrupt, GeneratorExit)):
                base = Exception
            try:
                cls = type("SubmissionError", (base,), {"__module__": "__submission__"})
            except TypeError:
                cls = type("SubmissionError", (Exception,), {"__module__": "__submission__"})
        if issubclass(cls, (StopIteration, StopAsyncIteration)):
            cls = RuntimeError  # as PEP 479: a call cannot silently end the check's map/zip/for
        raise cls("raised by the program under test")
    def candidate(*args, **kw):
        if _failed:  # the harness failed before (and the check went on): no more calls
            raise _failed[0]()
        try:
            enc_a, enc_k = [_enc(x) for x in args], {k: _enc(v) for k, v in kw.items()}
        except (TypeError, RecursionError):
            raise TypeError("an argument cannot be passed to the sandboxed program") from None
        try:
            _send(req, {"a": enc_a, "k": enc_k})
            msg = _recv(resp, __CAP__)
            if msg is None:
                raise _Gone()
            if type(msg) is not dict:
                raise _Bad()
            if "e" not in msg:
                if "r" not in msg or type(msg.get("m")) is not list or len(msg["m"]) != len(args):
                    raise _Bad()
                ret, news = _dec(msg["r"]), [None if m is None else _dec(m) for m in msg["m"]]
        except (BrokenPipeError, ConnectionResetError):
            raise _Gone() from None
        except MemoryError:  # a reply too large for the checker's memory limit
            raise _Bad() from None
        if "e" in msg:
            _raise_from(msg)
        for x, new in zip(args, news):  # the program changed an argument in place
            if new is None:
                continue
            if type(x) is list and type(new) is list:
                x[:] = new
            elif type(x) is dict and type(new) is dict or type(x) is set and type(new) is set:
                x.clear()
                x.update(new)
        return ret
    nums = (int, float, complex)
    def _cl_ret(v):
        return v  # decoded values are built from exact built-in types by construction
    def _cl_eq(x, y):
        tx, ty = type(x), type(y)
        if tx in nums and ty in nums:
            return x == y
        if tx is not ty:
            return False
        if tx is list or tx is tuple:
            if len(x) != len(y):
                return False
            for u, v in zip(x, y):
                if not _cl_eq(u, v):
                    return False
            return True
        if tx is dict or tx is set or tx is frozenset:  # keys and elements type-strict too
            if len(x) != len(y):
                return False
            keys = {k: k for k in x}  # y's key -> x's equal key
            for k in y:
                if k not in keys or not _cl_eq(keys[k], k) or tx is dict and not _cl_eq(x[k], y[k]):
                    return False
            return True
        return (x == y) is True
    ok, err = False, ""
    try:
        try:
            _signal.setitimer(_signal.ITIMER_REAL, float(data["per_s"]))
            first = _recv(resp, 1 << 10)
            if first is None:
                raise _Gone()
            if first != {"ready": 1}:
                raise _Bad()
            g = {"__name__": "__check__"}
            exec(compile(data["reference"], "reference.py", "exec"), g)
            g.update(_cl_ret=_cl_ret, _cl_eq=_cl_eq)
            exec(compile(data["unit"], "check.py", "exec"), g)
            g["check"](candidate)
            ok = True
        finally:
            _signal.setitimer(_signal.ITIMER_REAL, 0)
    except BaseException as e:
        n = type(e).__name__
        err = n if n in names and type(e).__module__ == "builtins" else "Exception"
    if _failed:  # even if the check caught it and returned
        ok, err = False, {_Timeout: "Timeout", _Bad: "BadResponse"}.get(_failed[0], "")
    try:
        _os.close(req)
    except OSError:
        pass
    _os.write(ver, _json.dumps({"nonce": data["nonce"], "ok": ok, "err": err,
                                "gone": _failed[:1] == [_Gone]}).encode())
    _os._exit(0)
_main()
'''

for _k, _v in {"__NAMES__": repr(EXC_NAMES), "__OTHER__": str(EXIT_OTHER),
               "__TIMEOUT__": str(EXIT_TIMEOUT), "__CPU__": str(EXIT_CPU),
               "__BASE__": str(EXC_BASE), "__CAP__": str(MAX_MESSAGE)}.items():
    SERVER = SERVER.replace(_k, _v)
    CHECKER = CHECKER.replace(_k, _v)
