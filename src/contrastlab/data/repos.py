"""Repository sources for the code retrieval track: installed distributions, git, local folders.

Each source becomes one folder of Python files under the output directory plus an entry in
``manifest.json`` (name, kind, version or commit, file count, licence file); files are copied
as bytes, never imported or executed. Kinds: ``dist`` (the ``.py`` files of an installed
distribution's ``RECORD``; offline default), ``git`` (an ``https://``, ``ssh://``,
``git@host:path`` or ``file://`` URL pinned to a 40-hex commit, a movable ref only with
``allow_ref: true``; cloned with hooks disabled and no submodules, ``.git`` dropped; a URL,
ref, ssh user or host starting with ``-``, or another transport, is refused) and ``path`` (a
local folder). Every source is checked before anything is fetched; folder names keep only
``A-Za-z0-9._-`` and cannot start with ``.``, ``_`` or ``-``, so none points outside the
output folder.
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

__all__ = ["UnsafeGitSource", "GitError", "validate_git_url", "validate_git_ref",
           "validate_git_commit", "safe_repo_name", "fetch_dist", "fetch_git", "fetch_path",
           "fetch_sources"]

LICENSE_RE = re.compile(r"^(licen[sc]e|copying|notice)([._-].*)?$", re.IGNORECASE)
_URL_RE = re.compile(r"^(https://|ssh://|file://)[^\s]+$")
_SCP_RE = re.compile(r"^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:[A-Za-z0-9._~/-]+$")
_REF_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]*$")
_COMMIT_RE = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")  # SHA-1 or SHA-256 object names


class UnsafeGitSource(InputError):
    """A git URL or ref that is not allowed (wrong scheme, or readable as an option)."""


class GitError(RuntimeError, InputError):
    """git failed (unreachable URL, unknown commit); the message carries git's own output.
    A ``ValueError`` too, so a stage reports it as one line of bad input."""


def _ssh_user_host(url: str) -> tuple[str, str] | None:
    """(user, host) of an ``ssh://`` or scp-like URL, else ``None``."""
    if url.startswith("ssh://"):
        auth = url[len("ssh://"):].split("/", 1)[0]
        user, _, host = auth.rpartition("@")
        return user, host.split(":", 1)[0]
    if _SCP_RE.match(url):
        user, _, rest = url.partition("@")
        return user, rest.split(":", 1)[0]
    return None


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
    uh = _ssh_user_host(url)
    if uh is not None:
        user, host = uh
        if not host or host.startswith("-") or user.startswith("-"):
            raise UnsafeGitSource(f"git URL {url!r} refused: an ssh host or user that is empty "
                                  "or starts with '-' could be read as an ssh option")
    return url


def validate_git_commit(commit: str, allow_ref: bool = False) -> str:
    """Accept a full commit hash (40 hex digits, or 64 for SHA-256 repositories), or with
    ``allow_ref`` also a tag/branch name (:func:`validate_git_ref`).

    Raises:
        UnsafeGitSource: anything else (an abbreviated hash or a ref without ``allow_ref``).
    """
    if allow_ref:
        return validate_git_ref(commit)
    if not isinstance(commit, str) or not _COMMIT_RE.match(commit):
        raise UnsafeGitSource(
            f"git commit {commit!r} refused: give the full 40-hex commit hash (a tag, branch "
            "or short hash can move or become ambiguous); set allow_ref: true on the source "
            "to accept a ref anyway")
    return commit


def safe_repo_name(raw: str) -> str:
    """A folder name from ``raw``: characters outside ``A-Za-z0-9._-`` become ``_`` and
    leading ``.``, ``_``, ``-`` are dropped (``..`` -> error, ``a/b`` -> ``a_b``).

    Raises:
        ValueError: nothing usable is left.
    """
    name = re.sub(r"[^A-Za-z0-9._-]", "_", str(raw)).lstrip("._-")
    if not name:
        raise InputError(f"code.repos.sources: cannot derive a repository name from {raw!r}; "
                         "give the source a name:")
    return name


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
    n, licence = 0, None
    for rel in sorted(dist.files, key=str):
        s = str(rel)
        if s.startswith(("..", "/")) or "__pycache__" in s:
            continue
        src = Path(rel.locate())
        if ".dist-info/" in s:
            if LICENSE_RE.match(src.name) and licence is None and src.is_file():
                _copy(src, dest / "LICENSE.dist")
                licence = "LICENSE.dist"
            continue
        if not s.endswith(".py") or not src.is_file():
            continue
        _copy(src, dest / s)
        n += 1
    return {"kind": "dist", "dist": name, "version": dist.version, "files": n, "license": licence}


