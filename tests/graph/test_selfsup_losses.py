"""NT-Xent, MixCo and MoCHi against per-anchor references written from their equations."""

import math

import pytest
import torch
import torch.nn.functional as F

from contrastlab.losses import get_loss
from contrastlab.losses.selfsup import (
    MixcoMixing, MochiMixing, mixco_loss, mochi_loss, ntxent_loss, sample_mixco_mixing,
    sample_mochi_mixing,
)



@pytest.fixture(autouse=True)
def _float64():
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(old)


def _unit(v):
    return v / v.norm()


# ----------------------------------------------------------------------- references (loops)
def ref_ntxent(z1, z2, tau):
    """Chen et al. 2020 Eq. 1, one anchor at a time over the 2N views."""
    n = z1.shape[0]
    z = [_unit(v) for v in torch.cat([z1, z2])]
    total = 0.0
    for i in range(2 * n):
        j = (i + n) % (2 * n)
        den = sum(torch.exp(z[i] @ z[k] / tau) for k in range(2 * n) if k != i)
        total = total - torch.log(torch.exp(z[i] @ z[j] / tau) / den)
    return total / (2 * n)


def ref_mixco_term(z1, z2, tau, mixing):
    """Kim et al. 2020 Eq. 3: mix in one view, soft targets against the other view."""
    n = z1.shape[0]
    views = [[_unit(v) for v in z1], [_unit(v) for v in z2]]
    total = 0.0
    for v in range(2):
        same, other = views[v], views[1 - v]
        for i in range(n):
            q, lam = int(mixing.partner[v, i]), float(mixing.lam[v, i])
            m = _unit(lam * same[i] + (1 - lam) * same[q])
            logits = torch.stack([m @ w / tau for w in other])
            logp = logits - torch.logsumexp(logits, 0)
            total = total - (lam * logp[i] + (1 - lam) * logp[q])
    return total / (2 * n)


def ref_mochi(z1, z2, tau, n_hard, mixing, detach=True):
    """Kalantidis et al. 2020 Eq. 1-3, one anchor at a time."""
    sg = (lambda t: t.detach()) if detach else (lambda t: t)
    n = z1.shape[0]
    z = [_unit(v) for v in torch.cat([z1, z2])]
    total = 0.0
    for a in range(2 * n):
        p = (a + n) % (2 * n)
        negs = [k for k in range(2 * n) if k not in (a, p)]
        negs.sort(key=lambda k: -float((z[a] @ z[k]).detach()))
        hard = negs[:n_hard]
        synth = []
        for (r1, r2), al in zip(mixing.pair[a].tolist(), mixing.alpha[a].tolist()):
            synth.append(sg(_unit(al * z[hard[r1]] + (1 - al) * z[hard[r2]])))
        for r, be in zip(mixing.prime[a].tolist(), mixing.beta[a].tolist()):
            synth.append(sg(_unit(be * z[a] + (1 - be) * z[hard[r]])))
        den = sum(torch.exp(z[a] @ z[k] / tau) for k in range(2 * n) if k != a)
        den = den + sum(torch.exp(z[a] @ h / tau) for h in synth)
        total = total - torch.log(torch.exp(z[a] @ z[p] / tau) / den)
    return total / (2 * n)


def _views(n=6, d=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(n, d, generator=g), torch.randn(n, d, generator=g))


# ----------------------------------------------------------------------- NT-Xent
@pytest.mark.parametrize("seed,tau", [(0, 0.5), (1, 0.1), (2, 1.0)])
def test_ntxent_matches_reference(seed, tau):
    z1, z2 = _views(seed=seed)
    torch.testing.assert_close(ntxent_loss(z1, z2, temperature=tau), ref_ntxent(z1, z2, tau))


def test_ntxent_hand_made_positive_once():
    # two samples, identical views: with the positive counted once the loss for every
    # anchor is -log(e^{1/t} / (e^{1/t} + 2 e^{c/t})), c = cos between the two samples.
    z1 = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    tau = 0.5
    got = ntxent_loss(z1, z1.clone(), temperature=tau)
    want = -math.log(math.exp(2) / (math.exp(2) + 2 * math.exp(0)))
    assert abs(float(got) - want) < 1e-12
    # a reference notebook's version (positive twice: own column + among negatives) differs
    twice = -math.log(math.exp(2) / (2 * math.exp(2) + 2 * math.exp(0)))
    assert abs(float(got) - twice) > 0.3


