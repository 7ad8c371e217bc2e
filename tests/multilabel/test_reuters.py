"""Reuters-21578 ModApte from the raw SGML: the 90-category document counts."""

from pathlib import Path

import pytest

from contrastlab.data.reuters import modapte_90, read_reuters
from contrastlab.utils import repo_root

RAW = repo_root(Path(__file__).parent).parent / "shared" / "datasets" / "reuters21578" / "raw"


@pytest.mark.skipif(not RAW.exists(), reason=f"optional data set not present: {RAW}")
def test_modapte_counts():
    docs = read_reuters(RAW)
    assert len(docs) == 21578
    m = modapte_90(docs)
    assert m["n_modapte_train"] == 9603 and m["n_modapte_test"] == 3299
    assert len(m["labels"]) == 90
    assert m["y_train"].shape == (7770, 90) and m["y_test"].shape == (3019, 90)
    assert len(m["train_text"]) == 7770 and len(m["test_text"]) == 3019
    assert (m["y_train"].sum(1) >= 1).all() and (m["y_test"].sum(1) >= 1).all()
    assert (m["y_train"].sum(0) >= 1).all() and (m["y_test"].sum(0) >= 1).all()
    assert "earn" in m["labels"] and "acq" in m["labels"]
    assert all("&#" not in t for t in m["train_text"][:200])


def test_missing_folder_names_it(tmp_path):
    with pytest.raises(FileNotFoundError, match=str(tmp_path)):
        read_reuters(tmp_path)