def _copy(src: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, target)


def _copy_tree_py(src: Path, dest: Path) -> tuple[int, str | None]:
    n, licence = 0, None
    for root, dirs, files in os.walk(src):
        dirs[:] = sorted(d for d in dirs if d != ".git" and not d.startswith("."))
        for f in sorted(files):
            p = Path(root) / f
            if p.is_symlink():
                continue
            rel = p.relative_to(src)
            if f.endswith(".py") or (LICENSE_RE.match(f) and len(rel.parts) == 1):
                _copy(p, dest / rel)
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


def _git(args: list[str], cwd: Path | None = None, what: str = "") -> str:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_ASKPASS": "true", "LC_ALL": "C"}
    base = ["git", "-c", "core.hooksPath=/dev/null", "-c", "protocol.ext.allow=never",
            "-c", "protocol.file.allow=always", "-c", "core.symlinks=false"]
    try:
        r = subprocess.run(base + args, cwd=cwd, env=env, capture_output=True, text=True)
    except FileNotFoundError:
        raise GitError("git is not installed (needed for git sources)") from None
    if r.returncode != 0:
        said = (r.stderr.strip() or r.stdout.strip() or "no message")[-800:]
        raise GitError(f"git {args[0]} {what}failed (exit status {r.returncode}): {said}")
    return r.stdout.strip()


def fetch_git(url: str, commit: str, dest: Path, *, allow_ref: bool = False) -> dict[str, Any]:
    """Clone ``url`` without hooks or submodules, check out ``commit``, copy its ``.py`` files.

    Args:
        url: see :func:`validate_git_url`.
        commit: full commit hash to pin (see :func:`validate_git_commit`); with
            ``allow_ref`` also a tag or branch; the resolved full hash is recorded.
        dest: folder receiving the files (created).

    Returns:
        Manifest entry ``{kind, git, commit, files, license}``.

    Raises:
        UnsafeGitSource: URL or commit refused (nothing is run).
        GitError: git failed (unreachable URL, unknown commit); git's message included.
    """
    validate_git_url(url)
    validate_git_commit(commit, allow_ref)
    with tempfile.TemporaryDirectory(prefix="contrastlab-git-") as tmp:
        work = Path(tmp) / "clone"
        _git(["clone", "--no-checkout", "--no-recurse-submodules", "--quiet", "--", url, str(work)],
             what=f"of {url} ")
        sha = _git(["rev-parse", "--verify", "--end-of-options", f"{commit}^{{commit}}"],
                   cwd=work, what=f"of commit {commit} in {url} ")
        _git(["checkout", "--quiet", "--detach", sha], cwd=work, what=f"of {sha} ")
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
        ValueError: two sources share a name, or a name cannot be derived.
        UnsafeGitSource: a git URL or commit is refused.
        (All of these are checked before anything is fetched.)
        GitError, FileNotFoundError: fetching a source failed.
    """
    seen: set[str] = set()
    plan = []
    root = Path(out_dir).resolve()
    for i, s in enumerate(sources):
        # a path's real folder name: {path: a/b/..} is "a", not ".."
        name = safe_repo_name(s.name or (Path(s.path).expanduser().resolve().name
                                         if s.kind == "path" else s.repo_name))
        if name in seen:
            raise InputError(f"code.repos.sources: repository name {name!r} used twice")
        seen.add(name)
        if (root / name).resolve().parent != root:  # pragma: no cover - safe_repo_name ensures it
            raise ValueError(f"code.repos.sources.{i}: name {name!r} leaves the output folder")
        if s.kind == "git":
            try:
                validate_git_url(s.git)
                validate_git_commit(s.commit, bool(getattr(s, "allow_ref", False)))
            except UnsafeGitSource as e:
                raise UnsafeGitSource(f"code.repos.sources.{i}: {e}") from None
        plan.append((name, s))
    entries = []
    for name, s in plan:
        dest = out_dir / name
        dest.mkdir(parents=True, exist_ok=True)
        if s.kind == "dist":
            e = fetch_dist(s.dist, dest)
        elif s.kind == "git":
            e = fetch_git(s.git, s.commit, dest, allow_ref=bool(getattr(s, "allow_ref", False)))
        else:
            e = fetch_path(s.path, dest)
        entries.append({"name": name, **e})
    return {"repositories": sorted(entries, key=lambda e: e["name"])}
