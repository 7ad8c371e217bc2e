"""Signature -> body bi-encoder fine-tuning for the code track (issue 36; docs/code.md).

A ``transformers`` encoder (all-MiniLM-L6-v2 by default) embeds a function's signature and
its body with one shared tower (or two, ``towers: separate``); training pulls each signature
to its own body against the other bodies of the batch (InfoNCE, van den Oord et al. 2018,
Eq. 4; learnable temperature; negatives gathered across ranks under ``torchrun``), optionally
with hard negatives mined by FAISS from the current body index. The encoder, its lower-layer
cache and the trained-block forward pass are :mod:`contrastlab.finetune`'s.

Submodules (imported on use): :mod:`.data` (pairs, splits, the lower-layer cache),
:mod:`.train` (the training loop and hard-negative mining), :mod:`.st` (the
sentence-transformers reference row), :mod:`.run` (one row over seeds: ranks, metrics,
index), :mod:`.index` (the queryable signature -> body index).
"""
