"""The multi-label rows of the variant table carry what training and reporting dispatch on:
every baseline a ``method`` that :func:`contrastlab.training.multilabel.run_seed` knows, every
hybrid a ``method`` and, when it reuses a baseline's model, a ``model_of`` naming a baseline."""

from __future__ import annotations

import pytest

from contrastlab.errors import InputError
from contrastlab.losses.registry import load_variant_table, track_variants


def test_every_baseline_and_hybrid_declares_how_it_is_fitted():
    from contrastlab.training.multilabel import HYBRIDS, METHODS, SKLEARN_BASELINES

    rows = track_variants("multilabel")
    for n, v in rows.items():
        if v.kind == "baseline":
            assert v.method in METHODS, n
        if v.kind == "hybrid":
            assert HYBRIDS[n] == v.method and v.method, n
            assert v.model_of is None or rows[v.model_of].kind == "baseline", n
        if v.method == "forest":
            assert v.estimator.endswith("Classifier") and v.model_keys, n
    assert set(SKLEARN_BASELINES) < {n for n, v in rows.items() if v.kind == "baseline"}


def test_report_rows_follow_the_table_order_and_params():
    from contrastlab.params import load_params
    from contrastlab.reporting import multilabel as rep

    rows = track_variants("multilabel")
    kinds = [rows[n].kind for n in rep.ROWS.table1]
    assert kinds == sorted(kinds, key=["contrastive", "hybrid", "baseline"].index)
    ml = load_params("params.yaml").multilabel
    r = rep.rows_for(ml)
    assert r.base == ml.hybrid_base and r is not rep.ROWS and rep.rows_for() == rep.ROWS
    # a hybrid reusing a baseline's model is compared with that baseline, the others with the base
    assert all(ref == (rows[h].model_of or r.base) for h, ref in r.hybrid_pairs())


def test_model_of_must_name_a_baseline_on_a_hybrid(tmp_path):
    bad = tmp_path / "variants.yaml"
    bad.write_text("multilabel:\n  variants:\n    a: {kind: baseline}\n"
                   "    h: {kind: hybrid, model_of: nope}\n", encoding="utf-8")
    with pytest.raises(InputError, match="model_of"):
        load_variant_table(bad)
    bad.write_text("multilabel:\n  variants:\n    a: {kind: baseline}\n"
                   "    h: {kind: hybrid, model_of: a}\n", encoding="utf-8")
    assert load_variant_table(bad)["multilabel"]["variants"]["h"].model_of == "a"
