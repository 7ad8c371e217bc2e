"""MULAN multi-label benchmarks from ARFF (dense and sparse) + the XML label header.

MULAN stores each data set as ``<name>-train.arff`` / ``<name>-test.arff`` and a
``<name>.xml`` file naming the label attributes (the last attributes of each ARFF file;
every other attribute is a feature). Both the dense form (comma-separated rows) and the
sparse form (``{index value, ...}`` rows, absent entries are 0) are read with the
``liac-arff`` package (``scipy.io.arff`` cannot read sparse rows).

Which files the default pipeline reads: yeast, enron and tmc2007-500 are vendored under
``data/vendor/mulan/`` (checked against ``SHA256SUMS``); scene, emotions, bibtex and medical
are read from an optional root (default ``../shared/datasets`` relative to the repository),
and a missing file raises ``FileNotFoundError`` naming the path.

Source of the data: Tsoumakas et al., MULAN (github.com/tsoumakas/mulan); see
``data/vendor/mulan/PROVENANCE.txt``.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ..errors import UnknownNameError

__all__ = [
    "MULAN", "MultilabelData", "MulanSpec", "ArffError",
    "read_label_xml", "read_arff", "load_mulan", "mulan_paths", "label_stats",
]


class ArffError(ValueError):
    """A malformed ARFF or label-XML file (the message names the file)."""


@dataclass(frozen=True)
class MulanSpec:
    """Where a MULAN data set lives: ``folder`` under ``mulan/`` and the file ``stem``."""

    folder: str
    stem: str
    vendored: bool = False


#: The MULAN data sets this project knows, by the name used in ``params.yaml``.
MULAN: dict[str, MulanSpec] = {
    "yeast": MulanSpec("yeast", "yeast", vendored=True),
    "enron": MulanSpec("enron", "enron", vendored=True),
    "tmc2007-500": MulanSpec("tmc2007", "tmc2007-500", vendored=True),
    "scene": MulanSpec("scene", "scene"),
    "emotions": MulanSpec("emotions", "emotions"),
    "bibtex": MulanSpec("bibtex", "bibtex"),
    "medical": MulanSpec("medical", "medical"),
}


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


def read_label_xml(path: str | Path) -> list[str]:
    """Label names from a MULAN ``<labels><label name="..."/>...</labels>`` file.

    Nested labels (hierarchies) are flattened in document order.

    Raises:
        FileNotFoundError: the file is missing (message names it).
        ArffError: not well-formed XML, no ``label`` element, a label without ``name`` or a
            duplicated name (message names the file).
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: label XML file not found")
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        raise ArffError(f"{path}: malformed label XML: {e}") from None
    names = []
    for el in root.iter():
        tag = el.tag.rsplit("}", 1)[-1]
        if tag == "label":
            name = el.get("name")
            if not name:
                raise ArffError(f"{path}: a <label> element has no name attribute")
            names.append(name)
    if not names:
        raise ArffError(f"{path}: no <label name=...> elements found")
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise ArffError(f"{path}: duplicated label names {dup}")
    return names


def _to_float(values: np.ndarray, attr: tuple, path: Path) -> np.ndarray:
    """Map decoded ARFF values of one attribute to float (nominal values must be numeric)."""
    name, typ = attr
    if isinstance(typ, list):  # nominal: values are the category strings
        try:
            return np.asarray([float(v) for v in values], dtype=np.float32)
        except ValueError:
            raise ArffError(f"{path}: nominal attribute {name!r} has non-numeric values {typ[:5]}; "
                            "only numeric or {0,1} attributes are supported") from None
    if str(typ).upper() in {"NUMERIC", "REAL", "INTEGER"}:
        return np.asarray(values, dtype=np.float32)
    raise ArffError(f"{path}: attribute {name!r} has unsupported type {typ!r}")


