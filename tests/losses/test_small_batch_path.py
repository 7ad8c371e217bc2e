"""The small-batch dense path (``_common.DenseWeightedLogSoftmax`` with dense weights) and the
large-batch path (fused ``WeightedLogSoftmax`` with label bookkeeping) against the per-anchor
references, values and gradients in float64, and the switch between them at
``_common.FUSED_MIN_ELEMENTS``."""

import math

import pytest
import torch
import torch.nn.functional as F

from contrastlab.losses import _common, get_loss
from contrastlab.losses.supcon import supcon_loss

from . import _refs as R

ALL_LOSSES = ["supcon", "all", "any", "mulsupcon", "simdis", "sim_only", "dis_only"]


@pytest.fixture(params=["dense", "large"])
def path(request, monkeypatch):
    """Force the small-batch dense path (threshold above every test size) or the large-batch
    path (threshold 0) whatever the batch size."""
    monkeypatch.setattr(_common, "FUSED_MIN_ELEMENTS", 1 << 62 if request.param == "dense" else 0)
    return request.param


def _feats(n, v, d=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    return F.normalize(torch.randn(n, v, d, generator=g, dtype=torch.float64), dim=-1)


def _reference(name, f, lab, tau):
    """The per-anchor loop reference of ``name`` (tests/losses/_refs.py), differentiable."""
    S = R.sets
    if name == "supcon":
        return R.setwise(f, lab, lambda a, p: a == p, tau)
    if name == "all":
        return R.setwise(f, lab, lambda a, p: bool(S(a)) and S(a) == S(p), tau)
    if name == "any":
        return R.setwise(f, lab, lambda a, p: bool(S(a) & S(p)), tau)
    if name == "mulsupcon":
        return R.mulsupcon(f, lab, tau)
    mode = {"simdis": "full", "sim_only": "sim_only", "dis_only": "dis_only"}[name]

    def k(a, p):
        ks, kd = R.ks_kd(S(a), S(p))
        return {"full": ks * kd, "sim_only": ks, "dis_only": kd}[mode]

    return R.setwise(f, lab, lambda a, p: bool(S(a) & S(p)), tau, weight=k)


def _ours(name, f, lab, tau):
    kw = {"base_temperature": tau} if name == "supcon" else {}  # no rescaling, as the references
    return get_loss(name)(f, lab, temperature=tau, **kw)


def _check_value_and_grad(name, f, lab, tau):
    a = f.clone().requires_grad_(True)
    b = f.clone().requires_grad_(True)
    got, ref = _ours(name, a, lab, tau), _reference(name, b, lab, tau)
    assert torch.allclose(got, ref, atol=1e-10, rtol=1e-10), (name, got, ref)
    (ga,) = torch.autograd.grad(got, a, allow_unused=True)
    if ref.requires_grad:
        (gb,) = torch.autograd.grad(ref, b)
    else:  # no positive anywhere: the reference is a constant 0
        gb = torch.zeros_like(b)
    assert torch.allclose(ga, gb, atol=1e-10, rtol=1e-8), name


@pytest.mark.parametrize("name", ALL_LOSSES)
@pytest.mark.parametrize("seed,n,v,c", [(0, 7, 1, 3), (1, 6, 2, 4), (2, 9, 1, 2), (3, 5, 2, 3)])
def test_random_batches_match_reference(name, seed, n, v, c, path):
    g = torch.Generator().manual_seed(100 + seed)
    f = _feats(n, v, seed=seed)
    if name == "supcon":
        lab = torch.randint(0, c, (n,), generator=g)
    else:
        lab = (torch.rand(n, c, generator=g) < 0.5).long()
    _check_value_and_grad(name, f, lab, tau=0.2)


@pytest.mark.parametrize("name", ALL_LOSSES)
def test_hand_made_batch_with_excluded_anchors(name, path):
    # label sets: {0,1} {0,1} {0} {0,1,2} {2} {} {3}: anchor 4 has no ALL positive, 5 is empty,
    # 6 ({3}) shares nothing with anyone (no positive in any loss)
    multi = torch.tensor([[1, 1, 0, 0], [1, 1, 0, 0], [1, 0, 0, 0], [1, 1, 1, 0], [0, 0, 1, 0], [0, 0, 0, 0],
                          [0, 0, 0, 1]])
    single = torch.tensor([0, 0, 1, 0, 2, 1, 3])  # 2 and 5 share class 1; 4 and 6 are alone
    f = _feats(7, 1, d=4, seed=3)
    lab = single if name == "supcon" else multi
    _check_value_and_grad(name, f, lab, tau=0.1)
    per = get_loss(name)(f, lab, temperature=0.1, reduction="none")
    assert per[6] == 0 and (name == "supcon" or per[5] == 0)


@pytest.mark.parametrize("name", ALL_LOSSES)
def test_no_positive_at_all_is_zero_with_zero_grad(name, path):
    f = _feats(5, 1, seed=9).requires_grad_(True)
    lab = torch.arange(5) if name == "supcon" else torch.eye(5, dtype=torch.long)
    loss = get_loss(name)(f, lab, temperature=0.1)
    assert loss.item() == 0.0 and loss.requires_grad
    (g,) = torch.autograd.grad(loss, f)
    assert torch.equal(g, torch.zeros_like(g))


def test_supcon_mask_and_gathered_rows_match_reference(path):
    f = _feats(6, 2, seed=11)
    y = torch.tensor([0, 1, 0, 1, 2, 3])
    mask = (y[:, None] == y[None]).double()
    ref = R.setwise(f, y, lambda a, p: a == p, 0.2)
    assert torch.allclose(supcon_loss(f, mask=mask, temperature=0.2, base_temperature=0.2), ref, atol=1e-12)
    # local anchors 2..3 against all rows: the sum equals the reference's anchors 2..3
    per = supcon_loss(f[2:4], y[2:4], temperature=0.2, base_temperature=0.2, contrast_features=f,
                      contrast_labels=y, anchor_offset=2, reduction="none")
    full = supcon_loss(f, y, temperature=0.2, base_temperature=0.2, reduction="none")
    assert torch.allclose(per, full[4:8], atol=1e-12)


# ---------------------------------------------------------------- the switch at the threshold
def _spy(monkeypatch):
    calls = {"dense": 0, "fused": 0}
    for key, cls in (("dense", _common.DenseWeightedLogSoftmax), ("fused", _common.WeightedLogSoftmax)):
        orig = cls.apply

        def spy(*args, _orig=orig, _key=key):
            calls[_key] += 1
            return _orig(*args)

        monkeypatch.setattr(cls, "apply", staticmethod(spy))
    return calls


@pytest.mark.parametrize("name", ALL_LOSSES + ["supcon_mask"])
def test_path_switches_at_threshold(name, monkeypatch):
    """``n * M < FUSED_MIN_ELEMENTS`` takes the dense Function, ``n * M >= FUSED_MIN_ELEMENTS``
    the fused one (12 rows: n * M = 144), with the same loss either side."""
    f = _feats(12, 1, seed=5)
    g = torch.Generator().manual_seed(5)
    y = torch.randint(0, 3, (12,), generator=g)
    multi = (torch.rand(12, 3, generator=g) < 0.5).long()
    if name == "supcon_mask":
        def fn(x):
            return supcon_loss(x, mask=(y[:, None] == y[None]).double(), temperature=0.2)
    else:
        def fn(x):
            return get_loss(name)(x, y if name == "supcon" else multi, temperature=0.2)
    calls = _spy(monkeypatch)
    out = {}
    for thr, want in ((145, "dense"), (144, "fused")):
        monkeypatch.setattr(_common, "FUSED_MIN_ELEMENTS", thr)
        before = dict(calls)
        out[want] = fn(f)
        assert calls[want] == before[want] + 1, (thr, calls)
        other = "fused" if want == "dense" else "dense"
        assert calls[other] == before[other], (thr, calls)
    assert torch.allclose(out["dense"], out["fused"], atol=1e-12, rtol=1e-12)


def test_default_threshold_covers_the_small_track_batches():
    """The tracks' smallest batches (64, 256 rows) take the dense path, 1024 rows the fused one."""
    assert _common.use_dense(64, 64) and _common.use_dense(256, 256)
    assert not _common.use_dense(1024, 1024)
    assert not _common.use_dense(5, 1)  # a single contrast row: empty log-sum-exp, general path


# ---------------------------------------------------------------- the dense Function itself
def _dense_case(shared: bool, with_w: bool):
    g = torch.Generator().manual_seed(7)
    a = torch.randn(4, 3, generator=g, dtype=torch.float64).requires_grad_(True)
    c = a if shared else torch.randn(6, 3, generator=g, dtype=torch.float64).requires_grad_(True)
    m = c.shape[0]
    idx = torch.arange(4) if shared else torch.tensor([1, 2, 3, 4])
    w = None
    if with_w:
        w = torch.rand(4, m, generator=g, dtype=torch.float64).scatter_(1, idx.view(-1, 1), 0.0)
    coef = torch.rand(4, generator=g, dtype=torch.float64) + 0.5
    return a, c, idx, w, coef


@pytest.mark.parametrize("shared", [True, False])
@pytest.mark.parametrize("with_w", [True, False])
def test_dense_function_grad_and_gradgrad_float64(shared, with_w):
    a, c, idx, w, coef = _dense_case(shared, with_w)

    def fn(*xs):
        aa, cc = (xs[0], xs[0]) if shared else xs
        return _common.dense_weighted_log_softmax(aa, cc, coef, idx, 0.3, w)

    inputs = (a,) if shared else (a, c)
    assert torch.autograd.gradcheck(fn, inputs)
    assert torch.autograd.gradgradcheck(fn, inputs)
    # equals the plain differentiable formula it falls back on under create_graph=True
    plain = _common.weighted_log_softmax_plain(a, c, coef, idx, 1 / 0.3, None if w is None else (lambda lo, hi: w))
    assert torch.allclose(fn(*inputs), plain, atol=1e-12)


def test_dense_function_second_backward_through_retained_graph():
    a, c, idx, w, coef = _dense_case(False, True)
    out = _common.dense_weighted_log_softmax(a, c, coef, idx, 0.3, w).sum()
    g1 = torch.autograd.grad(out, (a, c), retain_graph=True)
    g2 = torch.autograd.grad(out, (a, c))  # the softmax buffer was consumed: recomputed
    assert all(torch.allclose(x, y, atol=1e-12) for x, y in zip(g1, g2))


def test_dense_function_extreme_logits_stay_finite():
    g = torch.Generator().manual_seed(4)
    f = (100 * F.normalize(torch.randn(16, 8, generator=g), dim=-1)).requires_grad_(True)
    y = torch.randint(0, 3, (16,), generator=g)
    loss = supcon_loss(f, y, temperature=0.01)
    loss.backward()
    assert math.isfinite(loss.item()) and torch.isfinite(f.grad).all()


def test_equal_mask_float_trick_matches_comparison():
    """The float ``1 - min(|a - c|, 1)`` mask equals ``a == c`` (negative ids, ids at the
    float32 exactness bound), and ids beyond it take the comparison and stay exact."""
    from contrastlab.losses.supcon import _EXACT_F32, _equal_mask

    g = torch.Generator().manual_seed(9)
    for hi in (5, _EXACT_F32):
        a = torch.randint(-hi, hi + 1, (37,), generator=g)
        c = torch.cat([a[:20], torch.randint(-hi, hi + 1, (11,), generator=g)])
        assert torch.equal(_equal_mask(a, c), (a.view(-1, 1) == c.view(1, -1)).float())
    # 2^24 + 1 and 2^24 round to the same float32: the comparison must tell them apart
    big = torch.tensor([_EXACT_F32 + 1, _EXACT_F32, _EXACT_F32 + 1])
    assert torch.equal(_equal_mask(big, big), torch.tensor([[1.0, 0, 1], [0, 1, 0], [1, 0, 1]]))


def test_supcon_with_huge_class_ids_equals_compact_ids():
    f = _feats(12, 2)
    y = torch.tensor([0, 1, 2, 0, 1, 2, 3, 3, 0, 5, 5, 1])
    huge = y * (1 << 40) + 7  # ids no float32 holds exactly
    assert _common.use_dense(24, 24)
    a = supcon_loss(f, y, temperature=0.2)
    b = supcon_loss(f, huge, temperature=0.2)
    assert torch.allclose(a, b, rtol=0, atol=1e-12)
