"""Within-problem tier metrics (finetune.tiers) against plain per-query loops, on hand-made
and random cases; the tier-blind reference against a simulation of its definition; the
ceiling reached by an oracle embedding and never exceeded."""

import itertools

import numpy as np
import pytest
import torch

from contrastlab.finetune.data import make_splits
from contrastlab.finetune.evaluate import purity_ceiling
from contrastlab.finetune.tiers import (code_tokens, problem_sets, reference_metrics, split_sets,
                                        tier_items, within_one_edit, within_problem_metrics)


def levenshtein(a, b) -> int:
    """Textbook dynamic programme."""
    d = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i in range(len(a) + 1):
        d[i][0] = i
    for j in range(len(b) + 1):
        d[0][j] = j
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1]))
    return d[-1][-1]


def plain(emb_q, emb_c, pq, tq, kq, pc, tc, kc, loo):
    """Per query, straight from the definitions (cosine via numpy, every corpus row visited)."""
    q = emb_q / np.linalg.norm(emb_q, axis=1, keepdims=True)
    c = emb_c / np.linalg.norm(emb_c, axis=1, keepdims=True)
    out = {"wp_auc": [], "wp_nn_tier": [], "wp_pair_sep": []}
    for i in range(len(q)):
        same, other, mutants = [], [], []
        for j in range(len(c)):
            if pc[j] != pq[i] or (loo and i == j):
                continue
            s = float(np.dot(q[i].astype(np.float64), c[j].astype(np.float64)))
            if tc[j] == tq[i]:
                same.append(s)
            else:
                other.append(s)
                if levenshtein(kq[i], kc[j]) <= 1:
                    mutants.append(s)
        if same and other:
            tot = 0.0
            for x in same:
                for o in other:
                    tot += 1.0 if x > o else 0.5 if x == o else 0.0
            out["wp_auc"].append(tot / (len(same) * len(other)))
        else:
            out["wp_auc"].append(np.nan)
        if other:
            top = max(same + other)
            n_top_same = sum(x == top for x in same)
            n_top = n_top_same + sum(o == top for o in other)
            out["wp_nn_tier"].append(n_top_same / n_top)
        else:
            out["wp_nn_tier"].append(np.nan)
        if mutants:
            if not same:
                out["wp_pair_sep"].append(0.0)
            else:
                best = max(same)
                out["wp_pair_sep"].append(np.mean([1.0 if best > m else 0.5 if best == m else 0.0
                                                   for m in mutants]))
        else:
            out["wp_pair_sep"].append(np.nan)
    return {k: np.array(v, dtype=np.float64) for k, v in out.items()}


def test_within_one_edit_matches_levenshtein():
    rng = np.random.default_rng(0)
    for _ in range(400):
        a = list(rng.integers(0, 3, rng.integers(0, 6)))
        b = list(rng.integers(0, 3, rng.integers(0, 6)))
        assert within_one_edit(a, b) == (levenshtein(a, b) <= 1), (a, b)
    assert within_one_edit("abc", "abc") and within_one_edit("", "x") and not within_one_edit("ab", "ba")


def test_code_tokens_one_operator_mutant_is_one_edit():
    a = code_tokens("if x < m:\n    m = x")
    b = code_tokens("if x >= m:\n    m = x")
    assert a[:3] == ["if", "x", "<"] and within_one_edit(a, b)
    assert not within_one_edit(a, code_tokens("if x >= n:\n    m = x"))


