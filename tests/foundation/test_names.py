"""One table of names: ``losses/registry.yaml`` (losses) and ``losses/variants.yaml`` (the
rows of each track) are the only places that write a registered loss name. A name written as
a string in a module outside the loss package (``src/contrastlab/losses/``, where each loss
implements its own modes) would be a second place a newcomer must find when adding or
renaming a loss, so this test fails on it.

A string that happens to equal a loss name but means something else (the kNN metric
``"cosine"``, ``layers="all"``) is allowed on a line marked ``# not a loss name``.

The same holds for every other row of the variant table: baselines, hybrids, aliases and
variants not named after their loss (``bce``, ``extratrees``, ``hybrid_et``, ``simdis_eq13``,
``sgc``, ...). Training and reporting dispatch on a row's declared ``kind`` and ``method``,
never on its name; a string equal to a row name with another meaning (the ``knn`` prefix of
a metric name, a GNN architecture) is allowed on a line marked ``# not a row name``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from _astutil import docstring_ids

from contrastlab.losses.registry import LOSSES, load_table, load_variant_table

SRC = Path(__file__).resolve().parents[2] / "src" / "contrastlab"
PRAGMA = "# not a loss name"
ROW_PRAGMA = "# not a row name"


def name_literals(path: Path, names: set[str], pragma: str = PRAGMA, base: Path = SRC.parent) -> list[str]:
    """``"file:line: 'name'"`` for every string constant of ``path`` equal to one of
    ``names`` (docstrings and lines carrying ``pragma`` excepted)."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    tree = ast.parse(text, str(path))
    docs = docstring_ids(tree)
    out = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names
                and id(node) not in docs and pragma not in lines[node.lineno - 1]):
            out.append(f"{path.relative_to(base)}:{node.lineno}: {node.value!r}")
    return out


def test_no_module_outside_the_tables_writes_a_loss_name():
    names = set(LOSSES)
    found = []
    for p in sorted(SRC.rglob("*.py")):
        if p.parent.name != "losses":
            found += name_literals(p, names)
    assert not found, ("loss names written outside losses/registry.yaml and losses/variants.yaml "
                       "(read them from contrastlab.losses.registry):\n" + "\n".join(found))


def row_names() -> set[str]:
    """Every row of the variant table that is not a registered loss's own name (baselines,
    hybrids, aliases, variants binding a loss under another name), every track."""
    table = load_variant_table()
    return {n for sec in table.values() for n in sec["variants"] if n not in LOSSES}


def test_no_module_outside_the_tables_writes_a_row_name():
    names = row_names()
    assert {"bce", "logreg", "extratrees", "hybrid_et", "simdis_eq13", "sgc", "frozen", "head",
            "tfidf", "gcn", "gat"} <= names
    found = []
    for p in sorted(SRC.rglob("*.py")):
        if p.parent.name != "losses":
            found += name_literals(p, names, ROW_PRAGMA)
    assert not found, ("variant-table row names written outside losses/variants.yaml (read the "
                       "row's kind/method from contrastlab.losses.registry):\n" + "\n".join(found))


def test_the_scripts_and_stages_write_no_row_name():
    root = SRC.parents[1]
    found = []
    for p in [*sorted((root / "stages").glob("*.py")), *sorted((root / "scripts").glob("*.py"))]:
        found += name_literals(p, row_names(), ROW_PRAGMA, base=root)
    assert not found, "row names written in stages/ or scripts/:\n" + "\n".join(found)


def test_the_scan_sees_a_name_in_code_but_not_in_a_docstring_or_a_marked_line():
    f = SRC / "_probe_names.py"  # the scan reports paths relative to src/
    try:
        f.write_text('"""Uses "mixco" in prose."""\nX = {"mixco": 1}\nY = "mixco"  # not a loss name\n'
                     'def g():\n    """ntxent"""\n    return "ntxent"\n', encoding="utf-8")
        assert name_literals(f, set(LOSSES)) == [
            "contrastlab/_probe_names.py:2: 'mixco'", "contrastlab/_probe_names.py:6: 'ntxent'"]
    finally:
        f.unlink()


def test_variant_table_rows_name_registered_losses_and_bad_entries_are_refused(tmp_path):
    table = load_variant_table()
    for track, sec in table.items():
        for name, v in sec["variants"].items():
            assert v.loss is None or v.loss in LOSSES, (track, name)
            assert v.title and v.short
        for role, name in sec["roles"].items():
            assert name in sec["variants"], (track, role)
    from contrastlab.errors import InputError

    bad = tmp_path / "variants.yaml"
    bad.write_text("graph:\n  variants:\n    x: {loss: no_such_loss}\n", encoding="utf-8")
    with pytest.raises(InputError, match="no_such_loss"):
        load_variant_table(bad)
    bad.write_text("graph:\n  variants:\n    x: {loss: ntxent, colour: red}\n", encoding="utf-8")
    with pytest.raises(InputError, match="colour"):
        load_variant_table(bad)
    assert load_table()  # the loss table parses on its own


def test_a_registered_loss_is_a_variant_of_its_own_name_without_a_table_entry():
    from contrastlab.losses.registry import UnknownNameError, variant_spec

    spec = variant_spec("graph", next(n for n, s in LOSSES.items() if s.needs == "views"))
    assert spec.loss == spec.name and spec.title == LOSSES[spec.name].title
    with pytest.raises(UnknownNameError):
        variant_spec("graph", "no_such_variant")
