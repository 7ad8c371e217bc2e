"""InfoNCE (van den Oord et al. 2018), InfoNCE + hard negatives and the regression baselines."""

import math

import pytest
import torch
import torch.nn.functional as F

from contrastlab.losses import get_loss
from contrastlab.losses.infonce import InfoNCELoss, infonce_hardneg_loss, infonce_loss
from contrastlab.losses.regression import cosine_loss, smoothl1_loss


def _ref_infonce(pred, targets, tau, offset=0, hard=None):
    p = F.normalize(pred, dim=-1)
    t = F.normalize(targets, dim=-1)
    out = []
    for i in range(p.shape[0]):
        logits = [p[i] @ t[j] / tau for j in range(t.shape[0])]
        if hard is not None:
            h = F.normalize(hard[i], dim=-1)
            logits += [p[i] @ h[k] / tau for k in range(h.shape[0])]
        logits = torch.stack(logits)
        out.append(-(logits[offset + i] - torch.logsumexp(logits, 0)))
    return torch.stack(out).mean()


def test_infonce_matches_reference_with_offset():
    g = torch.Generator().manual_seed(0)
    pred = torch.randn(5, 8, generator=g, dtype=torch.float64)
    targets = torch.randn(12, 8, generator=g, dtype=torch.float64)
    for off in (0, 3, 7):
        got = infonce_loss(pred, targets, math.log(0.1), anchor_offset=off)
        assert torch.allclose(got, _ref_infonce(pred, targets, 0.1, off))


def test_masked_hard_negatives_leave_a_finite_temperature_gradient():
    """A masked slot is left out of anchor i's denominator (per-anchor reference over the kept
    negatives only), for the loss and for the gradients of pred and of the log-temperature,
    which was NaN when the slot was set to -inf before dividing by tau (-inf / tau)."""
    g = torch.Generator().manual_seed(3)
    pred = torch.randn(4, 6, generator=g, dtype=torch.float64)
    targets = torch.randn(4, 6, generator=g, dtype=torch.float64)
    hard = torch.randn(4, 3, 6, generator=g, dtype=torch.float64)
    mask = torch.tensor([[1, 0, 1], [0, 0, 0], [1, 1, 1], [0, 1, 0]], dtype=torch.bool)
    p1, lt1 = pred.clone().requires_grad_(), torch.tensor(math.log(0.2), dtype=torch.float64,
                                                          requires_grad=True)
    got = infonce_hardneg_loss(p1, targets, lt1, hard, hard_negative_mask=mask)
    got.backward()
    p2, lt2 = pred.clone().requires_grad_(), torch.tensor(math.log(0.2), dtype=torch.float64,
                                                          requires_grad=True)
    want = torch.stack([_ref_infonce(p2[i:i + 1], targets, lt2.exp(), i, hard[i:i + 1, mask[i]])
                        for i in range(4)]).mean()
    want.backward()
    assert torch.allclose(got, want)
    assert torch.isfinite(lt1.grad) and torch.allclose(lt1.grad, lt2.grad)
    assert torch.allclose(p1.grad, p2.grad)


def test_infonce_hardneg_matches_reference_and_mask():
    g = torch.Generator().manual_seed(1)
    pred = torch.randn(4, 6, generator=g, dtype=torch.float64)
    targets = torch.randn(4, 6, generator=g, dtype=torch.float64)
    hard = torch.randn(4, 3, 6, generator=g, dtype=torch.float64)
    got = infonce_hardneg_loss(pred, targets, math.log(0.07), hard)
    assert torch.allclose(got, _ref_infonce(pred, targets, 0.07, 0, hard))
    assert got > infonce_loss(pred, targets, math.log(0.07))
    mask = torch.zeros(4, 3, dtype=torch.bool)
    assert torch.allclose(infonce_hardneg_loss(pred, targets, math.log(0.07), hard, hard_negative_mask=mask),
                          infonce_loss(pred, targets, math.log(0.07)))
    with pytest.raises(ValueError, match="hard_negatives"):
        infonce_hardneg_loss(pred, targets, math.log(0.07), hard[:, :, :5])


def test_infonce_module_learnable_temperature_and_clamp():
    m = InfoNCELoss()
    assert m.log_temperature.requires_grad and math.isclose(m.temperature, 0.07, rel_tol=1e-6)
    pred, targets = torch.randn(6, 4), torch.randn(6, 4)
    loss = m(pred, targets)
    loss.backward()
    assert m.log_temperature.grad is not None and torch.isfinite(m.log_temperature.grad)
    with torch.no_grad():
        m.log_temperature.fill_(-20.0)
    assert math.isclose(m.temperature, 0.01, rel_tol=1e-6)
    big = 100 * torch.randn(6, 4)
    assert torch.isfinite(m(big, big))


def test_infonce_errors_and_registry():
    with pytest.raises(ValueError, match="anchor_offset"):
        infonce_loss(torch.randn(4, 3), torch.randn(5, 3), anchor_offset=2)
    with pytest.raises(ValueError, match="share D"):
        infonce_loss(torch.randn(4, 3), torch.randn(5, 2))
    assert get_loss("infonce") is infonce_loss


def test_infonce_equals_cross_entropy_and_gradcheck():
    pred = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    targets = torch.randn(5, 4, dtype=torch.float64, requires_grad=True)
    lt = torch.tensor(math.log(0.2), dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda p, t, l: infonce_loss(p, t, l, anchor_offset=1), (pred, targets, lt))


def test_regression_baselines():
    p, t = torch.randn(4, 3), torch.randn(4, 3)
    assert torch.allclose(smoothl1_loss(p, t), torch.nn.SmoothL1Loss()(p, t))
    ref = torch.stack([1 - p[i] @ t[i] / (p[i].norm() * t[i].norm()) for i in range(4)]).mean()
    assert torch.allclose(cosine_loss(p, t), ref, atol=1e-6)
    assert torch.allclose(cosine_loss(p, 3 * p), torch.tensor(0.0), atol=1e-6)
    with pytest.raises(ValueError, match="same shape"):
        cosine_loss(p, t[:3])
    assert get_loss("smoothl1")(p, t) == smoothl1_loss(p, t)
    # no keyword is swallowed: a temperature given to a loss without one is a caller's bug
    for name in ("smoothl1", "cosine"):
        with pytest.raises(TypeError, match="temperature"):
            get_loss(name)(p, t, temperature=0.1)


def test_infonce_float_log_temperature_uses_input_dtype():
    # tau = exp(log 0.07) in float64, not a float32 tau cast up (which is off by ~1e-9 relative)
    g = torch.Generator().manual_seed(2)
    pred = torch.randn(5, 8, generator=g, dtype=torch.float64)
    targets = torch.randn(5, 8, generator=g, dtype=torch.float64)
    lt = math.log(0.07)
    tau64 = math.exp(lt)
    want = _ref_infonce(pred, targets, tau64)
    got = infonce_loss(pred, targets, lt)
    assert got.dtype == torch.float64
    assert abs(float(got - want)) < 1e-13
    tau32 = float(torch.tensor(lt, dtype=torch.float32).exp())
    assert abs(float(_ref_infonce(pred, targets, tau32) - want)) > 1e-9  # the old result differs
    hard = torch.randn(5, 2, 8, generator=g, dtype=torch.float64)
    got_h = infonce_hardneg_loss(pred, targets, lt, hard)
    assert abs(float(got_h - _ref_infonce(pred, targets, tau64, 0, hard))) < 1e-13
    # float32 inputs keep a float32 loss
    assert infonce_loss(pred.float(), targets.float(), lt).dtype == torch.float32