def test_hand_made_query():
    # one query of problem P, tier PASS; corpus: two PASS, two FAIL (one a one-token mutant),
    # one row of another problem that is closest of all and must be ignored
    emb_q = torch.tensor([[1.0, 0.0]])
    emb_c = torch.tensor([[0.9, 0.1], [0.2, 0.8], [0.8, 0.2], [0.0, 1.0], [1.0, 0.0]])
    tiers_c = ["PASS", "PASS", "FAIL", "FAIL", "PASS"]
    probs_c = ["P", "P", "P", "P", "Q"]
    tok_q = ["a", "<", "b"]
    tok_c = [["x"], ["y"], ["a", ">=", "b"], ["z", "z", "z"], ["a", "<", "b"]]
    sets = problem_sets(["P"], ["PASS"], [tok_q], probs_c, tiers_c, tok_c, loo=False)
    m = within_problem_metrics(emb_q, emb_c, sets)
    # cosines: PASS 0.994, 0.243; FAIL 0.970, 0.0 -> pairs won: 2 + 1 of 4
    assert m["wp_auc"][0] == pytest.approx(0.75)
    assert m["wp_nn_tier"][0] == 1.0  # nearest of problem P is the first PASS row
    assert m["wp_pair_sep"][0] == 1.0  # best PASS (0.994) beats the mutant (0.970)
    ref = reference_metrics(sets, 5)
    assert ref["tierblind"]["wp_auc"][0] == 0.5 and ref["tierblind"]["wp_nn_tier"][0] == 0.5
    assert ref["tierblind"]["wp_pair_sep"][0] == pytest.approx(2 / 3)
    assert ref["tierblind"]["knn5_pxt"][0] == pytest.approx(4 * 2 / (4 * 5))
    assert ref["ceiling"]["knn5_pxt"][0] == pytest.approx(2 / 5)
    # the mutant moved above every PASS row: not separated, nearest has the wrong tier
    emb_c[2] = torch.tensor([1.0, 0.0])
    m = within_problem_metrics(emb_q, emb_c, sets)
    assert m["wp_pair_sep"][0] == 0.0 and m["wp_nn_tier"][0] == 0.0
    assert m["wp_auc"][0] == pytest.approx(0.5)


def test_ties_count_half():
    emb_q = torch.tensor([[1.0, 0.0]])
    emb_c = torch.tensor([[0.5, 0.5], [0.5, 0.5]])
    sets = problem_sets(["P"], ["PASS"], [["a"]], ["P", "P"], ["PASS", "FAIL"], [["b"], ["a"]], loo=False)
    m = within_problem_metrics(emb_q, emb_c, sets)
    assert m["wp_auc"][0] == 0.5 and m["wp_nn_tier"][0] == 0.5 and m["wp_pair_sep"][0] == 0.5


def _random_case(seed, n_problems=10, per=8, dim=4):
    rng = np.random.default_rng(seed)
    problems = np.repeat([f"p{i}" for i in range(n_problems)], per)
    tiers = rng.choice(["PASS", "PARTIAL", "FAIL"], size=len(problems))
    base = ["def f ( x ) : return x + 1", "def f ( x ) : return x - 1", "def f ( y ) : return y"]
    texts = []
    for i in range(len(problems)):
        t = base[rng.integers(0, 3)].split()
        if rng.random() < 0.5:  # a one-token edit
            t[rng.integers(0, len(t))] = str(rng.integers(0, 3))
        texts.append(" ".join(t))
    emb = torch.as_tensor(rng.normal(size=(len(problems), dim)), dtype=torch.float32)
    # coarse values make exact ties likely
    emb = torch.round(emb * 2) / 2 + 0.01
    return problems, tiers, texts, emb


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_cases_match_the_plain_loops(seed):
    problems, tiers, texts, emb = _random_case(seed)
    split = make_splits(problems, tiers, test_problem_fraction=0.3, test_fraction=0.3,
                        val_fraction=0.15, seed=seed)
    sets = split_sets(problems, tiers, split, texts)
    got = tier_items(emb, sets)
    toks = [code_tokens(t) for t in texts]
    e = emb.numpy()
    for s, (q, c, _) in sets.items():
        want = plain(e[q], e[c], problems[q], tiers[q], [toks[i] for i in q], problems[c],
                     tiers[c], [toks[j] for j in c], loo=(s == "b"))
        for m in want:
            np.testing.assert_allclose(got[s][m], want[m], atol=1e-6, err_msg=f"{s}/{m}")
            if s != "val":  # a handful of validation queries may have no one-token mutant
                assert np.isfinite(want[m]).sum() > 0, (s, m)


