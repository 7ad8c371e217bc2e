"""Nominal attributes, identifier columns, row-count checks and the stratified validation split."""

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from contrastlab.data.multilabel import (ArffError, check_rows, load_mulan, load_user_dataset,
                                         read_arff, read_label_xml, stratified_val_split)
from contrastlab.utils import repo_root

VENDOR = repo_root(Path(__file__).parent) / "data" / "vendor" / "mulan"

NOMINAL = """@relation toy
@attribute id {r1,r2,r3,r4}
@attribute colour {red,green,blue}
@attribute size numeric
@attribute flag {0,1}
@attribute L1 {0,1}
@attribute L2 {0,1}
@data
r1,green,1.5,1,1,0
r2,red,2,0,0,1
r3,blue,-1,1,1,1
r4,green,0,0,0,0
"""
XML = '<labels xmlns="http://mulan.sourceforge.net/labels"><label name="L1"/><label name="L2"/></labels>'


def test_nominal_one_hot_and_identifier_dropped(tmp_path):
    (tmp_path / "t.arff").write_text(NOMINAL)
    (tmp_path / "l.xml").write_text(XML)
    x, y, names, dropped = read_arff(tmp_path / "t.arff", read_label_xml(tmp_path / "l.xml"),
                                     return_dropped=True)
    assert dropped == ["id"]  # one distinct value per row: an identifier
    assert names == ["colour=red", "colour=green", "colour=blue", "size", "flag"]
    np.testing.assert_array_equal(x[:, :3], [[0, 1, 0], [1, 0, 0], [0, 0, 1], [0, 1, 0]])
    np.testing.assert_array_equal(x[:, 3], [1.5, 2, -1, 0])
    np.testing.assert_array_equal(x[:, 4], [1, 0, 1, 0])
    np.testing.assert_array_equal(y, [[1, 0], [0, 1], [1, 1], [0, 0]])
    # the test file of the pair drops the same attribute even where it is not unique
    test = NOMINAL.replace("r2,red", "r1,red")
    (tmp_path / "u.arff").write_text(test)
    x2, _, names2 = read_arff(tmp_path / "u.arff", ["L1", "L2"], drop=dropped)
    assert names2 == names and x2.shape == x.shape


def test_undeclared_nominal_value_is_an_error(tmp_path):
    (tmp_path / "t.arff").write_text(NOMINAL.replace("r3,blue", "r3,purple"))
    with pytest.raises(ArffError, match="t.arff"):
        read_arff(tmp_path / "t.arff", ["L1", "L2"])


def test_truncated_file_is_an_error(tmp_path):
    check_rows("x", "train", 5, None)
    with pytest.raises(ValueError, match="expected 391"):
        check_rows("emotions", "train", 390, 391)
    # a copy of a vendored set cut at a line boundary parses but fails the row count
    src = (VENDOR / "emotions" / "emotions-train.arff").read_text().splitlines(keepends=True)
    root = tmp_path / "mulan"
    (root / "emotions").mkdir(parents=True)
    (root / "emotions" / "emotions-train.arff").write_text("".join(src[:-3]))
    for f in ("emotions-test.arff", "emotions.xml"):
        (root / "emotions" / f).write_bytes((VENDOR / "emotions" / f).read_bytes())
    with pytest.raises(ValueError, match="rows, expected 391"):
        load_mulan("emotions", root, "/nonexistent", verify=False)


def test_vendored_default_sets_and_row_counts():
    for name, shape in {"scene": (1211, 294), "emotions": (391, 72), "medical": (333, 1449)}.items():
        d = load_mulan(name, VENDOR, "/nonexistent")
        assert d.x_train.shape == shape and d.meta["dropped"] == []


def test_user_csv_dataset_checks(tmp_path):
    rng = np.random.default_rng(0)
    import pandas as pd

    for split, n in (("train", 12), ("test", 6)):
        df = pd.DataFrame(rng.normal(size=(n, 3)), columns=["a", "b", "c"])
        df["lab1"] = rng.integers(0, 2, n)
        df["lab2"] = rng.integers(0, 2, n)
        df.to_csv(tmp_path / f"{split}.csv", index=False)
    spec = SimpleNamespace(format="csv", train="train.csv", test="test.csv", labels_xml=None,
                           label_columns=["lab1", "lab2"], rows=[12, 6], sha256={})
    d = load_user_dataset("mine", spec, tmp_path)
    assert d.x_train.shape == (12, 3) and d.y_test.shape == (6, 2) and d.feature_names == ["a", "b", "c"]
    with pytest.raises(ValueError, match="expected 13"):
        load_user_dataset("mine", SimpleNamespace(**{**spec.__dict__, "rows": [13, 6]}), tmp_path)
    with pytest.raises(ValueError, match="label column"):
        load_user_dataset("mine", SimpleNamespace(**{**spec.__dict__, "label_columns": ["zz"]}), tmp_path)
    with pytest.raises(ValueError, match="SHA-256 mismatch"):
        load_user_dataset("mine", SimpleNamespace(**{**spec.__dict__, "sha256": {"train.csv": "0" * 64}}), tmp_path)


@pytest.mark.parametrize("name", ["yeast", "enron", "medical"])
def test_stratified_split_keeps_labels_on_both_sides(name):
    y = load_mulan(name, VENDOR, "/nonexistent").y_train
    tr, va = stratified_val_split(y, 0.2, seed=0)
    assert len(np.intersect1d(tr, va)) == 0 and len(tr) + len(va) == len(y)
    assert abs(len(va) / len(y) - 0.2) < 0.03
    need = y.sum(0) >= 2
    assert (y[tr][:, need].sum(0) >= 1).all() and (y[va][:, need].sum(0) >= 1).all()
    tr2, va2 = stratified_val_split(y, 0.2, seed=0)
    np.testing.assert_array_equal(va, va2)  # seeded
