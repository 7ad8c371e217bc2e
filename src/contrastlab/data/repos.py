"""Repository sources for the code retrieval track: installed distributions, git, local folders.

Each source becomes one folder of Python files under the output directory plus an entry in
``manifest.json`` (name, kind, version or commit, number of files, licence file). Nothing
is imported or executed: files are copied as bytes.

- ``dist``: an installed Python distribution (offline default). Its ``.py`` files listed in
  the distribution's ``RECORD`` are copied; the version comes from ``importlib.metadata``.
- ``git``: an ``https://``, ``ssh://``, ``git@host:path`` or ``file://`` URL pinned to a
  commit. Cloned with hooks disabled (``core.hooksPath=/dev/null``) and no submodules, then
  checked out detached at the commit; the ``.git`` folder is dropped. A URL or ref that
  starts with ``-`` (could be read as a git option) or uses another transport is refused.
- ``path``: a local folder; its ``.py`` files are copied.
"""

from __future__ import annotations

import importlib.metadata as md
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from ..errors import InputError

__all__ = ["UnsafeGitSource", "validate_git_url", "validate_git_ref", "fetch_dist",
           "fetch_git", "fetch_path", "fetch_sources"]

LICENSE_RE = re.compile(r"^(licen[sc]e|copying|notice)([._-].*)?$", re.IGNORECASE)
_URL_RE = re.compile(r"^(https://|ssh://|file://)[^\s]+$")
_SCP_RE = re.compile(r"^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:[A-Za-z0-9._~/-]+$")
_REF_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]*$")


class UnsafeGitSource(ValueError):
    """A git URL or ref that is not allowed (wrong scheme, or readable as an option)."""


def validate_git_url(url: str) -> str:
    """Accept only ``https://``, ``ssh://``, ``file://`` and scp-like ``user@host:path`` URLs.

    Raises:
        UnsafeGitSource: the URL starts with ``-``, contains whitespace or control characters,
            or uses another transport (``ext::``, ``http://``, ``fd::``, plain paths...).
    """
    if not isinstance(url, str) or not url or url.startswith("-"):
        raise UnsafeGitSource(f"git URL {url!r} refused: could be read as a git option")
    if any(ord(c) < 32 or c.isspace() for c in url) or "::" in url:
        raise UnsafeGitSource(f"git URL {url!r} refused: whitespace, control characters or '::'")
    if not (_URL_RE.match(url) or _SCP_RE.match(url)):
        raise UnsafeGitSource(
            f"git URL {url!r} refused: only https://, ssh://, user@host:path and file:// URLs")
    return url


def validate_git_ref(ref: str) -> str:
    """Accept a commit hash or a plain tag/branch name (letters, digits, ``._/-``).

    Raises:
        UnsafeGitSource: empty, starting with ``-``, or containing other characters
            (``..``, ``@{``, ``:``, spaces...).
    """
    if not isinstance(ref, str) or not ref or ref.startswith("-"):
        raise UnsafeGitSource(f"git ref {ref!r} refused: could be read as a git option")
    if not _REF_RE.match(ref) or ".." in ref:
        raise UnsafeGitSource(f"git ref {ref!r} refused: only letters, digits and ._/-")
    return ref


def _licence_in(files: list[Path], root: Path) -> str | None:
    for f in sorted(files):
        if LICENSE_RE.match(f.name):
            return f.relative_to(root).as_posix()
    return None


def fetch_dist(name: str, dest: Path) -> dict[str, Any]:
    """Copy the ``.py`` files of installed distribution ``name`` into ``dest``.

    Returns:
        Manifest entry ``{kind, dist, version, files, license}``.

    Raises:
        FileNotFoundError: the distribution is not installed or has no file list.
    """
    try:
        dist = md.distribution(name)
    except md.PackageNotFoundError:
        raise FileNotFoundError(f"code.repos: distribution {name!r} is not installed") from None
    if not dist.files:
        raise FileNotFoundError(f"code.repos: distribution {name!r} has no RECORD file list")
    n = 0
    licence = None
    for rel in sorted(dist.files, key=str):
        s = str(rel)
        if s.startswith(("..", "/")) or "__pycache__" in s:
            continue
        src = Path(rel.locate())
        if ".dist-info/" in s:
            if LICENSE_RE.match(src.name) and licence is None and src.is_file():
                target = dest / "LICENSE.dist"
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, target)
                licence = "LICENSE.dist"
            continue
        if not s.endswith(".py") or not src.is_file():
            continue
        target = dest / s
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, target)
        n += 1
    return {"kind": "dist", "dist": name, "version": dist.version, "files": n, "license": licence}


