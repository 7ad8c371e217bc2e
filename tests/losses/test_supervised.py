"""SupCon, ALL, ANY, MulSupCon, Sim-Dis against per-anchor references, outside implementations,
reductions between them, gradients and numerical edge cases."""

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from contrastlab.losses import get_loss
from contrastlab.losses.multilabel import all_loss, any_loss, mulsupcon_loss
from contrastlab.losses.simdis import simdis_loss
from contrastlab.losses.supcon import supcon_loss

from . import _refs as R

ML = ["all", "any", "mulsupcon", "simdis", "sim_only", "dis_only"]


def _feats(n, v, d=5, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return F.normalize(torch.randn(n, v, d, generator=g, dtype=dtype), dim=-1)


@st.composite
def batches(draw, multilabel=True):
    n = draw(st.integers(2, 7))
    v = draw(st.sampled_from([1, 2]))
    c = draw(st.integers(1, 4))
    seed = draw(st.integers(0, 10_000))
    g = torch.Generator().manual_seed(seed)
    if multilabel:
        labels = (torch.rand(n, c, generator=g) < draw(st.sampled_from([0.3, 0.6]))).long()
    else:
        labels = torch.randint(0, c, (n,), generator=g)
    tau = draw(st.sampled_from([0.05, 0.1, 0.5]))
    return _feats(n, v, seed=seed), labels, tau


# ---------------------------------------------------------------- against the equations
@settings(max_examples=20, deadline=None)
@given(batches(multilabel=False), st.sampled_from(["all", "one"]))
def test_supcon_matches_reference(b, mode):
    f, y, tau = b
    ref = R.setwise(f, y, lambda a, p: a == p, tau, scale=tau / 0.07, contrast_mode=mode)
    got = supcon_loss(f, y, temperature=tau, base_temperature=0.07, contrast_mode=mode)
    assert torch.allclose(got, ref, atol=1e-10)


@settings(max_examples=20, deadline=None)
@given(batches())
def test_all_any_match_reference(b):
    f, y, tau = b
    S = lambda t: R.sets(t)  # noqa: E731
    ref_all = R.setwise(f, y, lambda a, p: bool(S(a)) and S(a) == S(p), tau)
    ref_any = R.setwise(f, y, lambda a, p: bool(S(a) & S(p)), tau)
    assert torch.allclose(all_loss(f, y, temperature=tau), ref_all, atol=1e-10)
    assert torch.allclose(any_loss(f, y, temperature=tau), ref_any, atol=1e-10)


@settings(max_examples=20, deadline=None)
@given(batches(), st.sampled_from(["pairs", "anchors"]))
def test_mulsupcon_matches_reference(b, red):
    f, y, tau = b
    got = mulsupcon_loss(f, y, temperature=tau, reduction=red)
    assert torch.allclose(got, R.mulsupcon(f, y, tau, red), atol=1e-10)


@settings(max_examples=25, deadline=None)
@given(batches(), st.sampled_from(["full", "sim_only", "dis_only"]), st.sampled_from(["inverse", "exp"]))
def test_simdis_matches_eq13(b, mode, dis):
    f, y, tau = b

    def k(a, p):
        ks, kd = R.ks_kd(R.sets(a), R.sets(p), dis, 0.7)
        return {"full": ks * kd, "sim_only": ks, "dis_only": kd}[mode]

    ref = R.setwise(f, y, lambda a, p: bool(R.sets(a) & R.sets(p)), tau, weight=k)
    got = simdis_loss(f, y, temperature=tau, mode=mode, dissimilarity=dis, alpha=0.7)
    assert torch.allclose(got, ref, atol=1e-10)


def test_simdis_log_prob_weighting_variant():
    f = _feats(6, 1)
    y = torch.tensor([[1, 1, 0], [1, 0, 0], [0, 1, 1], [1, 1, 1], [0, 0, 1], [1, 1, 0]])
    z = f[:, 0]
    per = []
    for i in range(6):
        P = [p for p in range(6) if p != i and R.sets(y[i]) & R.sets(y[p])]
        lse = torch.logsumexp(torch.stack([z[i] @ z[a] / 0.1 for a in range(6) if a != i]), 0)
        per.append(-sum(math.prod(R.ks_kd(R.sets(y[i]), R.sets(y[p]))) * (z[i] @ z[p] / 0.1 - lse) for p in P) / len(P))
    got = simdis_loss(f, y, temperature=0.1, weighting="log_prob")
    assert torch.allclose(got, torch.stack(per).mean())


def test_hand_made_label_sets():
    # anchor 0 = {0,1}; 1 = {0,1} (R2); 2 = {0} (R4); 3 = {0,1,2} (R5); 4 = {2} (R1); 5 = {} (never an anchor)
    y = torch.tensor([[1, 1, 0], [1, 1, 0], [1, 0, 0], [1, 1, 1], [0, 0, 1], [0, 0, 0]])
    f = _feats(6, 1, seed=3)
    z = f[:, 0]
    lse0 = torch.logsumexp(torch.stack([z[0] @ z[a] / 0.1 for a in range(1, 6)]), 0)
    s = lambda p: z[0] @ z[p] / 0.1 - lse0  # noqa: E731
    per_all = all_loss(f, y, temperature=0.1, reduction="none")
    per_any = any_loss(f, y, temperature=0.1, reduction="none")
    per_mul = mulsupcon_loss(f, y, temperature=0.1, reduction="none")
    per_sd = simdis_loss(f, y, temperature=0.1, reduction="none")
    assert torch.allclose(per_all[0], -s(1))
    assert torch.allclose(per_any[0], -(s(1) + s(2) + s(3)) / 3)
    # label 0: P = {1, 2, 3}; label 1: P = {1, 3}
    assert torch.allclose(per_mul[0], -(s(1) + s(2) + s(3)) / 3 - (s(1) + s(3)) / 2)
    k = [1.0, 0.5, 1.0 / 2]  # R2: 1; R4: Ks=1/2, Kd=1; R5: Ks=1, Kd=1/2
    assert torch.allclose(per_sd[0], -sum(math.log(kk) + s(p) for kk, p in zip(k, (1, 2, 3))) / 3)
    assert per_all[5] == 0 and per_any[5] == 0 and per_mul[5] == 0 and per_sd[5] == 0
    _, st_ = all_loss(f, y, temperature=0.1, return_stats=True)
    # ALL: anchors 2, 3, 4 have unique sets, 5 is empty -> 4 excluded
    assert int(st_.n_anchors) == 2 and int(st_.n_excluded) == 4
    _, st_ = mulsupcon_loss(f, y, temperature=0.1, return_stats=True)
    assert int(st_.n_terms) == 2 + 2 + 1 + 3 + 1  # (anchor, label) pairs with a positive; 5 has none


# ---------------------------------------------------------------- outside implementations
def test_supcon_vs_supcontrast_reference_algorithm():
    g = torch.Generator().manual_seed(0)
    f = F.normalize(torch.randn(32, 2, 16, generator=g, dtype=torch.float64), dim=-1)
    y = torch.randint(0, 5, (32,), generator=g)
    for mode in ("all", "one"):
        ref = R.supcontrast_reference(f, y, 0.1, 0.07, mode)
        got = supcon_loss(f, y, temperature=0.1, base_temperature=0.07, contrast_mode=mode)
        assert torch.allclose(got, ref, atol=1e-10)
    # labels=None: SimCLR positives (other view), as the reference with unique labels
    assert torch.allclose(supcon_loss(f, temperature=0.2), R.supcontrast_reference(f, torch.arange(32), 0.2, 0.07))


def test_supcon_vs_pytorch_metric_learning():
    pml = pytest.importorskip("pytorch_metric_learning.losses")
    g = torch.Generator().manual_seed(1)
    f = F.normalize(torch.randn(40, 16, generator=g), dim=-1)
    y = torch.randint(0, 6, (40,), generator=g)
    y[0] = 99  # an anchor without positive: both leave it out of the mean
    got = supcon_loss(f, y, temperature=0.1, base_temperature=None)
    assert torch.allclose(got, pml.SupConLoss(temperature=0.1)(f, y), atol=1e-5)
    # NT-Xent: paired views (one positive per anchor) = SupCon with labels=None, n_views=2
    v = F.normalize(torch.randn(20, 2, 16, generator=g), dim=-1)
    emb = v.reshape(40, 16)  # sample-major rows
    lab = torch.arange(20).repeat_interleave(2)
    assert torch.allclose(supcon_loss(v, temperature=0.2, base_temperature=None),
                          pml.NTXentLoss(temperature=0.2)(emb, lab), atol=1e-5)


# ---------------------------------------------------------------- reductions between losses
@settings(max_examples=15, deadline=None)
@given(batches(multilabel=False))
def test_single_label_reductions(b):
    f, y, tau = b
    onehot = F.one_hot(y, int(y.max()) + 1)
    ref = supcon_loss(f, y, temperature=tau, base_temperature=None)
    for name in ML:
        assert torch.allclose(get_loss(name)(f, onehot, temperature=tau), ref, atol=1e-10), name
    assert torch.allclose(mulsupcon_loss(f, onehot, temperature=tau, reduction="anchors"), ref, atol=1e-10)
    assert torch.allclose(supcon_loss(f, y, temperature=tau, base_temperature=tau), ref)


def test_simdis_gradient_equals_any_under_eq13():
    f = _feats(8, 2).requires_grad_(True)
    y = (torch.rand(8, 4, generator=torch.Generator().manual_seed(2)) < 0.5).long()
    g1 = torch.autograd.grad(simdis_loss(f, y, temperature=0.1), f)[0]
    g2 = torch.autograd.grad(any_loss(f, y, temperature=0.1), f)[0]
    assert torch.allclose(g1, g2)
    g3 = torch.autograd.grad(simdis_loss(f, y, temperature=0.1, weighting="log_prob"), f)[0]
    assert not torch.allclose(g1, g3)


# ---------------------------------------------------------------- local anchors vs gathered rows
@pytest.mark.parametrize("name", ["supcon", "mulsupcon", "simdis", "all"])
def test_split_anchors_sum_to_full(name):
    f = _feats(9, 2, seed=5)
    y = torch.randint(0, 3, (9,), generator=torch.Generator().manual_seed(5))
    lab = y if name == "supcon" else (torch.rand(9, 3, generator=torch.Generator().manual_seed(6)) < 0.5).long()
    fn = get_loss(name)
    full = fn(f, lab, reduction="sum")
    parts = [fn(f[a:b], lab[a:b], contrast_features=f, contrast_labels=lab, anchor_offset=a, reduction="sum")
             for a, b in ((0, 4), (4, 9))]
    assert torch.allclose(parts[0] + parts[1], full)


# ---------------------------------------------------------------- gradients and edge cases
@pytest.mark.parametrize("name", ["supcon"] + ML)
def test_gradcheck_float64(name):
    f = _feats(5, 2, d=3, seed=7).requires_grad_(True)
    y = torch.tensor([0, 1, 0, 2, 1]) if name == "supcon" else torch.tensor([[1, 0, 1], [1, 1, 0], [0, 1, 0], [1, 0, 0], [0, 1, 1]])
    fn = get_loss(name)
    assert torch.autograd.gradcheck(lambda x: fn(x, y, temperature=0.3), (f,))
    c = _feats(8, 2, d=3, seed=8).requires_grad_(True)
    yc = torch.cat([y[:2], y, y[:1]])
    assert torch.autograd.gradcheck(
        lambda a, b: fn(a, y, temperature=0.3, contrast_features=b, contrast_labels=yc, anchor_offset=2), (f, c)
    )


@pytest.mark.parametrize("name", ["supcon"] + ML)
def test_extreme_temperature_and_norm(name):
    g = torch.Generator().manual_seed(4)
    f = (100 * F.normalize(torch.randn(16, 2, 8, generator=g), dim=-1)).requires_grad_(True)
    y = torch.randint(0, 3, (16,), generator=g)
    lab = y if name == "supcon" else F.one_hot(y, 4) | (torch.rand(16, 4, generator=g) < 0.3).long()
    loss = get_loss(name)(f, lab, temperature=0.01)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(f.grad).all()
    big = get_loss(name)(f.detach().double(), lab, temperature=100.0)
    assert torch.isfinite(big)


@pytest.mark.parametrize("name", ["supcon"] + ML)
def test_no_positive_returns_zero_with_grad(name):
    f = _feats(5, 1, seed=9).float().requires_grad_(True)
    lab = torch.arange(5) if name == "supcon" else torch.eye(5, dtype=torch.long)
    loss, stats = get_loss(name)(f, lab, return_stats=True)
    assert loss.item() == 0.0 and loss.requires_grad
    loss.backward()
    assert torch.equal(f.grad, torch.zeros_like(f))
    assert int(stats.n_excluded) == 5
    # empty label sets everywhere
    if name != "supcon":
        z = get_loss(name)(f, torch.zeros(5, 3))
        assert z.item() == 0.0 and z.requires_grad


def test_wrong_shapes_raise_clear_errors():
    f = _feats(4, 1)
    with pytest.raises(ValueError, match=r"labels must be \[N=4\]"):
        supcon_loss(f, torch.zeros(4, 3))
    with pytest.raises(ValueError, match="labels must be"):
        supcon_loss(f, torch.zeros(3, dtype=torch.long))
    for name in ML:
        with pytest.raises(ValueError, match=r"multi-hot \[N=4, C\]"):
            get_loss(name)(f, torch.zeros(4, dtype=torch.long))
        with pytest.raises(ValueError, match=r"multi-hot"):
            get_loss(name)(f, torch.zeros(5, 2))
    with pytest.raises(ValueError, match="mask must be"):
        supcon_loss(f, mask=torch.ones(4, 3))
    with pytest.raises(ValueError, match="features must be"):
        supcon_loss(torch.zeros(2, 2, 2, 2), torch.zeros(2, dtype=torch.long))
    with pytest.raises(ValueError, match="temperature"):
        supcon_loss(f, torch.zeros(4, dtype=torch.long), temperature=0)
    with pytest.raises(ValueError, match="reduction"):
        mulsupcon_loss(f, torch.ones(4, 2), reduction="mean_of_means")
    with pytest.raises(ValueError, match="mode"):
        simdis_loss(f, torch.ones(4, 2), mode="both")


def test_explicit_mask_equals_labels():
    f = _feats(6, 2, seed=11)
    y = torch.tensor([0, 1, 0, 1, 2, 2])
    mask = (y[:, None] == y[None]).float()
    assert torch.allclose(supcon_loss(f, mask=mask), supcon_loss(f, y))


@pytest.mark.parametrize("name", ["any", "simdis", "sim_only"])
def test_blocked_uncached_weights_match(name, monkeypatch):
    """Small blocks without the weight cache (the large-batch path) give the same loss and grads."""
    from contrastlab.losses import _common, multilabel

    f = _feats(12, 2, seed=12)
    y = (torch.rand(12, 4, generator=torch.Generator().manual_seed(3)) < 0.4).long()
    kw = {"weighting": "log_prob"} if name == "sim_only" else {}
    a = f.clone().requires_grad_(True)
    ref = get_loss(name)(a, y, temperature=0.2, **kw)
    ref.backward()
    monkeypatch.setattr(_common, "BLOCK_ELEMENTS", 50)
    monkeypatch.setattr(multilabel, "CACHE_ELEMENTS", 0)
    b = f.clone().requires_grad_(True)
    got = get_loss(name)(b, y, temperature=0.2, **kw)
    got.backward()
    assert torch.allclose(got, ref) and torch.allclose(a.grad, b.grad)


def test_all_with_many_label_columns_uses_row_ids():
    f = _feats(8, 1, seed=13)
    y = (torch.rand(8, 3, generator=torch.Generator().manual_seed(4)) < 0.5).long()
    wide = torch.zeros(8, 70, dtype=torch.long)
    wide[:, [0, 33, 69]] = y
    assert torch.allclose(all_loss(f, wide), all_loss(f, y))


@pytest.fixture(params=["fused", "dense"])
def kernel(request, monkeypatch):
    """Run a test on both implementations of the weighted log-softmax: the fused autograd
    Function (large batches) and the dense small-batch Function (``DenseWeightedLogSoftmax``)."""
    from contrastlab.losses import _common

    monkeypatch.setattr(_common, "FUSED_MIN_ELEMENTS", 0 if request.param == "fused" else 1 << 62)
    return request.param


@pytest.mark.parametrize("name", ["supcon", "supcon_mask", "simdis_log_prob"] + ML)
def test_second_derivatives_float64(name, kernel):
    """Hessian-vector products are exact (gradgradcheck), for local and gathered contrast rows."""
    f = _feats(4, 2, d=3, seed=7).requires_grad_(True)
    y = torch.tensor([0, 1, 0, 1])
    if name == "supcon_mask":
        mask = (y[:, None] == y[None]).double()
        fn = lambda x: supcon_loss(x, mask=mask, temperature=0.3)  # noqa: E731
    else:
        lab = y if name == "supcon" else torch.tensor([[1, 0, 1], [1, 1, 0], [0, 1, 0], [1, 0, 0]])
        kw = {"weighting": "log_prob"} if name == "simdis_log_prob" else {}
        loss = get_loss("simdis" if name == "simdis_log_prob" else name)
        fn = lambda x: loss(x, lab, temperature=0.3, **kw)  # noqa: E731
        c = _feats(6, 2, d=3, seed=8).requires_grad_(True)
        yc = torch.cat([lab[:1], lab, lab[:1]])
        assert torch.autograd.gradgradcheck(
            lambda a, b: loss(a, lab, temperature=0.3, contrast_features=b, contrast_labels=yc, anchor_offset=1, **kw),
            (f, c))
    assert torch.autograd.gradgradcheck(fn, (f,))
    # a Hessian-vector product through the loss agrees with finite differences of the gradient
    v = torch.randn(f.shape, generator=torch.Generator().manual_seed(0), dtype=f.dtype)
    (g,) = torch.autograd.grad(fn(f), f, create_graph=True)
    (hv,) = torch.autograd.grad((g * v).sum(), f)
    eps = 1e-6
    xp = (f.detach() + eps * v).requires_grad_(True)
    xm = (f.detach() - eps * v).requires_grad_(True)
    fd = (torch.autograd.grad(fn(xp), xp)[0] - torch.autograd.grad(fn(xm), xm)[0]) / (2 * eps)
    assert torch.allclose(hv, fd, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("name", ["supcon", "supcon_mask", "simdis_log_prob"] + ML)
@pytest.mark.parametrize("views,mode,gathered", [(1, "all", False), (2, "all", False), (2, "one", False), (2, "all", True)])
def test_fused_kernel_equals_plain_path(name, views, mode, gathered, monkeypatch):
    """The fused autograd Function (large batches) and the dense small-batch path (the one the
    per-anchor reference tests above exercise) give the same values and gradients."""
    from contrastlab.losses import _common

    g = torch.Generator().manual_seed(21)
    n, c = 10, 4
    f = _feats(n, views, d=6, seed=21)
    y = torch.randint(0, 3, (n,), generator=g)
    multi = (torch.rand(n, c, generator=g) < 0.4).long()
    kw = {"temperature": 0.2}
    if name == "supcon_mask":
        fn, lab, kw["mask"] = supcon_loss, None, (y[:, None] == y[None]).double()
    else:
        fn = get_loss("simdis" if name == "simdis_log_prob" else name)
        lab = y if name == "supcon" else multi
        if name == "simdis_log_prob":
            kw["weighting"] = "log_prob"
    kw["contrast_mode"] = mode
    extra = {}
    if gathered and name != "supcon_mask":
        cf = _feats(n + 3, views, d=6, seed=22)
        cf[2:2 + n] = f
        extra = {"contrast_features": cf, "contrast_labels": torch.cat([lab[:2], lab, lab[:1]]), "anchor_offset": 2}
    out = {}
    for k, thr in (("fused", 0), ("plain", 1 << 62)):
        monkeypatch.setattr(_common, "FUSED_MIN_ELEMENTS", thr)
        x = f.clone().requires_grad_(True)
        loss = fn(x, lab, **kw, **extra) if lab is not None else fn(x, **kw)
        loss.backward()
        out[k] = (loss.detach(), x.grad)
    assert torch.allclose(out["fused"][0], out["plain"][0], atol=1e-12, rtol=1e-12)
    assert torch.allclose(out["fused"][1], out["plain"][1], atol=1e-12, rtol=1e-10)
