"""Recompute the code track's untrained control fusion (BM25 + the sentence embedding) from
the extracted functions and the splits alone (no teacher states, no trained model), with the
fusion-weight pick of :func:`contrastlab.models.grid_picks.pick_on_grid` and its test
ranks at every grid weight, exactly as ``hybrid_code`` computes them
(:func:`contrastlab.evaluation.code_hybrids.fuse_with_bm25`).

Before anything is written it checks that this machine reproduces the committed numbers: the
BM25 and sentence-embedding test ranks of ``baselines_ranks.csv`` and the committed control
fusions (``rrf_sentence`` and ``fusion_sentence`` at its committed weight) of
``hybrids_ranks.csv``, rank for rank. Writes ``<out>.json`` (the ``rrf_sentence`` and
``fusion_sentence`` entries of ``hybrids.json``) and ``<out>.csv`` (their ranks).

Usage: ``python scripts/code_control_fusion.py --functions F --splits S --out PREFIX``
(``F``, ``S``: the outputs of the cheap stages fetch_repos, extract_functions, split_by_repo).
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np
import pandas as pd

from contrastlab.biencoder.data import load_pairs
from contrastlab.evaluation.code_hybrids import at_weight, fuse_with_bm25, sentence_control
from contrastlab.evaluation.retrieval import true_ranks
from contrastlab.models.code_baselines import BM25Scorer, ranks_from_scores
from contrastlab.losses.registry import method_row
from contrastlab.params import load_params
from contrastlab.utils import set_cpu_threads


def _same(name: str, got: np.ndarray, ids: np.ndarray, committed: pd.DataFrame) -> None:
    want = committed.set_index("id").loc[ids, "rank"].to_numpy()
    bad = int((want != got).sum())
    print(f"check {name}: {len(ids) - bad}/{len(ids)} test ranks equal the committed ones")
    if bad:
        sys.exit(f"{name}: {bad} ranks differ from the committed file; nothing written")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--functions", required=True)
    ap.add_argument("--splits", required=True)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--metrics", default="reports/metrics/code")
    ap.add_argument("--data", default="reports/data/code")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    code = load_params(a.params).code
    set_cpu_threads(code.train.threads)
    pairs = load_pairs(a.functions, a.splits)
    va, te = pairs.rows("val"), pairs.rows("test")
    lexical = method_row("code", "lexical")  # BM25: the row the name table says
    bm = json.load(open(f"{a.metrics}/baselines.json"))["baselines"][lexical]
    br = pd.read_csv(f"{a.data}/baselines_ranks.csv")
    hr = pd.read_csv(f"{a.data}/hybrids_ranks.csv")
    committed = json.load(open(f"{a.metrics}/hybrids.json"))["hybrids"]
    sigs, bodies = pairs.signatures, pairs.bodies
    lex = BM25Scorer(bodies, bm["k1"], bm["b"]).scores([sigs[i] for i in te])
    _same(lexical, ranks_from_scores(lex, te), te, br[br["baseline"] == lexical])
    sentence, pred = sentence_control(code, sigs, bodies, va, te)
    _, qt, corpus = pred[0]
    _same(sentence, true_ranks(qt, corpus, te, code.evaluate.k_max, device="cpu"), te,
          br[br["baseline"] == sentence])
    out, frames = fuse_with_bm25(code, bm, sigs, bodies, {sentence: pred}, va, te, pairs.repo,
                                 every_weight=(sentence,))
    ranks = pd.concat(frames)
    f, old_w = f"fusion_{sentence}", committed[f"fusion_{sentence}"]["weight"]
    _same(f"rrf_{sentence}", ranks[ranks["hybrid"] == f"rrf_{sentence}"]["rank"].to_numpy(), te,
          hr[hr["hybrid"] == f"rrf_{sentence}"])
    _same(f"{f} at the committed w={old_w:g}",
          ranks[ranks["hybrid"] == at_weight(f, old_w)]["rank"].to_numpy(), te, hr[hr["hybrid"] == f])
    old_grid = {g["weight"]: g for g in committed[f]["weight_grid"]}
    for g in out[f]["weight_grid"]:
        o = old_grid[g["weight"]]
        if abs(o["val_mrr"] - g["val_mrr"]) > 1e-9 or abs(o["val_rank_at_10"] - g["val_rank_at_10"]) > 1e-9:
            sys.exit(f"validation grid differs at w={g['weight']}: {g} vs {o}; nothing written")
    print("check: the validation grid equals the committed one")
    with open(f"{a.out}.json", "w") as fh:
        json.dump(out, fh, indent=2, sort_keys=True)
    ranks.to_csv(f"{a.out}.csv", index=False)
    print(f"wrote {a.out}.json, {a.out}.csv")


if __name__ == "__main__":
    main()
