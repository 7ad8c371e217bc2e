"""MULAN multi-label benchmarks from ARFF (dense and sparse) + the XML label header.

MULAN stores each data set as ``<name>-train.arff`` / ``<name>-test.arff`` and a
``<name>.xml`` file naming the label attributes (the last attributes of each ARFF file;
every other attribute is a feature). Both the dense form (comma-separated rows) and the
sparse form (``{index value, ...}`` rows, absent entries are 0) are read with the
``liac-arff`` package (``scipy.io.arff`` cannot read sparse rows).

Which files the pipeline reads: yeast, enron, tmc2007-500, scene, emotions, medical and
bibtex are vendored under ``data/vendor/mulan/`` (checked against ``SHA256SUMS``); a missing
file raises ``FileNotFoundError`` naming the path. Every known set is also
checked against its published row counts (so a file cut at a line boundary, which still
parses, is an error).

Attributes: numeric attributes and nominal attributes with numeric values ({0,1}) are read as
numbers; other nominal attributes are one-hot encoded over the categories declared in the
header (feature names ``attr=value``); a nominal or string attribute taking a different value
on every row of the training file (an identifier) is dropped and listed in ``meta["dropped"]``.
A user's own data set (ARFF + label XML, or CSV/Parquet with named label columns) goes through
:func:`load_user_dataset` with the same checks.

Source of the data: Tsoumakas et al., MULAN (github.com/tsoumakas/mulan); see
``data/vendor/mulan/PROVENANCE.txt``.

Modules: :mod:`.multilabel_arff` (the ARFF and label-XML readers),
:mod:`.multilabel_split` (label statistics, the stratified validation split); this module
holds the known MULAN sets and loads a set, MULAN or the user's (their names re-exported).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from ..errors import InputError, UnknownNameError
from .multilabel_arff import ArffError, read_arff, read_label_xml
from .multilabel_split import label_stats, stratified_val_split

__all__ = [
    "MULAN", "MultilabelData", "MulanSpec", "ArffError",
    "read_label_xml", "read_arff", "load_mulan", "mulan_paths", "label_stats",
    "load_user_dataset", "check_rows", "stratified_val_split",
]


@dataclass(frozen=True)
class MulanSpec:
    """Where a MULAN data set lives: ``folder`` under ``mulan/`` and the file ``stem``."""

    folder: str
    stem: str
    vendored: bool = False
    rows: tuple[int, int] | None = None  # published (train, test) row counts


#: The MULAN data sets this project knows, by the name used in ``params.yaml``.
MULAN: dict[str, MulanSpec] = {
    "yeast": MulanSpec("yeast", "yeast", vendored=True, rows=(1500, 917)),
    "enron": MulanSpec("enron", "enron", vendored=True, rows=(1123, 579)),
    "tmc2007-500": MulanSpec("tmc2007", "tmc2007-500", vendored=True, rows=(21519, 7077)),
    "scene": MulanSpec("scene", "scene", vendored=True, rows=(1211, 1196)),
    "emotions": MulanSpec("emotions", "emotions", vendored=True, rows=(391, 202)),
    "medical": MulanSpec("medical", "medical", vendored=True, rows=(333, 645)),
    "bibtex": MulanSpec("bibtex", "bibtex", vendored=True, rows=(4880, 2515)),
}


def check_rows(name: str, split: str, got: int, expected: int | None) -> None:
    """Raise ``ValueError`` when a split does not have its expected number of rows.

    A truncated file cut at a line boundary still parses; this check makes it an error.
    """
    if expected is not None and got != expected:
        raise InputError(f"{name} {split}: {got} rows, expected {expected} (truncated or wrong file?)")


@dataclass
class MultilabelData:
    """A multi-label data set with a fixed train/test split.

    Attributes:
        name: data set name.
        x_train, x_test: features, float32 ``[N, F]`` (dense numpy).
        y_train, y_test: multi-hot labels, uint8 ``[N, C]``.
        feature_names: ``F`` names; label_names: ``C`` names (order of the XML file).
        meta: free-form provenance (source files, subsampling).
    """

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    feature_names: list[str]
    label_names: list[str]
    meta: dict = field(default_factory=dict)


def mulan_paths(name: str, vendor_root: str | Path, optional_root: str | Path) -> dict[str, Path]:
    """Paths of a MULAN data set's train/test ARFF and XML files.

    Vendored sets are looked up under ``vendor_root/<folder>/``, others under
    ``optional_root/mulan/<folder>/``.

    Raises:
        KeyError: unknown data set name (lists the known ones).
    """
    if name not in MULAN:
        raise UnknownNameError(f"unknown MULAN data set {name!r}; known: {', '.join(MULAN)}")
    spec = MULAN[name]
    base = Path(vendor_root) / spec.folder if spec.vendored else Path(optional_root) / "mulan" / spec.folder
    return {
        "train": base / f"{spec.stem}-train.arff",
        "test": base / f"{spec.stem}-test.arff",
        "xml": base / f"{spec.stem}.xml",
        "sums": base / "SHA256SUMS",
    }


def load_mulan(name: str, vendor_root: str | Path, optional_root: str | Path,
               verify: bool = True) -> MultilabelData:
    """Load a MULAN data set's standard train/test split.

    Args:
        name: a key of :data:`MULAN` (``yeast``, ``enron``, ``tmc2007-500``, ...).
        vendor_root: folder of the vendored sets (with ``SHA256SUMS`` per set).
        optional_root: root of the optional data (``<root>/mulan/<folder>/``).
        verify: check the vendored files against ``SHA256SUMS``.

    Raises:
        FileNotFoundError: a needed file is missing (names the path and, for optional sets,
            the ``multilabel.optional_root`` param). ArffError / ValueError: bad file content
            or checksum mismatch (names the file).
    """
    from ..io import verify_sha256sums

    p = mulan_paths(name, vendor_root, optional_root)
    for k in ("train", "test", "xml"):
        if not p[k].exists():
            hint = "" if MULAN[name].vendored else \
                " (optional data set: set multilabel.optional_root in params.yaml to the folder holding mulan/)"
            raise FileNotFoundError(f"{p[k]}: {name} {k} file not found{hint}")
    if verify and p["sums"].exists():
        verify_sha256sums(p["sums"].parent, p["sums"])
    # from here on a MULAN set is a user ARFF set with its published row counts
    spec = SimpleNamespace(format="arff", train=p["train"], test=p["test"], labels_xml=p["xml"],
                           rows=MULAN[name].rows, sha256=None)
    return load_user_dataset(name, spec)


def load_user_dataset(name: str, spec: Any, root: str | Path = ".") -> MultilabelData:
    """Load a user's own multi-label data set described by a ``multilabel.custom.<name>`` entry.

    Args:
        name: the data set's name (for messages).
        spec: an object with ``format`` (``"arff"``, ``"csv"`` or ``"parquet"``), ``train``,
            ``test`` (file paths, repo-relative or absolute), ``labels_xml`` (ARFF: the MULAN
            label XML), ``label_columns`` (CSV/Parquet: the label column names; every other
            column is a feature and must be numeric), ``rows`` (optional expected
            ``[train, test]`` row counts) and ``sha256`` (optional ``{file name: digest}``).
        root: folder that relative paths are resolved against.

    Returns:
        :class:`MultilabelData`; string/categorical CSV columns are not accepted (encode them
        first, or use ARFF, whose nominal attributes are one-hot encoded).

    Raises:
        FileNotFoundError: a file is missing. ValueError / ArffError: checksum or row-count
        mismatch, a label column missing or not 0/1, a non-numeric or non-finite feature,
        train/test columns that differ (every message names the file).
    """
    from ..io import sha256_file

    root = Path(root)  # `root / f` keeps an absolute f
    files = {"train": root / spec.train, "test": root / spec.test}
    if spec.format == "arff":
        if not spec.labels_xml:
            raise InputError(f"custom data set {name!r}: format arff needs labels_xml")
        files["xml"] = root / spec.labels_xml
    for k, f in files.items():
        if not f.exists():
            raise FileNotFoundError(f"{f}: custom data set {name!r} {k} file not found")
    for fname, digest in (spec.sha256 or {}).items():
        match = [f for f in files.values() if f.name == fname]
        if not match:
            raise InputError(f"custom data set {name!r}: sha256 names {fname!r}, not one of its files")
        got = sha256_file(match[0])
        if got != digest:
            raise InputError(f"{match[0]}: SHA-256 mismatch (expected {digest}, got {got})")
    dropped: list[str] = []
    if spec.format == "arff":
        labels = read_label_xml(files["xml"])
        xtr, ytr, feats, dropped = read_arff(files["train"], labels, return_dropped=True)
        xte, yte, feats_te = read_arff(files["test"], labels, drop=dropped)
        if feats != feats_te:
            raise ArffError(f"{files['test']}: feature attributes differ from {files['train']}")
    elif spec.format in ("csv", "parquet"):
        import pandas as pd

        labels = list(spec.label_columns)
        if not labels:
            raise InputError(f"custom data set {name!r}: label_columns is empty")

        def read(f: Path) -> tuple[np.ndarray, np.ndarray, list[str]]:
            try:
                df = pd.read_csv(f) if spec.format == "csv" else pd.read_parquet(f)
            except Exception as e:
                raise InputError(f"{f}: cannot read {spec.format}: {type(e).__name__}: {e}") from None
            miss = [c for c in labels if c not in df.columns]
            if miss:
                raise InputError(f"{f}: label column(s) {miss} not found (columns: {list(df.columns)[:10]})")
            feats = [c for c in df.columns if c not in labels]
            bad = [c for c in feats if not pd.api.types.is_numeric_dtype(df[c])]
            if bad:
                raise InputError(f"{f}: non-numeric feature column(s) {bad[:5]}; encode them first")
            if df[labels].isna().any().any() or not df[labels].isin([0, 1]).all().all():
                raise InputError(f"{f}: label columns must hold 0 or 1")
            x = df[feats].to_numpy(dtype=np.float32)
            if not np.isfinite(x).all():
                raise InputError(f"{f}: missing or non-finite feature values")
            return x, df[labels].to_numpy(dtype=np.uint8), [str(c) for c in feats]

        xtr, ytr, feats = read(files["train"])
        xte, yte, feats_te = read(files["test"])
        if feats != feats_te:
            raise InputError(f"{files['test']}: feature columns differ from {files['train']}")
    else:
        raise InputError(f"custom data set {name!r}: unknown format {spec.format!r} (arff, csv, parquet)")
    rows = tuple(spec.rows) if spec.rows else None
    check_rows(name, "train", len(xtr), rows[0] if rows else None)
    check_rows(name, "test", len(xte), rows[1] if rows else None)
    return MultilabelData(name, xtr, ytr, xte, yte, feats, labels,
                          meta={"source": {k: str(v) for k, v in files.items()}, "dropped": dropped})
