"""The reference a user would pick (trainer ``sentence_transformers``): the same model, blocks,
pairs, steps, learning rate, schedule, weight decay and clipping through sentence-transformers'
v2 loop (``SentenceTransformer.old_fit``) with ``MultipleNegativesRankingLoss`` (Henderson et
al. 2017, Sec. 4.4) at ``scale = 1 / temperature``.

Remaining differences (sentence-transformers' choices): all blocks run on freshly tokenised
text, no weight decay on biases and LayerNorm weights, one shared tower, one process. The
model is wrapped in a :class:`~contrastlab.finetune.encoder.FinetuneEncoder` for evaluation.
"""

from __future__ import annotations

import time

import numpy as np

from ..errors import InputError

__all__ = ["train_st"]


def _freeze(st_model, layers) -> None:
    """Train the top ``layers`` blocks (``"all"``: every parameter)."""
    from ..finetune.encoder import _layer_list

    auto = st_model[0].auto_model
    blocks = _layer_list(auto)
    k = len(blocks) if layers == "all" else int(layers)  # not a loss name
    for p in st_model.parameters():
        p.requires_grad_(layers == "all")  # not a loss name
    for b in list(blocks)[len(blocks) - k:]:
        for p in b.parameters():
            p.requires_grad_(True)


def train_st(be, row, signatures: list[str], bodies: list[str], batches: np.ndarray, *,
             device: str = "cpu"):
    """Train a sentence-transformers bi-encoder on ``batches`` (``[steps, B]`` rows).

    Args:
        be: ``code.biencoder`` params (model, layers, max_length, weight_decay, warmup,
            grad_clip); row: the row (lr, temperature).
        signatures, bodies: texts of every function.
        batches: the pair rows of each step (:func:`contrastlab.biencoder.train.pair_batches`).

    Returns:
        ``(FinetuneEncoder, {"tokens": int, "seconds": float})``: the trained model wrapped for
        evaluation (mean pooling, no head, ``be.layers`` trainable blocks); tokens = the
        tokenised lengths of the trained pairs (the same count as the contrastlab trainer).

    Raises:
        InputError: ``towers: separate`` (not offered by this row) is only noted; an empty batch.
    """
    from sentence_transformers import InputExample, SentenceTransformer, losses
    from torch.utils.data import DataLoader

    from ..finetune.encoder import FinetuneEncoder
    from ..models.teacher import resolve_model

    if batches.ndim != 2 or batches.shape[1] < 2:
        raise InputError(f"batches must be [steps, B >= 2], got {batches.shape}")
    steps, b = batches.shape
    model = SentenceTransformer(resolve_model(be.model), device=device)
    model.max_seq_length = be.max_length
    _freeze(model, be.layers)
    examples = [InputExample(texts=[signatures[i], bodies[i]], label=0) for i in batches.reshape(-1)]
    loader = DataLoader(examples, batch_size=b, shuffle=False, drop_last=True)
    loss = losses.MultipleNegativesRankingLoss(model, scale=1.0 / row.temperature)
    t0 = time.perf_counter()
    model.old_fit(train_objectives=[(loader, loss)], epochs=1, steps_per_epoch=steps,
                  scheduler="warmupcosine", warmup_steps=int(np.ceil(be.warmup * steps)),
                  optimizer_params={"lr": row.lr}, weight_decay=be.weight_decay,
                  max_grad_norm=be.grad_clip or 1e9, show_progress_bar=False)
    seconds = time.perf_counter() - t0
    tok = model.tokenizer
    lens = lambda texts: [len(x) for x in tok(texts, truncation=True, max_length=be.max_length)["input_ids"]]  # noqa: E731
    rows = batches.reshape(-1)
    tokens = int(sum(lens([signatures[i] for i in rows])) + sum(lens([bodies[i] for i in rows])))
    enc = FinetuneEncoder(model[0].auto_model.to("cpu"), layers=be.layers, pooling="mean", proj_dim=0,
                          max_length=be.max_length, tokenizer=tok)
    enc.source = str(be.model)
    return enc.eval(), {"tokens": tokens, "seconds": seconds}
