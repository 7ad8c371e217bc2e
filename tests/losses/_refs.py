"""Plain per-anchor reference implementations written from the equations (loops on purpose)."""

import math

import torch


def rows(features, labels, contrast_mode="all"):
    """Flatten ``[N, V, D]`` sample-major; returns anchor indices, all rows, row labels."""
    if features.dim() == 2:
        features = features.unsqueeze(1)
    n, v, d = features.shape
    z = features.reshape(n * v, d)
    lab = [labels[i] for i in range(n) for _ in range(v)]
    anchors = list(range(n * v)) if contrast_mode == "all" else [i * v for i in range(n)]
    return z, lab, anchors


def _lse(z, i, tau):
    return torch.logsumexp(torch.stack([z[i] @ z[a] / tau for a in range(len(z)) if a != i]), 0)


def setwise(features, labels, is_pos, tau, scale=1.0, contrast_mode="all", weight=None, reduction="mean"):
    """Eq. 3 (and Eq. 13 when ``weight`` gives K_ip): mean over anchors that have positives."""
    z, lab, anchors = rows(features, labels, contrast_mode)
    out = []
    for i in anchors:
        P = [p for p in range(len(z)) if p != i and is_pos(lab[i], lab[p])]
        if not P:
            continue
        lse = _lse(z, i, tau)
        terms = []
        for p in P:
            k = 1.0 if weight is None else weight(lab[i], lab[p])
            terms.append(math.log(k) + z[i] @ z[p] / tau - lse)
        out.append(-scale * torch.stack(terms).sum() / len(P))
    if not out:
        return torch.zeros((), dtype=features.dtype)
    out = torch.stack(out)
    return out.mean() if reduction == "mean" else out.sum()


def sets(y):
    return {int(c) for c in torch.nonzero(torch.as_tensor(y)).flatten()}


def mulsupcon(features, labels, tau, reduction="pairs"):
    """Eq. 5-7 with one positive set per (anchor, label); empty sets skipped."""
    z, lab, anchors = rows(features, labels)
    per_anchor, n_pairs = [], 0
    for i in anchors:
        lse = _lse(z, i, tau)
        terms = []
        for l in sets(lab[i]):
            P = [p for p in range(len(z)) if p != i and l in sets(lab[p])]
            if not P:
                continue
            n_pairs += 1
            terms.append(-sum(z[i] @ z[p] / tau - lse for p in P) / len(P))
        if terms:
            per_anchor.append(torch.stack(terms).sum())
    if not per_anchor:
        return torch.zeros((), dtype=features.dtype)
    tot = torch.stack(per_anchor).sum()
    return tot / n_pairs if reduction == "pairs" else tot / len(per_anchor)


def ks_kd(S, T, dissimilarity="inverse", alpha=1.0):
    ks = len(S & T) / len(S)
    x = len(T - S)
    kd = 1.0 / (1.0 + x) if dissimilarity == "inverse" else math.exp(-alpha * x)
    return ks, kd


def supcontrast_reference(features, labels, temperature, base_temperature, contrast_mode="all"):
    """The SupContrast reference algorithm (Khosla et al. 2020, github.com/HobbitLong/SupContrast), rewritten here."""
    bsz, n_views = features.shape[:2]
    labels = labels.contiguous().view(-1, 1)
    mask = torch.eq(labels, labels.T).to(features.dtype)
    contrast_feature = torch.cat(torch.unbind(features, dim=1), dim=0)
    if contrast_mode == "one":
        anchor_feature, anchor_count = features[:, 0], 1
    else:
        anchor_feature, anchor_count = contrast_feature, n_views
    adc = anchor_feature @ contrast_feature.T / temperature
    logits = adc - adc.max(dim=1, keepdim=True)[0].detach()
    mask = mask.repeat(anchor_count, n_views)
    logits_mask = torch.scatter(torch.ones_like(mask), 1, torch.arange(bsz * anchor_count).view(-1, 1), 0)
    mask = mask * logits_mask
    exp_logits = torch.exp(logits) * logits_mask
    log_prob = logits - torch.log(exp_logits.sum(1, keepdim=True))
    mean_log_prob_pos = (mask * log_prob).sum(1) / mask.sum(1)
    loss = -(temperature / base_temperature) * mean_log_prob_pos
    return loss.view(anchor_count, bsz).mean()
