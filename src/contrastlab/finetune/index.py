"""A queryable index of fine-tuned code embeddings: an exact FAISS inner-product index over
the L2-normalised embeddings (``IndexFlatIP``; Johnson, Douze & Jegou 2019), per-row metadata
and the encoder that embeds new code the same way.

Folder layout (:func:`write_index`)::

    <dir>/index.faiss     exact inner-product index, D = encoder output size
    <dir>/meta.json       {"rows": [{"id", "problem", "tier"}, ...], "dim": D, ...}
    <dir>/model/          FinetuneEncoder.save() plus the sentence-transformers module files

``model/`` loads without contrastlab (:mod:`contrastlab.finetune.export`); :func:`log_to_mlflow`
logs it with the ``mlflow.sentence_transformers`` flavour.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from torch import nn

from ..errors import InputError
from .encoder import FinetuneEncoder
from .export import export_sentence_transformers

__all__ = ["EmbeddingModel", "write_index", "load_index", "search_codes", "prepare_code", "log_to_mlflow"]


def prepare_code(source: str, strip: bool) -> str:
    """The text the encoder reads: ``source`` without docstrings when ``strip`` (sources that
    do not parse -- a student's broken submission -- are kept as written)."""
    if not strip:
        return source
    from .data import strip_docstrings

    try:
        return strip_docstrings(source)
    except InputError:
        return source


class EmbeddingModel(nn.Module):
    """An encoder plus its text preparation: ``forward(codes: list[str]) -> [N, D]`` float32
    unit rows (what :mod:`contrastlab.query` embeds submissions with)."""

    def __init__(self, encoder: FinetuneEncoder, strip_docstrings: bool = True):
        super().__init__()
        self.encoder = encoder
        self.strip_docstrings = bool(strip_docstrings)

    def forward(self, codes: Sequence[str]) -> torch.Tensor:
        if isinstance(codes, str):
            codes = [codes]
        return self.encoder.encode([prepare_code(c, self.strip_docstrings) for c in codes])


def write_index(folder: str | Path, emb: torch.Tensor, rows: list[dict], encoder: FinetuneEncoder,
                extra: dict | None = None) -> Path:
    """Write the index folder (module docstring) atomically.

    Args:
        emb: ``[N, D]`` embeddings (normalised here), ``rows``: ``N`` dicts with at least
            ``id``, ``problem``, ``tier``.
        encoder: the encoder that produced ``emb`` (saved under ``model/``).
        extra: more keys for ``meta.json`` (``variant``, ``strip_docstrings``...).

    Raises:
        InputError: ``len(rows) != N`` or a row without ``id``/``problem``/``tier``.
    """
    from ..io import atomic_dir, unit_rows, write_flat_index

    x = unit_rows(emb, rows)
    for r in rows:
        if not {"id", "problem", "tier"} <= set(r):
            raise InputError(f"metadata row {r} lacks id/problem/tier")
    folder = Path(folder)
    with atomic_dir(folder) as tmp:
        write_flat_index(tmp, x, {"rows": rows, **(extra or {})})
        encoder.save(tmp / "model", {"strip_docstrings": bool((extra or {}).get("strip_docstrings", True))})
        export_sentence_transformers(tmp / "model", encoder)
    return folder


def load_index(folder: str | Path):
    """``(faiss index, meta dict, EmbeddingModel)`` of a :func:`write_index` folder.

    Raises:
        FileNotFoundError: a file of the layout is missing.
    """
    import faiss

    from ..io import require_layout

    folder = require_layout(folder, "write_index")
    meta = json.loads((folder / "meta.json").read_text())
    enc = FinetuneEncoder.load(folder / "model")
    model = EmbeddingModel(enc, enc.extra.get("strip_docstrings", True)).eval()
    return faiss.read_index(str(folder / "index.faiss")), meta, model


def search_codes(folder: str | Path, codes: Sequence[str], k: int = 5) -> list[list[dict]]:
    """Nearest indexed submissions of each code string.

    Returns:
        One list per code of ``k`` dicts ``{"rank", "id", "problem", "tier", "similarity"}``
        (cosine similarity, best first).

    Raises:
        InputError: ``k < 1`` or no code given.
    """
    if k < 1 or not codes:
        raise InputError("need k >= 1 and at least one code")
    index, meta, model = load_index(folder)
    q = model(list(codes)).numpy().astype(np.float32)
    sim, idx = index.search(q, min(k, index.ntotal))
    rows = meta["rows"]
    return [[{"rank": r + 1, **{c: rows[j][c] for c in ("id", "problem", "tier")},
              "similarity": float(s)} for r, (s, j) in enumerate(zip(srow, irow)) if j >= 0]
            for srow, irow in zip(sim, idx)]


def log_to_mlflow(folder: str | Path, name: str = "encoder") -> str | None:
    """Log the index folder's encoder with the ``mlflow.sentence_transformers`` flavour
    (``model/`` loaded as a ``SentenceTransformer``: reload with
    ``mlflow.sentence_transformers.load_model(uri)`` or ``mlflow.pyfunc.load_model(uri)``, no
    contrastlab needed; inputs are prepared texts, see :mod:`contrastlab.finetune.export`)
    and the folder (artifacts under ``index/``) to the active MLflow run.

    Returns:
        The model URI, or ``None`` without an active run.
    """
    import mlflow
    import sentence_transformers
    import transformers

    if mlflow.active_run() is None:
        return None
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(Path(folder) / "model"), device="cpu")
    reqs = [f"sentence-transformers=={sentence_transformers.__version__}",
            f"transformers=={transformers.__version__}",
            f"torch=={torch.__version__.split('+')[0]}"]
    info = mlflow.sentence_transformers.log_model(model, name=name, pip_requirements=reqs)
    mlflow.log_artifacts(str(folder), artifact_path="index")
    return info.model_uri