def _copy_tree_py(src: Path, dest: Path) -> tuple[int, str | None]:
    n = 0
    licence = None
    for root, dirs, files in os.walk(src):
        dirs[:] = sorted(d for d in dirs if d != ".git" and not d.startswith("."))
        for f in sorted(files):
            p = Path(root) / f
            if p.is_symlink():
                continue
            rel = p.relative_to(src)
            if f.endswith(".py") or (LICENSE_RE.match(f) and len(rel.parts) == 1):
                target = dest / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(p, target)
                if f.endswith(".py"):
                    n += 1
                else:
                    licence = licence or rel.as_posix()
    return n, licence


def fetch_path(path: str | Path, dest: Path) -> dict[str, Any]:
    """Copy the ``.py`` files (and a top-level licence file) of a local folder into ``dest``.

    Raises:
        FileNotFoundError: ``path`` is not a folder.
    """
    src = Path(path).expanduser().resolve()
    if not src.is_dir():
        raise FileNotFoundError(f"code.repos: local path {path!r} is not a folder")
    n, licence = _copy_tree_py(src, dest)
    return {"kind": "path", "path": str(src), "files": n, "license": licence}


def _git(args: list[str], cwd: Path | None = None) -> str:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_ASKPASS": "true"}
    base = ["git", "-c", "core.hooksPath=/dev/null", "-c", "protocol.ext.allow=never",
            "-c", "protocol.file.allow=always", "-c", "core.symlinks=false"]
    r = subprocess.run(base + args, cwd=cwd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"git {' '.join(args[:2])} failed: {r.stderr.strip()[-500:]}")
    return r.stdout.strip()


def fetch_git(url: str, commit: str, dest: Path) -> dict[str, Any]:
    """Clone ``url`` without hooks or submodules, check out ``commit``, copy its ``.py`` files.

    Args:
        url: see :func:`validate_git_url`.
        commit: commit hash (or tag) to pin; the resolved full hash is recorded.
        dest: folder receiving the files (created).

    Returns:
        Manifest entry ``{kind, git, commit, files, license}``.

    Raises:
        UnsafeGitSource: URL or ref refused (nothing is run).
        RuntimeError: git failed (unreachable URL, unknown commit).
    """
    validate_git_url(url)
    validate_git_ref(commit)
    with tempfile.TemporaryDirectory(prefix="contrastlab-git-") as tmp:
        work = Path(tmp) / "clone"
        _git(["clone", "--no-checkout", "--no-recurse-submodules", "--quiet", "--", url, str(work)])
        sha = _git(["rev-parse", "--verify", "--quiet", "--end-of-options", f"{commit}^{{commit}}"],
                   cwd=work)
        _git(["checkout", "--quiet", "--detach", sha], cwd=work)
        n, licence = _copy_tree_py(work, dest)
    return {"kind": "git", "git": url, "commit": sha, "files": n, "license": licence}


def fetch_sources(sources: list, out_dir: Path) -> dict[str, Any]:
    """Fetch every source into ``out_dir/<name>/`` and return the manifest.

    Args:
        sources: :class:`contrastlab.params.code.RepoSource` items.
        out_dir: an empty folder (the stage writes through ``atomic_dir``).

    Returns:
        ``{"repositories": [entry...]}``, entries sorted by name, each with ``name``.

    Raises:
        ValueError: two sources share a name.
    """
    entries = []
    seen: set[str] = set()
    for s in sources:
        name = s.repo_name
        if name in seen:
            raise InputError(f"code.repos.sources: repository name {name!r} used twice")
        seen.add(name)
        dest = out_dir / name
        dest.mkdir(parents=True, exist_ok=True)
        if s.kind == "dist":
            e = fetch_dist(s.dist, dest)
        elif s.kind == "git":
            e = fetch_git(s.git, s.commit, dest)
        else:
            e = fetch_path(s.path, dest)
        entries.append({"name": name, **e})
    entries.sort(key=lambda e: e["name"])
    return {"repositories": entries}
