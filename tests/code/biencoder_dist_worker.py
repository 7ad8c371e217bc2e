"""Worker for test_biencoder_distributed.

``prepare DIR``: write the tiny random BERT of test_biencoder (``DIR/model``) and its
lower-layer cache (``DIR/cache.safetensors``) once, so every run reads the same inputs.

``step DIR OUT``: for each case of ``CASES`` (loss, towers), one step of
:func:`contrastlab.biencoder.train.train_biencoder` on a global batch of ``G`` pairs (``G / W``
per process; run with plain python or torchrun); each rank saves the step's logged loss and
the gradients the optimiser stepped with (``OUT.<loss>-<towers>.rank<r>``). One process runs
every case (each start imports torch and transformers, seconds on a busy CPU).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

from test_biencoder import BODIES, SIGS, _be, save_tiny_model  # this script's folder

G = 6  # global batch: 6 of the 8 training pairs (hard negatives may lie outside the batch)
CASES = [("infonce", "shared"), ("infonce_hardneg", "separate")]


def prepare(d: Path) -> None:
    from safetensors.torch import save_file

    from contrastlab.biencoder.data import build_cache

    save_tiny_model(d / "model")
    save_file(build_cache(_be(d / "model"), SIGS, BODIES), str(d / "cache.safetensors"))


def step(d: Path, out: str) -> None:
    from safetensors.torch import load_file

    from contrastlab import distributed as D
    from contrastlab.biencoder.data import make_encoder
    from contrastlab.biencoder.train import BiEncoder, load_cache, train_biencoder
    from contrastlab.params.biencoder import BiencoderRow

    info = D.init_distributed("cpu")
    torch.set_num_threads(1)
    sig, body = load_cache(load_file(str(d / "cache.safetensors")))
    train = np.arange(len(SIGS))
    for loss, towers in CASES:
        be = _be(d / "model", steps=1, batch_size=G // info.world_size, towers=towers, hardneg_k=2)
        torch.manual_seed(0)
        model = BiEncoder(make_encoder(be), towers, 0.07)
        res = train_biencoder(model, sig, body, train, np.arange(len(SIGS)), be=be, seed=3, log_every=1,
                              row=BiencoderRow(loss=loss, lr=1e-3, temperature=0.07))
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
        torch.save({"loss": res.curve["loss"][0], "grads": grads, "world": info.world_size},
                   f"{out}.{loss}-{towers}.rank{info.rank}")
    if info.world_size == 1:
        return
    from dist_step_worker import exit_without_teardown

    exit_without_teardown()


if __name__ == "__main__":
    if sys.argv[1] == "prepare":
        prepare(Path(sys.argv[2]))
    else:
        step(Path(sys.argv[2]), sys.argv[3])
