"""Cora (Planetoid) from vendored raw files, loaded with ``torch_geometric``.

``prepare_cora`` verifies the vendored raw files against their ``SHA256SUMS`` and lays
them out where :class:`torch_geometric.datasets.Planetoid` reads them
(``<root>/Cora/raw/``), then loads (and processes) the data set offline. ``load_cora``
reads a prepared root. The public split (Yang et al. 2016) has 140 / 500 / 1000
train / validation / test nodes.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from ..errors import InputError
from ..io import atomic_dir, read_sha256sums, verify_sha256sums

__all__ = ["CORA_RAW_FILES", "CORA_STATS", "prepare_cora", "load_cora", "check_cora"]

CORA_RAW_FILES = tuple(f"ind.cora.{s}" for s in ("x", "tx", "allx", "y", "ty", "ally", "graph",
                                                  "test.index"))
#: What the public Cora must look like (checked after loading).
CORA_STATS = {"num_nodes": 2708, "num_features": 1433, "num_edges": 10556, "num_classes": 7,
              "num_train": 140, "num_val": 500, "num_test": 1000}


def check_cora(data, num_classes: int) -> dict[str, int]:
    """Return the statistics of a loaded Cora and raise ``ValueError`` if any differs from
    :data:`CORA_STATS` (naming the statistic)."""
    got = {
        "num_nodes": int(data.num_nodes), "num_features": int(data.num_features),
        "num_edges": int(data.edge_index.shape[1]), "num_classes": int(num_classes),
        "num_train": int(data.train_mask.sum()), "num_val": int(data.val_mask.sum()),
        "num_test": int(data.test_mask.sum()),
    }
    bad = {k: (v, CORA_STATS[k]) for k, v in got.items() if v != CORA_STATS[k]}
    if bad:
        msg = ", ".join(f"{k}={v} (expected {e})" for k, (v, e) in bad.items())
        raise InputError(f"Cora does not match the public Planetoid data set: {msg}")
    return got


def prepare_cora(vendor_dir: str | Path, out_root: str | Path, source: str = "vendored"):
    """Verify and place Cora's raw files, then load it once (which writes ``processed/``).

    Args:
        vendor_dir: folder holding ``SHA256SUMS`` and ``raw/`` (``data/vendor/planetoid/Cora``).
        out_root: Planetoid root to create (``data/graph/planetoid``); replaced atomically,
            so a failure leaves no half-written folder.
        source: ``"vendored"`` (offline; checksums verified) or ``"download"`` (PyG's own
            loader fetches the files from the internet; checksums still verified when a
            ``SHA256SUMS`` is present in ``vendor_dir``).

    Returns:
        ``dict`` of statistics (see :data:`CORA_STATS`).

    Raises:
        FileNotFoundError: a raw file or ``SHA256SUMS`` is missing (message names it).
        ValueError: a checksum mismatch (names the file), an unknown ``source``, or a
            loaded graph whose statistics differ from the public Cora.
    """
    vendor_dir, out_root = Path(vendor_dir), Path(out_root)
    sums = vendor_dir / "SHA256SUMS"
    if source not in ("vendored", "download"):
        raise InputError(f"unknown Cora source {source!r}; use 'vendored' or 'download'")
    if source == "vendored":
        if not sums.exists():
            raise FileNotFoundError(f"{sums}: checksum file missing")
        listed = set(read_sha256sums(sums))
        missing = [f for f in CORA_RAW_FILES if f not in listed]
        if missing:
            raise InputError(f"{sums}: no checksum for {', '.join(missing)}")
        verify_sha256sums(vendor_dir / "raw", sums)
    with atomic_dir(out_root) as tmp:
        raw = tmp / "Cora" / "raw"
        if source == "vendored":
            raw.mkdir(parents=True)
            for f in CORA_RAW_FILES:
                shutil.copy2(vendor_dir / "raw" / f, raw / f)
        from torch_geometric.datasets import Planetoid

        ds = Planetoid(str(tmp), name="Cora", split="public")
        if source == "download" and sums.exists():
            verify_sha256sums(raw, sums)
        stats = check_cora(ds[0], ds.num_classes)
    return stats


def load_cora(root: str | Path):
    """Load a Cora prepared by :func:`prepare_cora`.

    Returns:
        ``(data, num_classes)``: a ``torch_geometric.data.Data`` with ``x`` [2708, 1433]
        float32 (binary bag of words), ``edge_index`` [2, 10556] long, ``y`` [2708] long,
        boolean ``train_mask`` / ``val_mask`` / ``test_mask`` (140 / 500 / 1000).

    Raises:
        FileNotFoundError: ``root`` was not prepared (run the ``fetch_cora`` stage).
    """
    root = Path(root)
    if not (root / "Cora" / "processed").is_dir():
        raise FileNotFoundError(f"{root / 'Cora' / 'processed'}: Cora not prepared "
                                f"(run `dvc repro fetch_cora`)")
    from torch_geometric.datasets import Planetoid

    ds = Planetoid(str(root), name="Cora", split="public")
    data = ds[0]
    check_cora(data, ds.num_classes)
    return data, ds.num_classes
