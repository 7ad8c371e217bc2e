"""Cora: the Planetoid loader (:mod:`contrastlab.data.planetoid`) with the name fixed.

Kept for callers written before the graph track took any Planetoid data set by name
(``graph.dataset``): ``load_cora(root)`` is ``load_planetoid(root, "Cora")``. The public
split (Yang et al. 2016) has 140 / 500 / 1000 train / validation / test nodes.
"""

from __future__ import annotations

from pathlib import Path

from .planetoid import load_planetoid, prepare_planetoid

__all__ = ["prepare_cora", "load_cora"]


def prepare_cora(vendor_dir: str | Path, out_root: str | Path, source: str = "vendored"):
    """:func:`contrastlab.data.planetoid.prepare_planetoid` for ``Cora``."""
    return prepare_planetoid(vendor_dir, out_root, "Cora", source=source)


def load_cora(root: str | Path):
    """:func:`contrastlab.data.planetoid.load_planetoid` for ``Cora``: ``(data, num_classes)``
    with ``x`` [2708, 1433] float32 (binary bag of words), ``edge_index`` [2, 10556] long,
    ``y`` [2708] long and the public 140 / 500 / 1000 masks.

    Raises:
        FileNotFoundError: ``root`` was not prepared (run the fetch stage).
    """
    return load_planetoid(root, "Cora")
