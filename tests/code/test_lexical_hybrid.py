"""BM25 over identifier tokens, reciprocal-rank fusion and the validation-only fusion weight."""

from __future__ import annotations

import numpy as np
import pytest

from contrastlab.models.code_baselines import (BM25Scorer, competition_ranks, fuse_scores,
                                               identifier_tokens, ranks_from_scores, rrf_scores)
from contrastlab.models.grid_picks import pick_fusion_weight


def fit_fusion_weight(lexical_val, dense_val, true_val, grid):
    """:func:`pick_fusion_weight` on whole per-seed validation score matrices."""
    return pick_fusion_weight({float(w): [ranks_from_scores(fuse_scores(lx, dn, float(w)), true_val)
                                          for lx, dn in zip(lexical_val, dense_val)] for w in grid})


def test_tokeniser_splits_snake_camel_and_acronyms():
    assert identifier_tokens("getHTTPResponse_code") == [
        "get", "http", "response", "code", "gethttpresponse_code"]
    # a one-part identifier is not repeated; punctuation and bare numbers are dropped
    assert identifier_tokens("def run(x) -> 42:") == ["def", "run", "x"]
    assert identifier_tokens("parseXML2json") == ["parse", "xml", "2", "json", "parsexml2json"]
    with pytest.raises(TypeError):
        identifier_tokens(b"bytes")


def test_bm25_ranks_the_body_sharing_the_rare_identifier_first():
    bodies = [
        "return self.value + 1",
        "cache = load_frobnicator(path)\nreturn cache",
        "for item in items:\n    total += item.value\nreturn total",
        "self.value = value\nreturn self",
    ]
    scorer = BM25Scorer(bodies, k1=1.2, b=0.75)
    s = scorer.scores(["def get_frobnicator(self, path):", "def add(self, value):"])
    assert s.shape == (2, 4)
    assert int(np.argmax(s[0])) == 1  # 'frobnicator' occurs in body 1 only
    assert ranks_from_scores(s, np.array([1, 1]))[0] == 1
    # a query sharing no term with any body scores 0 everywhere: the true body ranks last (ties against it)
    z = scorer.scores(["def zzz_qqq():"])
    assert (z == 0).all() and ranks_from_scores(z, np.array([2]))[0] == 4
    with pytest.raises(ValueError):
        BM25Scorer(bodies, k1=0.0)


def test_bm25_matches_the_formula_by_hand():
    bodies = ["alpha beta", "beta beta gamma", "delta"]
    k1, b = 1.5, 0.75
    got = BM25Scorer(bodies, k1, b).scores(["beta"])[0]
    n, df, avgdl = 3, 2, (2 + 3 + 1) / 3
    idf = np.log(1 + (n - df + 0.5) / (df + 0.5))
    # Lucene's BM25 omits the constant factor (k1 + 1) of Robertson & Zaragoza's Eq. 3.15
    want = [idf * tf / (tf + k1 * (1 - b + b * dl / avgdl)) if tf else 0.0
            for tf, dl in ((1, 2), (2, 3), (0, 1))]
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_rrf_of_two_hand_made_rankings():
    # documents a, b, c, d; ranker 1: a > b > c > d; ranker 2: c > a > d > b
    r1 = np.array([[1, 2, 3, 4]])
    r2 = np.array([[2, 4, 1, 3]])
    fused = rrf_scores([r1, r2], k=60)
    want = [1 / 61 + 1 / 62, 1 / 62 + 1 / 64, 1 / 63 + 1 / 61, 1 / 64 + 1 / 63]
    np.testing.assert_allclose(fused[0], want)
    # a first (1/61 + 1/62), then c, then b and d
    assert list(np.argsort(-fused[0])) == [0, 2, 1, 3] or list(np.argsort(-fused[0])) == [0, 2, 3, 1]
    assert fused[0, 0] > fused[0, 2] > max(fused[0, 1], fused[0, 3])
    # competition ranks from scores: ties share the best rank
    np.testing.assert_array_equal(competition_ranks(np.array([[0.5, 0.9, 0.5, 0.1]])), [[2, 1, 2, 4]])
    with pytest.raises(ValueError):
        rrf_scores([r1, np.array([[1, 2, 3]])])