@pytest.mark.slow
def test_tierblind_reference_is_the_expectation_of_random_order_inside_the_problem():
    problems, tiers, texts, _ = _random_case(5, n_problems=6, per=7)
    sets = problem_sets(problems, tiers, [code_tokens(t) for t in texts], problems, tiers,
                        [code_tokens(t) for t in texts], loo=True)
    ref = reference_metrics(sets, 5)["tierblind"]
    rng = np.random.default_rng(0)
    n_draws = 2000
    keys = np.array([f"{p}|{t}" for p, t in zip(problems, tiers)])
    acc = {m: np.zeros(len(problems)) for m in ("wp_auc", "wp_nn_tier", "wp_pair_sep", "knn5_pxt")}
    for _ in range(n_draws):
        # a tier-blind ranking: own problem first (score 1 + U), every other row below (U)
        scores = [np.where(problems == problems[i], 1.0, 0.0) + rng.random(len(problems))
                  for i in range(len(problems))]
        m = {k: v for k, v in
             within_problem_metrics_from_scores(scores, sets, problems).items()}
        for k in ("wp_auc", "wp_nn_tier", "wp_pair_sep"):
            acc[k] += m[k]
        for i in range(len(problems)):
            sc = scores[i].copy()
            sc[i] = -np.inf
            top = np.argsort(-sc)[:5]
            acc["knn5_pxt"][i] += np.mean(keys[top] == keys[i])
    for k, v in acc.items():
        np.testing.assert_allclose(v / n_draws, ref[k], atol=0.05, err_msg=k)


def within_problem_metrics_from_scores(scores, sets, problems):
    from contrastlab.finetune.tiers import _metrics_from_scores

    return _metrics_from_scores([scores[i][sets.cands[i]] for i in range(len(sets))], sets)


def test_oracle_reaches_the_ceiling_and_random_never_exceeds_it():
    problems, tiers, texts, emb = _random_case(3, n_problems=12, per=9)
    split = make_splits(problems, tiers, test_problem_fraction=0.3, test_fraction=0.3,
                        val_fraction=0.15, seed=0)
    sets = split_sets(problems, tiers, split, texts)
    cells = sorted(set(zip(problems, tiers)))
    oracle = torch.zeros(len(problems), len(cells))
    for i, c in enumerate(zip(problems, tiers)):
        oracle[i, cells.index(c)] = 1.0
    oracle += 1e-4 * torch.randn(oracle.shape, generator=torch.Generator().manual_seed(0))
    got, rnd = tier_items(oracle, sets), tier_items(emb, sets)
    pc = purity_ceiling(problems, tiers, split, 5)
    for s, (_, _, ps) in sets.items():
        ceil = reference_metrics(ps, 5)["ceiling"]
        np.testing.assert_allclose(ceil["knn5_pxt"], pc[s])
        for m in got[s]:
            ok = np.isfinite(ceil[m])
            np.testing.assert_array_equal(np.isfinite(got[s][m]), ok)
            np.testing.assert_allclose(got[s][m][ok], ceil[m][ok])
            assert (rnd[s][m][ok] <= ceil[m][ok] + 1e-12).all()
    assert any((reference_metrics(ps, 5)["ceiling"]["wp_nn_tier"] < 1).any()
               for _, _, ps in sets.values())  # queries without a same-tier row exist


def test_bad_input():
    from contrastlab.errors import InputError

    with pytest.raises(InputError):
        problem_sets(["P"], ["PASS"], [], ["P"], ["PASS"], [["a"]], loo=False)
    sets = problem_sets(["P"], ["PASS"], [["a"]], ["P"], ["PASS"], [["a"]], loo=False)
    with pytest.raises(InputError):
        within_problem_metrics(torch.ones(2, 2), torch.ones(1, 2), sets)
    assert list(itertools.chain(sets.cands)) and len(sets) == 1