def test_ntxent_gradcheck():
    z1, z2 = _views(n=4, d=3)
    z1.requires_grad_(True)
    z2.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda a, b: ntxent_loss(a, b, temperature=0.3), (z1, z2))


def test_ntxent_scale_invariant_and_validates():
    z1, z2 = _views()
    torch.testing.assert_close(ntxent_loss(3 * z1, z2), ntxent_loss(z1, z2))
    with pytest.raises(ValueError, match="temperature"):
        ntxent_loss(z1, z2, temperature=0)
    with pytest.raises(ValueError, match="shape"):
        ntxent_loss(z1, z2[:-1])


# ----------------------------------------------------------------------- MixCo
@pytest.mark.parametrize("seed", [0, 1])
def test_mixco_matches_reference(seed):
    z1, z2 = _views(n=7, seed=seed)
    mix = sample_mixco_mixing(7, alpha=1.0, generator=torch.Generator().manual_seed(seed))
    mix = MixcoMixing(mix.partner, mix.lam.double())
    got = mixco_loss(z1, z2, temperature=0.4, weight=0.7, mixing=mix)
    want = ref_ntxent(z1, z2, 0.4) + 0.7 * ref_mixco_term(z1, z2, 0.4, mix)
    torch.testing.assert_close(got, want)


def test_mixco_hand_made():
    # lam = 1 everywhere and partner = self: the mix is the sample itself and the term is
    # plain cross-view InfoNCE -log softmax_i(z_i . w_k / tau).
    z1, z2 = _views(n=5)
    mix = MixcoMixing(torch.arange(5).repeat(2, 1), torch.ones(2, 5))
    u1, u2 = F.normalize(z1, dim=1), F.normalize(z2, dim=1)
    ce = 0.5 * (F.cross_entropy(u1 @ u2.T / 0.5, torch.arange(5))
                + F.cross_entropy(u2 @ u1.T / 0.5, torch.arange(5)))
    got = mixco_loss(z1, z2, temperature=0.5, weight=1.0, mixing=mix) - ntxent_loss(z1, z2)
    torch.testing.assert_close(got, ce)


def test_mixco_uses_both_views_and_generator():
    z1, z2 = _views(n=8)
    g = lambda: torch.Generator().manual_seed(3)  # noqa: E731
    base = mixco_loss(z1, z2, temperature=0.5, generator=g())
    assert float(base) == float(mixco_loss(z1, z2, temperature=0.5, generator=g()))
    z1b = z1.clone()
    z1b[0] += 1.0
    assert float(mixco_loss(z1b, z2, temperature=0.5, generator=g())) != pytest.approx(float(base))
    # the mix term alone depends on view 1: with z2 fixed, change z1 and the term changes
    mix = sample_mixco_mixing(8, 1.0, torch.Generator().manual_seed(0))
    t1 = ref_mixco_term(z1, z2, 0.5, mix)
    t2 = ref_mixco_term(z1b, z2, 0.5, mix)
    assert abs(float(t1 - t2)) > 1e-6
    # weight 0 is NT-Xent
    torch.testing.assert_close(mixco_loss(z1, z2, weight=0.0), ntxent_loss(z1, z2))


def test_mixco_gradcheck():
    z1, z2 = _views(n=4, d=3)
    mix = sample_mixco_mixing(4, 2.0, torch.Generator().manual_seed(1))
    mix = MixcoMixing(mix.partner, mix.lam.double())
    z1.requires_grad_(True)
    z2.requires_grad_(True)
    assert torch.autograd.gradcheck(
        lambda a, b: mixco_loss(a, b, temperature=0.3, mixing=mix), (z1, z2))


def test_mixco_lambda_distribution():
    mix = sample_mixco_mixing(4000, alpha=2.0, generator=torch.Generator().manual_seed(0))
    assert ((mix.lam > 0) & (mix.lam < 1)).all()
    assert abs(float(mix.lam.mean()) - 0.5) < 0.02          # Beta(2, 2) mean 1/2
    assert abs(float(mix.lam.var()) - 0.05) < 0.005         # var = 1/20
    assert all(sorted(p.tolist()) == list(range(4000)) for p in mix.partner)