def read_arff(path: str | Path, label_names: list[str]) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Read one MULAN ARFF file (dense or sparse rows) into features and multi-hot labels.

    Args:
        path: the ``.arff`` file.
        label_names: names of the label attributes (from :func:`read_label_xml`); every
            other attribute is a feature, in file order.

    Returns:
        ``(x, y, feature_names)``: float32 ``[N, F]``, uint8 ``[N, C]`` with the columns in
        ``label_names`` order, and the ``F`` feature names.

    Raises:
        FileNotFoundError: missing file. ArffError: the ARFF cannot be parsed, a label in
        ``label_names`` is not an attribute, a label value is not 0/1, or a feature is a
        non-numeric nominal (every message names the file).
    """
    import arff  # liac-arff

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: ARFF file not found")
    text = path.read_text(encoding="utf-8", errors="replace")
    # Sparse rows start with '{'; liac-arff's COO decoder reads them without densifying.
    parts = re.split(r"^\s*@data\b", text, maxsplit=1, flags=re.I | re.M)
    if len(parts) != 2:
        raise ArffError(f"{path}: malformed ARFF: no @data section")
    body = parts[1]
    first = next((ln.strip() for ln in body.splitlines() if ln.strip() and not ln.startswith("%")), "")
    sparse = first.startswith("{")
    try:
        obj = arff.loads(text, return_type=arff.COO if sparse else arff.DENSE)
    except Exception as e:  # liac-arff raises its own BadLayout/BadDataFormat/... classes
        raise ArffError(f"{path}: malformed ARFF: {type(e).__name__}: {e}") from None
    attrs = obj["attributes"]
    names = [a[0] for a in attrs]
    missing = [n for n in label_names if n not in names]
    if missing:
        raise ArffError(f"{path}: label(s) {missing[:5]} from the label XML are not attributes of this file")
    label_set = set(label_names)
    feat_idx = [i for i, n in enumerate(names) if n not in label_set]
    if sparse:
        vals, rows, cols = obj["data"]
        vals = np.asarray(vals, dtype=object)
        rows = np.asarray(rows, dtype=np.int64)
        cols = np.asarray(cols, dtype=np.int64)
        n = int(rows.max()) + 1 if len(rows) else 0
        # number of rows: count data lines (a row may be all zeros and absent from the COO)
        n = max(n, sum(1 for ln in body.splitlines() if ln.strip().startswith("{")))
        fv = np.empty(len(vals), dtype=np.float32)
        for j in np.unique(cols):
            m = cols == j
            fv[m] = _to_float(vals[m], attrs[j], path)
        full = sp.coo_matrix((fv, (rows, cols)), shape=(n, len(attrs))).tocsc()
        x = full[:, feat_idx].toarray().astype(np.float32)
        ycols = [full[:, names.index(ln)].toarray().ravel() for ln in label_names]
        y = np.stack(ycols, axis=1) if ycols else np.zeros((n, 0))
    else:
        data = obj["data"]
        if not data:
            raise ArffError(f"{path}: no data rows")
        arr = np.asarray(data, dtype=object)
        if arr.ndim != 2 or arr.shape[1] != len(attrs):
            raise ArffError(f"{path}: rows do not have {len(attrs)} values")
        if any(v is None for v in arr.ravel()):
            raise ArffError(f"{path}: missing values ('?') are not supported")
        x = np.stack([_to_float(arr[:, i], attrs[i], path) for i in feat_idx], axis=1) \
            if feat_idx else np.zeros((len(arr), 0), np.float32)
        y = np.stack([_to_float(arr[:, names.index(ln)], attrs[names.index(ln)], path)
                      for ln in label_names], axis=1)
    if not np.isin(y, (0.0, 1.0)).all():
        raise ArffError(f"{path}: label values must be 0 or 1")
    if not np.isfinite(x).all():
        raise ArffError(f"{path}: non-finite feature values")
    return x.astype(np.float32), y.astype(np.uint8), [names[i] for i in feat_idx]


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


def load_mulan(name: str, vendor_root: str | Path = "data/vendor/mulan",
               optional_root: str | Path = "../shared/datasets", verify: bool = True) -> MultilabelData:
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
    labels = read_label_xml(p["xml"])
    xtr, ytr, feats = read_arff(p["train"], labels)
    xte, yte, feats_te = read_arff(p["test"], labels)
    if feats != feats_te:
        raise ArffError(f"{p['test']}: feature attributes differ from {p['train']}")
    return MultilabelData(name, xtr, ytr, xte, yte, feats, labels,
                          meta={"source": {k: str(v) for k, v in p.items() if k != "sums"}})


def label_stats(y: np.ndarray) -> dict[str, float]:
    """Summary of a multi-hot matrix ``[N, C]``: n, labels, cardinality (mean labels per row),
    density (cardinality / C), distinct label sets, rows without any label."""
    y = np.asarray(y)
    card = float(y.sum(1).mean()) if len(y) else 0.0
    return {
        "n": int(y.shape[0]), "labels": int(y.shape[1]), "cardinality": card,
        "density": card / max(1, y.shape[1]),
        "distinct_labelsets": int(len({r.tobytes() for r in y.astype(np.uint8)})),
        "empty_rows": int((y.sum(1) == 0).sum()),
    }
