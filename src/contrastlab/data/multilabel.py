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
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..errors import InputError, UnknownNameError

__all__ = [
    "MULAN", "MultilabelData", "MulanSpec", "ArffError",
    "read_label_xml", "read_arff", "load_mulan", "mulan_paths", "label_stats",
    "load_user_dataset", "check_rows", "stratified_val_split",
]


class ArffError(ValueError):
    """A malformed ARFF or label-XML file (the message names the file)."""


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


def _is_numeric_nominal(typ: list) -> bool:
    try:
        [float(v) for v in typ]
        return True
    except (TypeError, ValueError):
        return False


def _columns(values: np.ndarray, attr: tuple, path: Path, drop: bool) -> tuple[np.ndarray, list[str]]:
    """Encode one attribute's decoded ARFF values as ``[N, k]`` float32 columns and names.

    Numeric and numeric-valued nominal attributes give one column; other nominal attributes
    are one-hot encoded over the declared categories (``attr=value``; a missing value is all
    zeros). ``drop`` returns no column (an identifier attribute).
    """
    name, typ = attr
    n = len(values)
    if drop:
        return np.zeros((n, 0), np.float32), []
    if isinstance(typ, list):
        if _is_numeric_nominal(typ):
            if any(v is None for v in values):
                raise ArffError(f"{path}: attribute {name!r} has missing values ('?')")
            return np.asarray(values, dtype=object).astype(np.float32)[:, None], [name]
        col = {c: i for i, c in enumerate(typ)}
        out = np.zeros((n, len(typ)), np.float32)
        for r, v in enumerate(values):
            if v is None or v == 0:  # missing, or absent entry of a sparse row (first category)
                if v == 0:
                    out[r, 0] = 1.0
                continue
            if v not in col:
                raise ArffError(f"{path}: attribute {name!r} has undeclared value {v!r}")
            out[r, col[v]] = 1.0
        return out, [f"{name}={c}" for c in typ]
    if str(typ).upper() in {"NUMERIC", "REAL", "INTEGER"}:
        if any(v is None for v in values):
            raise ArffError(f"{path}: attribute {name!r} has missing values ('?')")
        return np.asarray(values, dtype=object).astype(np.float32)[:, None], [name]
    raise ArffError(f"{path}: attribute {name!r} has unsupported type {typ!r} "
                    "(a string attribute is accepted only as an identifier, one value per row)")


def _identifier_like(values: np.ndarray, attr: tuple) -> bool:
    """A nominal (non-numeric) or string attribute with a distinct value on every row."""
    _, typ = attr
    if isinstance(typ, list):
        if _is_numeric_nominal(typ):
            return False
    elif str(typ).upper() != "STRING":
        return False
    vals = [v for v in values]
    return len(vals) > 1 and None not in vals and len(set(vals)) == len(vals)