# ----------------------------------------------------------------------- MoCHi
@pytest.mark.parametrize("seed,n_hard,s,sp", [(0, 4, 3, 2), (1, 10, 5, 0), (2, 1, 0, 4)])
def test_mochi_matches_reference(seed, n_hard, s, sp):
    z1, z2 = _views(n=6, seed=seed)
    mix = sample_mochi_mixing(12, n_hard, s, sp, torch.Generator().manual_seed(seed))
    mix = MochiMixing(mix.pair, mix.alpha.double(), mix.prime, mix.beta.double())
    got = mochi_loss(z1, z2, temperature=0.4, n_hard=n_hard, s=s, s_prime=sp, mixing=mix)
    torch.testing.assert_close(got, ref_mochi(z1, z2, 0.4, n_hard, mix))


def test_mochi_gradient_matches_reference_and_detaches_synthetics():
    z1, z2 = _views(n=5, seed=4)
    mix = sample_mochi_mixing(10, 3, 4, 3, torch.Generator().manual_seed(0))
    mix = MochiMixing(mix.pair, mix.alpha.double(), mix.prime, mix.beta.double())
    a1, a2 = z1.clone().requires_grad_(True), z2.clone().requires_grad_(True)
    mochi_loss(a1, a2, temperature=0.4, n_hard=3, s=4, s_prime=3, mixing=mix).backward()
    b1, b2 = z1.clone().requires_grad_(True), z2.clone().requires_grad_(True)
    ref_mochi(b1, b2, 0.4, 3, mix).backward()
    torch.testing.assert_close(a1.grad, b1.grad)
    torch.testing.assert_close(a2.grad, b2.grad)
    # same value, but a non-detached variant would send gradient into the synthetic points
    c1, c2 = z1.clone().requires_grad_(True), z2.clone().requires_grad_(True)
    ref_mochi(c1, c2, 0.4, 3, mix, detach=False).backward()
    assert (a1.grad - c1.grad).abs().max() > 1e-6


def test_mochi_hand_made_one_synthetic():
    # N=2: anchor 0 has one negative candidate per other view sample. n_hard=2, s=1 with
    # the pair (hardest, hardest) and any alpha gives the hardest negative itself.
    z1 = torch.tensor([[1.0, 0.0], [0.6, 0.8]])
    z2 = torch.tensor([[0.8, 0.6], [0.0, 1.0]])
    mix = MochiMixing(torch.zeros(4, 1, 2, dtype=torch.long), torch.full((4, 1), 0.3),
                      torch.zeros(4, 0, dtype=torch.long), torch.zeros(4, 0))
    tau = 0.5
    got = mochi_loss(z1, z2, temperature=tau, n_hard=2, s=1, s_prime=0, mixing=mix)
    z = F.normalize(torch.cat([z1, z2]), dim=1)
    sim = z @ z.T
    want = 0.0
    for a in range(4):
        p = (a + 2) % 4
        negs = [k for k in range(4) if k not in (a, p)]
        hardest = max(negs, key=lambda k: float(sim[a, k]))
        den = sum(math.exp(float(sim[a, k]) / tau) for k in range(4) if k != a)
        den += math.exp(float(sim[a, hardest]) / tau)  # duplicated hardest negative
        want += -math.log(math.exp(float(sim[a, p]) / tau) / den) / 4
    assert abs(float(got) - want) < 1e-9


def test_mochi_mixing_ranges_and_reduction():
    mix = sample_mochi_mixing(50, 7, 9, 11, torch.Generator().manual_seed(0))
    assert mix.pair.shape == (50, 9, 2) and int(mix.pair.max()) < 7
    assert ((mix.alpha > 0) & (mix.alpha < 1)).all()
    assert ((mix.beta >= 0) & (mix.beta < 0.5)).all()       # query share below one half
    z1, z2 = _views(n=6)
    torch.testing.assert_close(mochi_loss(z1, z2, n_hard=4, s=0, s_prime=0), ntxent_loss(z1, z2))
    # synthetic negatives only add to the denominator: the loss can only grow
    assert float(mochi_loss(z1, z2, n_hard=4, s=8, s_prime=8,
                            generator=torch.Generator().manual_seed(0))) > float(ntxent_loss(z1, z2))
    with pytest.raises(ValueError, match="n_hard"):
        mochi_loss(z1, z2, n_hard=11)


