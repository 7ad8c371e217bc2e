"""Bring the committed code-track metrics under the pick rule of issue 55 (part 4) without
rerunning what cannot be rerun on two CPU cores without the DVC cache.

- Every fusion's weight: :func:`contrastlab.models.grid_picks.pick_on_grid` applied to
  its committed validation grid (``weight_grid``: validation MRR per weight, mean over seeds).
  Where it picks the committed weight, the committed test numbers stand and the pick record is
  added. The untrained control (``fusion_sentence`` of the default table) is replaced by its
  recomputation (``scripts/code_control_fusion.py``: the new pick, test ranks at every grid
  weight). A trained fusion whose rule now picks another weight keeps its committed weight and
  test numbers (its test ranks need the trained model, not on this machine): it is flagged
  ``pick_rule_not_rerun`` with the former rule's record as ``committed_pick``.
- BM25 ``(k1, b)`` and ridge lambda keep their rule (the Rank@10 argmax, ties MRR: BM25 enters
  every hybrid, so its rule cannot change without rerunning every trained fusion); their pick
  record and margin are added, with ``smooth_pick``, what :func:`pick_on_grid` would choose.

``n_val`` (validation queries): from the splits (the default corpus: 894), else the smallest
count that makes every single-run validation Rank@10 of the table a whole number of queries.

Usage: ``python scripts/code_fusion_picks.py --control /tmp/p4/control``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

from contrastlab.io import write_csv, write_json
from contrastlab.losses.registry import method_row
from contrastlab.models.grid_picks import argmax_pick, pick_on_grid

CONTROL = method_row("code", "sentence_embedding")
LEXICAL, RIDGE = method_row("code", "lexical"), method_row("code", "closed_form_ridge")


def _n_val(baselines: dict) -> int:
    fr = [g["val_rank_at_10"] for g in baselines[LEXICAL]["bm25_grid"]]
    for n in range(10, 100_000):
        x = np.asarray(fr) * n
        if np.allclose(x, np.round(x), atol=1e-6):
            return n
    raise ValueError("no query count fits the validation grid")


def _former(grid: list[dict], n_val: int) -> dict:
    """The former rule's record: validation Rank@10, ties MRR, then the smaller weight."""
    return argmax_pick([g["weight"] for g in grid], [g["val_rank_at_10"] for g in grid], n_val,
                       ties=[g["val_mrr"] for g in grid])


def fusions(path: Path, n_val: int, control: dict | None) -> list[str]:
    h = json.loads(path.read_text())
    notes = []
    for name, m in h["hybrids"].items():
        if "weight_grid" not in m:
            continue
        grid = sorted(m["weight_grid"], key=lambda g: g["weight"])
        former = _former(grid, n_val)
        assert former["choice"] == m["weight"], (path, name, former["choice"], m["weight"])
        if control is not None and name == f"fusion_{CONTROL}":
            new = control[name]
            assert new["weight_grid"] == grid or all(
                abs(a["val_mrr"] - b["val_mrr"]) < 1e-12 for a, b in zip(new["weight_grid"], grid))
            h["hybrids"][name] = {**new, "previous_pick": former}
            notes.append(f"{path}: {name} recomputed, w {m['weight']:g} -> {new['weight']:g}, "
                         f"test R@10 {m['rank_at_10']:.4f} -> {new['rank_at_10']:.4f}")
            continue
        pick = pick_on_grid([g["weight"] for g in grid], [g["val_mrr"] for g in grid], n_val)
        m["pick"] = pick
        m["val_mrr"] = next(g["val_mrr"] for g in grid if g["weight"] == m["weight"])
        if pick["choice"] != m["weight"]:
            m["pick_rule_not_rerun"] = True
            m["committed_pick"] = former
            notes.append(f"{path}: {name} NOT RERUN: rule picks w={pick['choice']:g}, committed "
                         f"w={m['weight']:g} kept (margin of the new pick {pick['margin_items']} items)")
        else:
            notes.append(f"{path}: {name} w={m['weight']:g} confirmed (margin {pick['margin_items']} "
                         f"items{', fragile' if pick['fragile'] else ''})")
    if control is not None:
        rrf = f"rrf_{CONTROL}"
        old, new = h["hybrids"][rrf], control[rrf]
        assert all(abs(old[k] - new[k]) < 1e-12 for k in ("rank_at_1", "rank_at_10", "mrr")), rrf
    write_json(path, h)
    return notes