def read_arff(path: str | Path, label_names: list[str], drop: list[str] | None = None,
              return_dropped: bool = False):
    """Read one MULAN ARFF file (dense or sparse rows) into features and multi-hot labels.

    Args:
        path: the ``.arff`` file.
        label_names: names of the label attributes (from :func:`read_label_xml`); every
            other attribute is a feature, in file order.
        drop: feature attributes to drop; ``None`` detects identifier-like attributes (a
            nominal/string attribute with a distinct value on every row) and drops those.
            Pass the training file's list when reading its test file.
        return_dropped: also return the list of dropped attribute names.

    Returns:
        ``(x, y, feature_names)`` (``+ (dropped,)`` with ``return_dropped``): float32
        ``[N, F]`` (nominal attributes one-hot, see :func:`_columns`), uint8 ``[N, C]`` with
        the columns in ``label_names`` order, and the ``F`` feature names.

    Raises:
        FileNotFoundError: missing file. ArffError: the ARFF cannot be parsed, a label in
        ``label_names`` is not an attribute, a label value is not 0/1, a missing value in a
        numeric feature, or a string attribute that is not an identifier (every message
        names the file).
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
        # number of rows: count data lines (a row may be all zeros and absent from the COO)
        n = max(int(rows.max()) + 1 if len(rows) else 0,
                sum(1 for ln in body.splitlines() if ln.strip().startswith("{")))

        order = np.argsort(cols, kind="stable")
        cuts = np.searchsorted(cols[order], np.arange(len(attrs) + 1))

        def column(j: int) -> np.ndarray:
            out = np.zeros(n, dtype=object)  # absent sparse entries are 0
            sel = order[cuts[j]:cuts[j + 1]]
            out[rows[sel]] = vals[sel]
            return out
    else:
        data = obj["data"]
        if not data:
            raise ArffError(f"{path}: no data rows")
        arr = np.asarray(data, dtype=object)
        if arr.ndim != 2 or arr.shape[1] != len(attrs):
            raise ArffError(f"{path}: rows do not have {len(attrs)} values")
        n = len(arr)

        def column(j: int) -> np.ndarray:
            return arr[:, j]
    if drop is None:
        drop = [names[i] for i in feat_idx if _identifier_like(column(i), attrs[i])]
    unknown = [d for d in drop if d not in names]
    if unknown:
        raise ArffError(f"{path}: attribute(s) {unknown} to drop are not in this file")
    blocks, fnames = [], []
    for i in feat_idx:
        b, nm = _columns(column(i), attrs[i], path, names[i] in drop)
        blocks.append(b)
        fnames += nm
    x = np.concatenate(blocks, axis=1) if blocks else np.zeros((n, 0), np.float32)
    ycols = []
    for ln in label_names:
        j = names.index(ln)
        c, _ = _columns(column(j), attrs[j], path, False)
        if c.shape[1] != 1:
            raise ArffError(f"{path}: label {ln!r} is not a 0/1 attribute")
        ycols.append(c[:, 0])
    y = np.stack(ycols, axis=1)
    if not np.isin(y, (0.0, 1.0)).all():
        raise ArffError(f"{path}: label values must be 0 or 1")
    if not np.isfinite(x).all():
        raise ArffError(f"{path}: non-finite feature values")
    out = (x.astype(np.float32), y.astype(np.uint8), fnames)
    return out + (list(drop),) if return_dropped else out


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
    labels = read_label_xml(p["xml"])
    xtr, ytr, feats, dropped = read_arff(p["train"], labels, return_dropped=True)
    xte, yte, feats_te = read_arff(p["test"], labels, drop=dropped)
    if feats != feats_te:
        raise ArffError(f"{p['test']}: feature attributes differ from {p['train']}")
    rows = MULAN[name].rows
    check_rows(name, "train", len(xtr), rows[0] if rows else None)
    check_rows(name, "test", len(xte), rows[1] if rows else None)
    return MultilabelData(name, xtr, ytr, xte, yte, feats, labels,
                          meta={"source": {k: str(v) for k, v in p.items() if k != "sums"},
                                "dropped": dropped})


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

    root = Path(root)

    def res(f: str) -> Path:
        q = Path(f)
        return q if q.is_absolute() else root / q

    files = {"train": res(spec.train), "test": res(spec.test)}
    if spec.format == "arff":
        if not spec.labels_xml:
            raise InputError(f"custom data set {name!r}: format arff needs labels_xml")
        files["xml"] = res(spec.labels_xml)
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


def stratified_val_split(y: np.ndarray, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Carve a validation split from a training set by iterative stratification.

    Uses ``iterstrat.ml_stratifiers.MultilabelStratifiedShuffleSplit`` (iterative
    stratification, Sechidis, Tsoumakas & Vlahavas 2011, as implemented by the
    ``iterative-stratification`` package), then a deterministic repair: a label with >= 2
    positives that landed on one side only gets one positive row moved to the other side
    (a row whose other labels stay represented on both sides is preferred).

    Args:
        y: multi-hot ``[N, C]`` (any dtype; non-zero = positive).
        fraction: share of rows in the validation part, in (0, 1).
        seed: random state of the splitter.

    Returns:
        ``(train_idx, val_idx)``: sorted int64 index arrays partitioning ``range(N)``.

    Raises:
        ValueError: ``fraction`` outside (0, 1) or fewer than 2 rows.
    """
    from iterstrat.ml_stratifiers import MultilabelStratifiedShuffleSplit

    y = (np.asarray(y) != 0).astype(np.int64)
    n = len(y)
    if not 0 < fraction < 1:
        raise InputError(f"fraction must be in (0, 1), got {fraction}")
    if n < 2:
        raise InputError(f"need at least 2 rows to split, got {n}")
    splitter = MultilabelStratifiedShuffleSplit(n_splits=1, test_size=fraction, random_state=seed)
    tr, va = next(splitter.split(np.zeros((n, 1)), y))
    in_val = np.zeros(n, dtype=bool)
    in_val[va] = True
    for _ in range(2 * y.shape[1]):
        pos_tr = y[~in_val].sum(0)
        pos_va = y[in_val].sum(0)
        bad = np.flatnonzero((y.sum(0) >= 2) & ((pos_tr == 0) | (pos_va == 0)))
        if not len(bad):
            break
        c = bad[0]
        to_val = pos_va[c] == 0  # move a positive from train to validation, or back
        cand = np.flatnonzero((y[:, c] == 1) & (in_val != to_val))
        # prefer a row whose other labels keep >= 1 positive on the side it leaves
        side = pos_tr if to_val else pos_va
        safe = [r for r in cand if np.all((side - y[r])[(y[r] == 1) & (np.arange(y.shape[1]) != c)] >= 1)]
        r = (safe or list(cand))[0]
        in_val[r] = to_val
    return np.flatnonzero(~in_val).astype(np.int64), np.flatnonzero(in_val).astype(np.int64)
