"""The queryable signature -> body index of a fine-tuned bi-encoder.

Folder layout (:func:`write_code_index`)::

    <dir>/index.faiss   exact inner-product index (FAISS ``IndexFlatIP``; Johnson, Douze &
                        Jegou 2019) over the L2-normalised body embeddings of every function
    <dir>/meta.json     {"kind": "code", "rows": [{"id", "repo", "path", "qualname",
                        "signature"}, ...], "dim": D, "row": ..., "seed": ...}
    <dir>/model/        the signature tower (FinetuneEncoder.save), which embeds new queries

:func:`search_signatures` embeds signatures with the saved tower and returns the nearest
bodies (``python -m contrastlab.query --index DIR --signature "def f(a, b)"``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from ..errors import InputError

__all__ = ["write_code_index", "search_signatures", "is_code_index"]


def write_code_index(folder: str | Path, body_emb: torch.Tensor, rows: list[dict], sig_encoder,
                     extra: dict | None = None) -> Path:
    """Write the index folder (module docstring) atomically.

    Args:
        body_emb: ``[N, D]`` body embeddings (normalised here); rows: ``N`` metadata dicts
            with at least ``id`` and ``signature``.
        sig_encoder: the signature tower (:class:`~contrastlab.finetune.encoder.FinetuneEncoder`).

    Raises:
        InputError: ``len(rows) != N`` or a row without ``id``/``signature``.
    """
    from ..io import atomic_dir, unit_rows, write_flat_index

    x = unit_rows(body_emb, rows)
    if any(not {"id", "signature"} <= set(r) for r in rows):
        raise InputError("every metadata row needs id and signature")
    with atomic_dir(Path(folder)) as tmp:
        write_flat_index(tmp, x, {"kind": "code", "rows": rows, **(extra or {})})
        sig_encoder.save(tmp / "model", {"tower": "signature"})
    return Path(folder)


def is_code_index(folder: str | Path) -> bool:
    """The folder holds a :func:`write_code_index` index (not a student-code index)."""
    f = Path(folder) / "meta.json"
    return f.exists() and json.loads(f.read_text()).get("kind") == "code"


def search_signatures(folder: str | Path, signatures: Sequence[str], k: int = 5) -> list[list[dict]]:
    """Nearest indexed bodies of each signature.

    Returns:
        One list per signature of ``k`` dicts ``{"rank", "similarity", "id", "repo", "path",
        "qualname", "signature"}`` (cosine similarity, best first).

    Raises:
        InputError: ``k < 1``, no signature, or not a code index.
        FileNotFoundError: a file of the layout is missing.
    """
    import faiss

    from ..finetune.encoder import FinetuneEncoder
    from ..io import require_layout

    if k < 1 or not signatures:
        raise InputError("need k >= 1 and at least one signature")
    folder = require_layout(folder, "write_code_index")
    meta = json.loads((folder / "meta.json").read_text())
    if meta.get("kind") != "code":
        raise InputError(f"{folder}: not a code (signature -> body) index")
    enc = FinetuneEncoder.load(folder / "model")
    index = faiss.read_index(str(folder / "index.faiss"))
    q = enc.encode(list(signatures)).numpy().astype(np.float32)
    sim, idx = index.search(q, min(k, index.ntotal))
    rows = meta["rows"]
    return [[{"rank": r + 1, "similarity": float(s), **rows[j]}
             for r, (s, j) in enumerate(zip(srow, irow)) if j >= 0] for srow, irow in zip(sim, idx)]
