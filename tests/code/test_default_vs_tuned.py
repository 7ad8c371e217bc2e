"""The code report's default-vs-tuned table on a hand-made case: a tuned choice whose ranks
are better on every query is significantly above its default, CIs contain the means, and a
variant without a search space (an ablation) gets no row."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from contrastlab.reporting.code import default_vs_tuned


def _write(root, v, ranks, searched=True, val=0.5):
    mdir = root / "reports" / "metrics" / "code" / "default"
    ddir = root / "reports" / "data" / "code" / "default"
    mdir.mkdir(parents=True, exist_ok=True)
    ddir.mkdir(parents=True, exist_ok=True)
    (mdir / f"{v}.json").write_text(json.dumps({"searched": searched, "val_rank_at_10": val}))
    rows = [{"id": i, "repo": f"r{i % 20}", "seed": s, "rank": int(r)}
            for s, row in enumerate(ranks) for i, r in enumerate(row)]
    pd.DataFrame(rows, columns=["id", "repo", "seed", "rank"]).to_csv(ddir / f"{v}_ranks.csv", index=False)


def test_better_tuned_choice_is_significant_and_ablations_have_no_row(tmp_path):
    rng = np.random.default_rng(0)
    n = 200
    default = rng.integers(1, 40, size=(3, n))
    tuned = np.maximum(1, default - 15)  # better on every query
    _write(tmp_path, "infonce", default, val=0.45)
    _write(tmp_path, "infonce_scratch", default, searched=False)
    loaded = {"ranks": {"infonce": tuned, "infonce_scratch": default},
              "metrics": {"infonce": {"val_rank_at_10": 0.5, "loss": "infonce", "residual": True},
                          "infonce_scratch": {"val_rank_at_10": 0.3, "loss": "infonce"}},
              "repo": np.array([f"r{i % 20}" for i in range(n)])}
    t = default_vs_tuned(tmp_path, loaded, n_resamples=300)
    assert t is not None and len(t.rows) == 1
    row = t.rows[0]
    assert row[1] == "45.0" and row[3] == "50.0"
    d, u = row[2], row[4]
    assert d.low <= d.value <= d.high and u.low <= u.value <= u.high and u.value > d.value
    assert abs(u.value - (tuned <= 10).mean()) < 1e-12
    assert row[5].startswith("+") and float(row[5].split()[-1].rstrip(")")) < 0.05
    assert default_vs_tuned(tmp_path / "none", loaded) is None
