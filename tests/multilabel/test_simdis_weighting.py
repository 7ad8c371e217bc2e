"""Sim-Dis second weighting reading (normalised by sum_p K_ip) against a per-anchor loop."""

import math

import torch

from contrastlab.losses.simdis import simdis_loss


def _ref(z: torch.Tensor, y: torch.Tensor, t: float, norm: str) -> float:
    """Plain per-anchor loop: K^s = |S∩T|/|S|, K^d = 1/(1+|T\\S|) (Huang et al., Eq. 14-15);
    L_i = -1/N_i sum_{p in P(i)} K_ip log(exp(s_ip)/sum_{a != i} exp(s_ia)), N_i = |P(i)| or sum_p K_ip."""
    n = len(z)
    total, count = 0.0, 0
    for i in range(n):
        s = set(torch.nonzero(y[i]).flatten().tolist())
        if not s:
            continue
        den = sum(math.exp(float(z[i] @ z[a]) / t) for a in range(n) if a != i)
        terms, ks = [], []
        for p in range(n):
            if p == i:
                continue
            tset = set(torch.nonzero(y[p]).flatten().tolist())
            inter = len(s & tset)
            if inter == 0:
                continue
            k = (inter / len(s)) * (1.0 / (1 + len(tset - s)))
            lp = float(z[i] @ z[p]) / t - math.log(den)
            terms.append(k * lp)
            ks.append(k)
        if not terms:
            continue
        norm_i = len(terms) if norm == "count" else sum(ks)
        total += -sum(terms) / norm_i
        count += 1
    return total / count


def test_log_prob_sum_matches_per_anchor_reference():
    g = torch.Generator().manual_seed(3)
    z = torch.nn.functional.normalize(torch.randn(9, 5, generator=g), dim=1).double()
    y = (torch.rand(9, 4, generator=g) > 0.55).double()
    y[0] = 0  # an empty label set: never an anchor, still a negative
    got_sum = float(simdis_loss(z, y, temperature=0.5, weighting="log_prob_sum"))
    got_cnt = float(simdis_loss(z, y, temperature=0.5, weighting="log_prob"))
    assert abs(got_sum - _ref(z, y, 0.5, "sum")) < 1e-9
    assert abs(got_cnt - _ref(z, y, 0.5, "count")) < 1e-9
    assert abs(got_sum - got_cnt) > 1e-3  # the two readings differ on overlapping label sets


def test_log_prob_sum_with_queue_rows_as_contrast():
    """Queue rows (contrast_features beyond the batch) enter the sums but are never anchors."""
    g = torch.Generator().manual_seed(4)
    z = torch.nn.functional.normalize(torch.randn(7, 4, generator=g), dim=1).double()
    y = (torch.rand(7, 3, generator=g) > 0.5).double()
    y[:, 0] = 1
    full = _ref_anchor_subset(z, y, 0.3, anchors=range(4))
    got = float(simdis_loss(z[:4], y[:4], temperature=0.3, weighting="log_prob_sum",
                            contrast_features=z, contrast_labels=y))
    assert abs(got - full) < 1e-9


def _ref_anchor_subset(z, y, t, anchors) -> float:
    vals = []
    n = len(z)
    for i in anchors:
        s = set(torch.nonzero(y[i]).flatten().tolist())
        den = sum(math.exp(float(z[i] @ z[a]) / t) for a in range(n) if a != i)
        terms, ks = [], []
        for p in range(n):
            tset = set(torch.nonzero(y[p]).flatten().tolist())
            if p == i or not (s & tset):
                continue
            k = len(s & tset) / len(s) / (1 + len(tset - s))
            terms.append(k * (float(z[i] @ z[p]) / t - math.log(den)))
            ks.append(k)
        vals.append(-sum(terms) / sum(ks))
    return sum(vals) / len(vals)
