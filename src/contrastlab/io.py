"""Atomic output writers and checksums.

Every stage output is written to a temporary file in the destination folder and then
renamed over the final path (``os.replace`` is atomic on POSIX), so an interrupted stage
never leaves a half-written file for DVC to cache.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator

from .errors import InputError


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on success rename it onto ``path``.

    On an exception the temporary file is removed and ``path`` is left untouched.
    ``suffix`` keeps an extension for writers that infer the format from it.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix or ".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        # mkstemp creates 0600; give the final file the usual permissions (0666 & ~umask).
        with contextlib.suppress(FileNotFoundError):
            os.chmod(tmp_path, 0o666 & ~_umask())
        os.replace(tmp_path, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp_path.unlink()
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary directory next to ``path``; on success it replaces ``path`` whole."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        yield tmp
        if path.exists():
            old = path.with_name(f".{path.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(path, old)
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json(path: str | os.PathLike, obj: Any, indent: int = 2) -> None:
    """Write ``obj`` as JSON to ``path`` atomically (keys sorted for byte-stable output)."""
    write_text(path, json.dumps(obj, indent=indent, sort_keys=True, default=_json_default) + "\n")


def read_json(path: str | os.PathLike, *, optional: bool = False) -> Any:
    """Read a JSON file (UTF-8). A missing file raises ``FileNotFoundError`` naming the path,
    or gives None when ``optional`` (an output of a stage that has not run)."""
    path = Path(path)
    if not path.exists():
        if optional:
            return None
        raise FileNotFoundError(f"{path}: no such file (run the stage that produces it)")
    return json.loads(path.read_text(encoding="utf-8"))


def write_parquet(path: str | os.PathLike, df) -> None:
    """Write a pandas DataFrame to Parquet atomically (no index)."""
    with atomic_path(path, suffix=".parquet") as tmp:
        df.to_parquet(tmp, index=False)


def write_csv(path: str | os.PathLike, df) -> None:
    """Write a pandas DataFrame to CSV atomically (no index)."""
    with atomic_path(path, suffix=".csv") as tmp:
        df.to_csv(tmp, index=False)


def save_safetensors(path: str | os.PathLike, tensors: dict, metadata: dict | None = None) -> None:
    """Save a dict of tensors with ``safetensors`` atomically."""
    from safetensors.torch import save_file

    with atomic_path(path, suffix=".safetensors") as tmp:
        save_file({k: v.contiguous() for k, v in tensors.items()}, str(tmp), metadata=metadata)


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    """Hex SHA-256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def read_sha256sums(path: str | os.PathLike) -> dict[str, str]:
    """Parse a ``sha256sum``-format file into ``{filename: hexdigest}``."""
    out: dict[str, str] = {}
    for line in Path(path).read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        digest, name = line.split(maxsplit=1)
        out[name.lstrip("*").strip()] = digest.lower()
    return out


def verify_sha256sums(folder: str | os.PathLike, sums_file: str | os.PathLike) -> None:
    """Check every file listed in ``sums_file`` under ``folder``.

    Raises ``FileNotFoundError`` for a missing file and ``ValueError`` for a mismatch,
    each naming the file.
    """
    folder = Path(folder)
    for name, digest in read_sha256sums(sums_file).items():
        f = folder / name
        if not f.exists():
            raise FileNotFoundError(f"{f}: listed in {sums_file} but missing")
        got = sha256_file(f)
        if got != digest:
            raise InputError(f"{f}: SHA-256 mismatch (expected {digest}, got {got})")


def unit_rows(emb, rows: list) -> Any:
    """``emb`` ``[N, D]`` L2-normalised (float32 numpy). Raises InputError: ``len(rows) != N``."""
    import torch

    x = torch.nn.functional.normalize(torch.as_tensor(emb).float(), dim=1).numpy()
    if len(rows) != len(x):
        raise InputError(f"{len(rows)} metadata rows for {len(x)} embeddings")
    return x


def write_flat_index(folder: Path, x, meta: dict) -> None:
    """``folder/index.faiss`` (FAISS ``IndexFlatIP``: exact inner product over ``x`` ``[N, D]``)
    and ``folder/meta.json`` (``dim`` plus ``meta``, sorted keys)."""
    import faiss
    import numpy as np

    index = faiss.IndexFlatIP(x.shape[1])
    index.add(np.ascontiguousarray(x, dtype=np.float32))
    faiss.write_index(index, str(folder / "index.faiss"))
    (folder / "meta.json").write_text(json.dumps({"dim": int(x.shape[1]), **meta}, indent=1,
                                                 sort_keys=True))


def require_layout(folder: str | os.PathLike, writer: str) -> Path:
    """``folder`` as a Path. Raises FileNotFoundError: ``index.faiss``, ``meta.json`` or ``model``
    is missing."""
    folder = Path(folder)
    for f in ("index.faiss", "meta.json", "model"):
        if not (folder / f).exists():
            raise FileNotFoundError(f"{folder}: no {f} (not an index folder written by {writer})")
    return folder


def _json_default(o: Any) -> Any:
    import numpy as np

    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")
