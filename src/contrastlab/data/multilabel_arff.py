"""The MULAN file formats (:mod:`contrastlab.data.multilabel`): the label XML header and ARFF
files, dense (comma-separated rows) and sparse (``{index value, ...}`` rows, absent entries
are 0), read with the ``liac-arff`` package (``scipy.io.arff`` cannot read sparse rows).

Numeric attributes and nominal attributes with numeric values ({0,1}) are read as numbers;
other nominal attributes are one-hot encoded over the categories declared in the header
(feature names ``attr=value``); a nominal or string attribute taking a different value on
every row (an identifier) is dropped.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np


class ArffError(ValueError):
    """A malformed ARFF or label-XML file (the message names the file)."""


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
        if el.tag.rsplit("}", 1)[-1] == "label":
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
    if isinstance(typ, list) and not _is_numeric_nominal(typ):
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
    if not isinstance(typ, list) and str(typ).upper() not in {"NUMERIC", "REAL", "INTEGER"}:
        raise ArffError(f"{path}: attribute {name!r} has unsupported type {typ!r} "
                        "(a string attribute is accepted only as an identifier, one value per row)")
    if any(v is None for v in values):
        raise ArffError(f"{path}: attribute {name!r} has missing values ('?')")
    return np.asarray(values, dtype=object).astype(np.float32)[:, None], [name]


def _identifier_like(values: np.ndarray, attr: tuple) -> bool:
    """A nominal (non-numeric) or string attribute with a distinct value on every row."""
    _, typ = attr
    nominal = isinstance(typ, list) and not _is_numeric_nominal(typ)
    if not (nominal or str(typ).upper() == "STRING"):
        return False
    vals = list(values)
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
        rows, cols = np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64)
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