def baselines(path: Path, n_val: int) -> list[str]:
    b = json.loads(path.read_text())
    bm = b["baselines"][LEXICAL]
    g = bm["bm25_grid"]
    pts = [{"k1": x["k1"], "b": x["b"]} for x in g]
    bm["pick"] = argmax_pick(pts, [x["val_rank_at_10"] for x in g], n_val,
                             ties=[x["val_mrr"] for x in g])
    assert bm["pick"]["choice"] == {"k1": bm["k1"], "b": bm["b"]}, path
    k1s, bs = sorted({x["k1"] for x in g}), sorted({x["b"] for x in g})
    bm["smooth_pick"] = pick_on_grid(pts, [x["val_mrr"] for x in g], n_val,
                                     coords=[(k1s.index(x["k1"]), bs.index(x["b"])) for x in g])
    notes = [f"{path}: {LEXICAL} (k1={bm['k1']:g}, b={bm['b']:g}) margin {bm['pick']['margin_items']} "
             f"items (Rank@10; tie gap {bm['pick'].get('tie_gap_items')}); the smooth rule would "
             f"pick {bm['smooth_pick']['choice']}"]
    if RIDGE in b["baselines"]:
        r = b["baselines"][RIDGE]
        g = r["lambda_grid"]
        r["pick"] = argmax_pick([x["lambda"] for x in g], [x["val_rank_at_10"] for x in g], n_val,
                                ties=[x["val_mrr"] for x in g])
        assert r["pick"]["choice"] == r["lambda"], path
        r["smooth_pick"] = pick_on_grid([x["lambda"] for x in g], [x["val_mrr"] for x in g], n_val)
        notes.append(f"{path}: {RIDGE} lambda={r['lambda']:g} margin {r['pick']['margin_items']} items; "
                     f"the smooth rule would pick {r['smooth_pick']['choice']:g}")
    write_json(path, b)
    return notes


def control_ranks(csv: Path, new: pd.DataFrame) -> None:
    """Replace the control's rows of the committed ranks file by the recomputed ones."""
    old = pd.read_csv(csv)
    ours = old["hybrid"].isin([f"rrf_{CONTROL}", f"fusion_{CONTROL}"])
    first = int(np.flatnonzero(ours.to_numpy())[0])
    keep = old[~ours]
    out = pd.concat([keep.iloc[:first], new, keep.iloc[first:]], ignore_index=True)
    write_csv(csv, out[["id", "repo", "hybrid", "seed", "rank"]])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--control", required=True, help="prefix of code_control_fusion.py's output")
    a = ap.parse_args()
    control = json.loads(Path(f"{a.control}.json").read_text())
    notes = []
    for table in ("code", "code_seed_corpus", "code_biencoder_gpu"):
        mdir = Path("reports/metrics") / table
        b = json.loads((mdir / "baselines.json").read_text())["baselines"]
        n = (control[f"fusion_{CONTROL}"]["pick"]["n_val"] if table != "code_seed_corpus"
             else _n_val(b))
        notes += baselines(mdir / "baselines.json", n)
        for f in sorted(mdir.glob("hybrids*.json")):
            notes += fusions(f, n, control if (table, f.name) == ("code", "hybrids.json") else None)
    control_ranks(Path("reports/data/code/hybrids_ranks.csv"), pd.read_csv(f"{a.control}.csv"))
    print("\n".join(notes))


if __name__ == "__main__":
    main()
