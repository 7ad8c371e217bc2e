"""MULAN ARFF/XML loading on the real vendored files, and clear errors on malformed input."""

from pathlib import Path

import numpy as np
import pytest

from contrastlab.data.multilabel import (ArffError, label_stats, load_mulan, read_arff,
                                         read_label_xml)
from contrastlab.utils import repo_root

VENDOR = repo_root(Path(__file__).parent) / "data" / "vendor" / "mulan"


def test_dense_arff_yeast_shapes_and_cardinality():
    d = load_mulan("yeast", VENDOR, "/nonexistent")
    assert d.x_train.shape == (1500, 103) and d.x_test.shape == (917, 103)
    assert d.y_train.shape == (1500, 14) and d.y_test.shape == (917, 14)
    assert d.x_train.dtype == np.float32 and d.y_train.dtype == np.uint8
    # label cardinality of yeast: 4.24 over the union (MULAN README); per split:
    assert label_stats(d.y_train)["cardinality"] == pytest.approx(4.228, abs=1e-3)
    assert label_stats(d.y_test)["cardinality"] == pytest.approx(4.2519, abs=1e-3)
    # XML order is kept (yeast.xml lists Class6 before Class4)
    assert d.label_names[:4] == ["Class1", "Class2", "Class3", "Class6"]
    assert "Class1" not in d.feature_names and len(d.feature_names) == 103


def test_sparse_arff_enron_shapes_and_cardinality():
    d = load_mulan("enron", VENDOR, "/nonexistent")
    assert d.x_train.shape == (1123, 1001) and d.x_test.shape == (579, 1001)
    assert d.y_train.shape == (1123, 53)
    n = len(d.y_train) + len(d.y_test)
    card = (d.y_train.sum() + d.y_test.sum()) / n
    assert card == pytest.approx(3.378, abs=5e-3)  # MULAN: 3.38
    assert set(np.unique(d.x_train)) <= {0.0, 1.0}
    assert d.x_train.sum() > 0


HEADER = """@relation toy
@attribute f1 numeric
@attribute f2 {0,1}
@attribute f3 numeric
@attribute L1 {0,1}
@attribute L2 {0,1}
@data
"""
XML = """<?xml version="1.0" encoding="utf-8"?>
<labels xmlns="http://mulan.sourceforge.net/labels"><label name="L2"></label><label name="L1"></label></labels>
"""


def test_sparse_and_dense_forms_agree(tmp_path):
    dense = HEADER + "1.5,1,0,1,0\n0,0,0,0,0\n-2,0,3.25,1,1\n"
    sparse = HEADER + "{0 1.5,1 1,3 1}\n{}\n{0 -2,2 3.25,3 1,4 1}\n"
    (tmp_path / "d.arff").write_text(dense)
    (tmp_path / "s.arff").write_text(sparse)
    (tmp_path / "l.xml").write_text(XML)
    labels = read_label_xml(tmp_path / "l.xml")
    assert labels == ["L2", "L1"]
    xd, yd, fd = read_arff(tmp_path / "d.arff", labels)
    xs, ys, fs = read_arff(tmp_path / "s.arff", labels)
    assert fd == fs == ["f1", "f2", "f3"]
    np.testing.assert_array_equal(xd, xs)
    np.testing.assert_array_equal(yd, ys)
    np.testing.assert_array_equal(yd, [[0, 1], [0, 0], [1, 1]])  # columns in XML order
    np.testing.assert_allclose(xd[2], [-2, 0, 3.25])


def test_malformed_arff_names_the_file(tmp_path):
    (tmp_path / "l.xml").write_text(XML)
    bad = tmp_path / "broken.arff"
    bad.write_text(HEADER.replace("@attribute f3 numeric", "@attribute f3 nonsense_type") + "1,1,0,1,0\n")
    with pytest.raises(ArffError, match="broken.arff"):
        read_arff(bad, ["L2", "L1"])
    bad2 = tmp_path / "badrow.arff"
    bad2.write_text(HEADER + "1,1,0,1\n")  # one value short
    with pytest.raises(ArffError, match="badrow.arff"):
        read_arff(bad2, ["L2", "L1"])
    nodata = tmp_path / "nodata.arff"
    nodata.write_text(HEADER.replace("@data\n", ""))
    with pytest.raises(ArffError, match="nodata.arff.*@data"):
        read_arff(nodata, ["L2", "L1"])
    upper = tmp_path / "upper.arff"
    upper.write_text(HEADER.replace("@data", "@DATA") + "{0 1.5,3 1}\n")
    x, y, _ = read_arff(upper, ["L2", "L1"])
    assert x.shape == (1, 3) and y.tolist() == [[0, 1]]
    bad3 = tmp_path / "badlabel.arff"
    bad3.write_text(HEADER + "1,1,0,1,0\n")
    with pytest.raises(ArffError, match="badlabel.arff.*L9"):
        read_arff(bad3, ["L9"])


def test_malformed_label_xml_names_the_file(tmp_path):
    bad = tmp_path / "labels_bad.xml"
    bad.write_text("<labels><label name='a'></labels")
    with pytest.raises(ArffError, match="labels_bad.xml"):
        read_label_xml(bad)
    empty = tmp_path / "nolabels.xml"
    empty.write_text("<labels></labels>")
    with pytest.raises(ArffError, match="nolabels.xml"):
        read_label_xml(empty)
    with pytest.raises(FileNotFoundError, match="missing.xml"):
        read_label_xml(tmp_path / "missing.xml")


def test_missing_vendored_file_names_path(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"bibtex-train\.arff"):
        load_mulan("bibtex", tmp_path, tmp_path)


def test_bibtex_is_vendored_with_checksums():
    """bibtex (159 labels) is vendored like the six default sets: SHA256SUMS verified, the
    published row counts and label count."""
    from contrastlab.data.multilabel import MULAN, mulan_paths, read_label_xml
    from contrastlab.io import verify_sha256sums

    assert MULAN["bibtex"].vendored
    p = mulan_paths("bibtex", VENDOR, "/nonexistent")
    verify_sha256sums(p["sums"].parent, p["sums"])
    assert len(read_label_xml(p["xml"])) == 159


def test_checksum_mismatch_is_reported(tmp_path):
    import shutil

    dst = tmp_path / "yeast"
    shutil.copytree(VENDOR / "yeast", dst)
    with open(dst / "yeast.xml", "a") as f:
        f.write("\n")
    with pytest.raises(ValueError, match="yeast.xml.*SHA-256"):
        load_mulan("yeast", tmp_path, "/nonexistent")
