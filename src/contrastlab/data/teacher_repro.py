"""Teacher states whose bytes do not depend on the CPU, the BLAS kernel or its thread count.

Issue 38: a float32 pass changes in its last bits with the summation order, and a change that
crosses a float16 rounding boundary changes the stored shards. Here the pass runs in float64
and is rounded to grids far coarser than its noise: signature states to float16 straight from
float64, body embeddings to :data:`BODY_BITS` significant bits (stored as float32), so a
stored value changes only within ~1e-13 of a grid boundary. Used by ``teacher_states`` for
every bidirectional teacher (:func:`contrastlab.training.code_teacher.run_teacher_states`);
a causal teacher keeps the native-precision pass. Tested in tests/code/test_teacher_repro.py.
"""

from __future__ import annotations

from typing import Sequence

import torch

__all__ = ["BODY_BITS", "PRECISION", "encode_reproducible", "round_significant"]

#: Significant bits kept of a body embedding value (relative grid ``2**-BODY_BITS``).
BODY_BITS = 16

#: How the stored states were computed (part of the teacher settings' fingerprint, so shards
#: computed another way are recomputed rather than mixed in).
PRECISION = f"float64 pass; signature states float16, body embeddings {BODY_BITS} bits"


def round_significant(x: torch.Tensor, bits: int = BODY_BITS) -> torch.Tensor:
    """Round every value of ``x`` to ``bits`` significant bits (round half to even).

    ``x = m * 2**e`` with ``0.5 <= |m| < 1`` (``torch.frexp``); ``m`` is rounded to a
    multiple of ``2**-bits``. Zeros stay zero, signs are kept; non-finite values are
    returned unchanged.

    Args:
        x: float tensor (float64 for the purpose here), any shape.
        bits: significant bits kept, 1..24 (the result is exact in float32).

    Returns:
        float32 tensor, same shape.

    Raises:
        ValueError: ``bits`` outside 1..24 or ``x`` not floating point.
    """
    if not 1 <= bits <= 24:
        raise ValueError(f"bits must be in 1..24, got {bits}")
    if not x.is_floating_point():
        raise ValueError(f"x must be a floating-point tensor, got {x.dtype}")
    x64 = x.to(torch.float64)
    m, e = torch.frexp(x64)
    scale = float(2 ** bits)
    y = torch.ldexp(torch.round(m * scale) / scale, e)
    y = torch.where(torch.isfinite(x64), y, x64)
    return y.to(torch.float32)


def encode_reproducible(enc, signatures: Sequence[str], bodies: Sequence[str], *,
                        max_sig_tokens: int = 32, batch_size: int = 64,
                        body_bits: int = BODY_BITS, progress: bool = False
                        ) -> tuple[list[torch.Tensor], torch.Tensor]:
    """The states of ``N`` functions from a float64 teacher, rounded to fixed grids.

    Args:
        enc: a bidirectional :class:`contrastlab.models.teacher.TeacherEncoder` built with
            ``dtype=torch.float64`` (any device).
        signatures, bodies: ``N`` strings each.
        max_sig_tokens: signature tokens kept.
        batch_size: functions per forward pass (the bytes do not depend on it).
        body_bits: significant bits kept of the body embeddings.
        progress: accepted for the stage's call signature; no bar is shown.

    Returns:
        ``(sig_states, body_emb)``: ``N`` float16 tensors ``[T_i, H]`` (CPU) and a float32
        tensor ``[N, H]`` whose values carry ``body_bits`` significant bits.

    Raises:
        ValueError: a causal or non-float64 encoder, or unequal lengths.
    """
    if enc.is_causal:
        raise ValueError("encode_reproducible supports bidirectional teachers only: the "
                         "causal branch averages the body states in float32")
    if enc.dtype != torch.float64:
        raise ValueError(f"encode_reproducible needs a float64 encoder, got {enc.dtype}")
    sig, emb = _encode64(enc, list(signatures), list(bodies), max_sig_tokens, batch_size)
    return sig, round_significant(emb, body_bits)


def _encode64(enc, signatures: list[str], bodies: list[str], max_sig_tokens: int,
              batch_size: int) -> tuple[list[torch.Tensor], torch.Tensor]:
    """``encode_functions`` of a float64 encoder, with the body mean kept in float64."""
    if len(signatures) != len(bodies):
        raise ValueError(f"{len(signatures)} signatures but {len(bodies)} bodies")
    keep = enc.max_length
    enc.max_length = min(keep, max_sig_tokens)
    try:
        sig = enc.encode_tokens(signatures, batch_size, False)  # float64 -> float16, once
    finally:
        enc.max_length = keep
    ids = enc._tokenize(bodies)
    emb = torch.zeros((len(ids), enc.hidden_size), dtype=torch.float64)
    with torch.inference_mode():
        for idx in enc._batches([len(x) for x in ids], batch_size):
            h, m = enc._forward([ids[i] for i in idx])
            m = m.unsqueeze(-1).to(h.dtype)
            emb[idx] = ((h * m).sum(1) / m.sum(1).clamp_min(1)).to(torch.float64).cpu()
    return sig, emb
