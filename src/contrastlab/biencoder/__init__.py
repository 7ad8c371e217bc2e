"""Signature -> body bi-encoder fine-tuning for the code track (issue 36; docs/code.md).

One shared tower (or two, ``towers: separate``) embeds signatures and bodies; InfoNCE pulls
each signature to its body against the batch's other bodies (van den Oord et al. 2018, Eq. 4),
optionally with FAISS-mined hard negatives. Encoder and cache are :mod:`contrastlab.finetune`'s.
Submodules: :mod:`.data`, :mod:`.train`, :mod:`.st` (sentence-transformers reference),
:mod:`.run`, :mod:`.outputs`, :mod:`.index`.
"""
