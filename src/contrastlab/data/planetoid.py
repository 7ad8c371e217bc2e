"""Planetoid citation graphs (Cora, CiteSeer, PubMed) by name, from checksummed raw files.

Planetoid format (Yang, Cohen & Salakhutdinov, ICML 2016): ``ind.<name>.{x, tx, allx, y, ty,
ally, graph, test.index}`` with the public split. :func:`prepare_planetoid` verifies a raw
folder against its ``SHA256SUMS``, lays it out for :class:`torch_geometric.datasets.Planetoid`
and loads it offline; :func:`load_planetoid` reads a prepared root. Statistics checked when
``check_stats``: Cora 2708 nodes / 1433 features / 10556 directed edges / 7 classes /
140-500-1000; CiteSeer 3327 / 3703 / 9104 / 6 / 120-500-1000; PubMed 19717 / 500 / 88648 / 3 /
60-500-1000.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from ..errors import InputError
from ..io import atomic_dir, read_sha256sums, verify_sha256sums

__all__ = ["PLANETOID_NAMES", "PUBLIC_STATS", "canonical_name", "raw_files", "graph_stats",
           "check_stats", "prepare_planetoid", "load_planetoid"]

#: Data set names as PyG spells them (folder names), keyed by their lower-case file prefix.
PLANETOID_NAMES = {"cora": "Cora", "citeseer": "CiteSeer", "pubmed": "PubMed"}

#: What each public data set must look like after loading.
PUBLIC_STATS: dict[str, dict[str, int]] = {
    "Cora": {"num_nodes": 2708, "num_features": 1433, "num_edges": 10556, "num_classes": 7,
             "num_train": 140, "num_val": 500, "num_test": 1000},
    "CiteSeer": {"num_nodes": 3327, "num_features": 3703, "num_edges": 9104, "num_classes": 6,
                 "num_train": 120, "num_val": 500, "num_test": 1000},
    "PubMed": {"num_nodes": 19717, "num_features": 500, "num_edges": 88648, "num_classes": 3,
               "num_train": 60, "num_val": 500, "num_test": 1000},
}


def canonical_name(name: str) -> str:
    """``"citeseer"`` / ``"CiteSeer"`` -> ``"CiteSeer"``; ``ValueError`` for an unknown name."""
    try:
        return PLANETOID_NAMES[str(name).lower()]
    except KeyError:
        raise InputError(f"unknown Planetoid data set {name!r}; known: "
                         f"{', '.join(PLANETOID_NAMES.values())}") from None


def raw_files(name: str) -> tuple[str, ...]:
    """The eight raw file names of data set ``name`` (``ind.<lower name>.<part>``)."""
    prefix = canonical_name(name).lower()
    return tuple(f"ind.{prefix}.{s}" for s in ("x", "tx", "allx", "y", "ty", "ally", "graph",
                                               "test.index"))


def graph_stats(data, num_classes: int) -> dict[str, int]:
    """Node, feature, directed-edge, class and split counts of a loaded graph."""
    return {
        "num_nodes": int(data.num_nodes), "num_features": int(data.num_features),
        "num_edges": int(data.edge_index.shape[1]), "num_classes": int(num_classes),
        "num_train": int(data.train_mask.sum()), "num_val": int(data.val_mask.sum()),
        "num_test": int(data.test_mask.sum()),
    }


def check_stats(name: str, data, num_classes: int) -> dict[str, int]:
    """Return :func:`graph_stats`; ``ValueError`` naming every statistic that differs from
    :data:`PUBLIC_STATS` of ``name``."""
    name = canonical_name(name)
    got = graph_stats(data, num_classes)
    want = PUBLIC_STATS[name]
    bad = {k: (v, want[k]) for k, v in got.items() if v != want[k]}
    if bad:
        msg = ", ".join(f"{k}={v} (expected {e})" for k, (v, e) in bad.items())
        raise InputError(f"{name} does not match the public Planetoid data set: {msg}")
    return got


def prepare_planetoid(raw_dir: str | Path, out_root: str | Path, name: str = "Cora",
                      source: str = "vendored", check: bool = True) -> dict[str, int]:
    """Verify and place a Planetoid data set's raw files, then load it once (writes
    ``<out_root>/<Name>/processed/``).

    Args:
        raw_dir: folder holding ``SHA256SUMS`` and ``raw/`` with the eight files of
            :func:`raw_files` (``data/vendor/planetoid/<Name>``, or the user's own folder).
        out_root: Planetoid root to create (``data/graph/planetoid``); replaced atomically,
            so a failure leaves no half-written folder.
        name: ``Cora``, ``CiteSeer`` or ``PubMed`` (any case).
        source: ``"vendored"`` (offline; checksums verified) or ``"download"`` (PyG's loader
            fetches the files; checksums still verified when ``raw_dir/SHA256SUMS`` exists).
        check: compare the loaded graph with :data:`PUBLIC_STATS` (turn off only for a
            graph in Planetoid format that is not the public one, e.g. a test fixture).

    Returns:
        The graph's statistics (:func:`graph_stats`).

    Raises:
        FileNotFoundError: a raw file or ``SHA256SUMS`` is missing (message names it).
        ValueError: an unknown name or source, a checksum mismatch (names the file), a file
            without a checksum, or (``check``) statistics that differ from the public set.
    """
    name = canonical_name(name)
    raw_dir, out_root = Path(raw_dir), Path(out_root)
    files = raw_files(name)
    sums = raw_dir / "SHA256SUMS"
    if source not in ("vendored", "download"):
        raise InputError(f"unknown graph source {source!r}; use 'vendored' or 'download'")
    if source == "vendored":
        if not sums.exists():
            raise FileNotFoundError(f"{sums}: checksum file missing")
        listed = set(read_sha256sums(sums))
        missing = [f for f in files if f not in listed]
        if missing:
            raise InputError(f"{sums}: no checksum for {', '.join(missing)}")
        absent = [f for f in files if not (raw_dir / "raw" / f).is_file()]
        if absent:
            raise FileNotFoundError(f"{raw_dir / 'raw'}: missing {', '.join(absent)}")
        verify_sha256sums(raw_dir / "raw", sums)
    with atomic_dir(out_root) as tmp:
        raw = tmp / name / "raw"
        if source == "vendored":
            raw.mkdir(parents=True)
            for f in files:
                shutil.copy2(raw_dir / "raw" / f, raw / f)
        from torch_geometric.datasets import Planetoid

        ds = Planetoid(str(tmp), name=name, split="public")
        if source == "download" and sums.exists():
            verify_sha256sums(raw, sums)
        return check_stats(name, ds[0], ds.num_classes) if check else graph_stats(
            ds[0], ds.num_classes)  # returning runs atomic_dir's exit: the folder is in place


def load_planetoid(root: str | Path, name: str = "Cora", check: bool = True):
    """Load a data set prepared by :func:`prepare_planetoid`.

    Returns:
        ``(data, num_classes)``: a ``torch_geometric.data.Data`` with ``x`` ``[N, F]``
        float32 as stored in the raw files (binary bag of words for Cora and CiteSeer,
        TF-IDF for PubMed), ``edge_index`` ``[2, E]`` long,
        ``y`` ``[N]`` long and boolean ``train_mask`` / ``val_mask`` / ``test_mask`` (the
        public split).

    Raises:
        FileNotFoundError: ``root/<Name>/processed`` is missing (run the fetch stage).
        ValueError: an unknown name, or (``check``) statistics that differ from the public set.
    """
    name = canonical_name(name)
    root = Path(root)
    if not (root / name / "processed").is_dir():
        raise FileNotFoundError(f"{root / name / 'processed'}: {name} not prepared "
                                f"(run `dvc repro fetch_graph`)")
    from torch_geometric.datasets import Planetoid

    ds = Planetoid(str(root), name=name, split="public")
    data = ds[0]
    if check:
        check_stats(name, data, ds.num_classes)
    return data, ds.num_classes