def test_fusion_weight_is_chosen_on_validation_only():
    rng = np.random.default_rng(0)
    q, n = 30, 50
    true_val = np.arange(q)
    # validation: the lexical scorer finds every true document, the dense one is noise
    lex_val = rng.normal(size=(q, n))
    lex_val[np.arange(q), true_val] += 10.0
    dense_val = rng.normal(size=(q, n))
    w, grid, pick = fit_fusion_weight([lex_val], [dense_val], true_val, [0.0, 0.5, 1.0])
    assert pick["choice"] == w and pick["n_val"] == q and pick["margin_items"] is not None
    assert [g["weight"] for g in grid] == [0.0, 0.5, 1.0]
    assert grid[0]["val_rank_at_10"] < grid[2]["val_rank_at_10"]
    assert w in (0.5, 1.0) and grid[[0.0, 0.5, 1.0].index(w)]["val_rank_at_10"] == 1.0
    # swapping the roles on validation flips the choice to the dense side: the choice follows
    # the validation scores it is given (no test data enters the function)
    w2, _, _ = fit_fusion_weight([dense_val], [lex_val], true_val, [0.0, 0.5, 1.0])
    assert w2 in (0.0, 0.5) and w2 <= 1 - w
    fused = fuse_scores(lex_val, dense_val, 1.0)
    assert (ranks_from_scores(fused, true_val) == 1).all()
    with pytest.raises(ValueError):
        fuse_scores(lex_val, dense_val, 1.5)


def test_fusion_weight_from_chunked_ranks_matches_whole_matrix_rule():
    """``pick_fusion_weight`` on ranks computed query chunk by query chunk (how ``hybrid_code``
    scores a large corpus) picks what ``fit_fusion_weight`` picks on the whole matrices; the
    criterion is the validation MRR (Rank@10 is only recorded); equal MRR everywhere: the
    plateau is the whole grid and its centre is picked."""
    rng = np.random.default_rng(3)
    q, n, grid = 40, 60, [0.0, 0.3, 0.7, 1.0]
    true_val = rng.permutation(n)[:q]
    lex = [rng.normal(size=(q, n)) for _ in range(2)]
    dense = [rng.normal(size=(q, n)) for _ in range(2)]
    for s in range(2):
        lex[s][np.arange(q), true_val] += rng.uniform(0, 3, q)
        dense[s][np.arange(q), true_val] += rng.uniform(0, 3, q)
    whole = fit_fusion_weight(lex, dense, true_val, grid)
    chunked = {w: [np.concatenate([ranks_from_scores(fuse_scores(lx[a:a + 7], dn[a:a + 7], w),
                                                     true_val[a:a + 7]) for a in range(0, q, 7)])
                   for lx, dn in zip(lex, dense)] for w in grid}
    assert pick_fusion_weight(chunked) == whole
    # hand-made: equal Rank@10 at both weights, MRR decides (0.8: 1 + 1/5 against 1/2 + 1/3,
    # 0.37 items apart: over 1 % of the 3 queries, not fragile); equal MRR: the grid's centre
    a, b = np.array([1, 5, 20]), np.array([2, 3, 20])
    w, table, pick = pick_fusion_weight({0.2: [b], 0.8: [a]})
    assert w == 0.8 and table[0]["val_rank_at_10"] == table[1]["val_rank_at_10"] == 2 / 3
    assert pick["runner_up"] == 0.2 and not pick["fragile"]
    assert pick["margin_items"] == pytest.approx((1 + 1 / 5) - (1 / 2 + 1 / 3), abs=1e-3)
    assert pick_fusion_weight({0.9: [a], 0.5: [a], 0.1: [a]})[0] == 0.5
    with pytest.raises(ValueError):  # seeds of different lengths
        pick_fusion_weight({0.5: [a, a[:2]]})
    with pytest.raises(ValueError):
        pick_fusion_weight({})