def test_registry_names_resolve():
    assert get_loss("ntxent") is ntxent_loss
    assert get_loss("mixco") is mixco_loss
    assert get_loss("mochi") is mochi_loss


# ----------------------------------------------------------------------- second derivatives
def test_second_derivatives_ntxent_mixco_mochi():
    """Hessian-vector products through the fused NT-Xent and MoCHi backward are exact."""
    z1, z2 = _views(n=4, d=3, seed=5)
    z1.requires_grad_(True)
    z2.requires_grad_(True)
    assert torch.autograd.gradgradcheck(lambda a, b: ntxent_loss(a, b, temperature=0.3), (z1, z2))
    mix = sample_mixco_mixing(4, 2.0, torch.Generator().manual_seed(1))
    mix = MixcoMixing(mix.partner, mix.lam.double())
    assert torch.autograd.gradgradcheck(lambda a, b: mixco_loss(a, b, temperature=0.3, mixing=mix), (z1, z2))
    # MoCHi with s = s' = 0 is NT-Xent; with synthetics, its stop-gradient makes the "gradient"
    # not the derivative of any function, so finite differences cannot check it: the next test
    # compares its Hessian-vector products with the per-anchor reference's instead
    assert torch.autograd.gradgradcheck(
        lambda a, b: mochi_loss(a, b, temperature=0.4, n_hard=3, s=0, s_prime=0), (z1, z2))


def test_mochi_hessian_vector_product_matches_reference():
    """The fused MoCHi's double backward equals the per-anchor reference's (autograd treats
    the detached synthetic points as constants at every order)."""
    z1, z2 = _views(n=4, d=3, seed=6)
    mm = sample_mochi_mixing(8, 3, 2, 2, torch.Generator().manual_seed(3))
    mm = MochiMixing(mm.pair, mm.alpha.double(), mm.prime, mm.beta.double())
    v1, v2 = torch.randn(4, 3), torch.randn(4, 3)

    def hvp(fn):
        a, b = z1.clone().requires_grad_(True), z2.clone().requires_grad_(True)
        ga, gb = torch.autograd.grad(fn(a, b), (a, b), create_graph=True)
        return torch.autograd.grad((ga * v1).sum() + (gb * v2).sum(), (a, b))

    got = hvp(lambda a, b: mochi_loss(a, b, temperature=0.4, n_hard=3, s=2, s_prime=2, mixing=mm))
    want = hvp(lambda a, b: ref_mochi(a, b, 0.4, 3, mm))
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_fused_mochi_equals_plain_on_a_larger_batch(dtype):
    """The fused MoCHi (one Gram matrix, gradients scattered into it) against the plain
    autograd formulation on 2 x 150 views: same hard negatives, value and gradient."""
    from contrastlab.losses.selfsup import _mochi_plain

    g = torch.Generator().manual_seed(7)
    n, d = 150, 16
    z1 = torch.randn(n, d, generator=g, dtype=dtype)
    z2 = torch.randn(n, d, generator=g, dtype=dtype)
    mm = sample_mochi_mixing(2 * n, 40, 12, 6, g)
    a1, a2 = z1.clone().requires_grad_(True), z2.clone().requires_grad_(True)
    got = mochi_loss(a1, a2, temperature=0.3, n_hard=40, s=12, s_prime=6, mixing=mm)
    got.backward()
    b1, b2 = z1.clone().requires_grad_(True), z2.clone().requires_grad_(True)
    z = F.normalize(torch.cat([b1, b2]), dim=1)
    pos = torch.arange(2 * n).roll(n)
    gram = (z @ z.T).detach()
    gram.fill_diagonal_(float("-inf"))
    gram[torch.arange(2 * n), pos] = float("-inf")
    hard = gram.topk(40, dim=1).indices
    want = _mochi_plain(z, pos, hard, mm.pair, mm.alpha, mm.prime, mm.beta, 0.3)
    want.backward()
    tol = {"atol": 1e-12, "rtol": 1e-10} if dtype == torch.float64 else {"atol": 1e-6, "rtol": 1e-5}
    torch.testing.assert_close(got, want, **tol)
    torch.testing.assert_close(a1.grad, b1.grad, **tol)
    torch.testing.assert_close(a2.grad, b2.grad, **tol)
