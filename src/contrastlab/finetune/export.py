"""The fine-tuned encoder as a folder that ``sentence-transformers`` and ``transformers`` load
without contrastlab.

:func:`export_sentence_transformers` adds to a :meth:`FinetuneEncoder.save` folder the module
files of a ``SentenceTransformer`` with the same weights (Reimers & Gurevych 2019):
``modules.json``, ``sentence_bert_config.json``, ``tokenizer_config.json``, ``1_Pooling/``
(mean or CLS), ``2_Dense/`` + ``3_Dense/`` (the projection head, when present) and
``4_Normalize/``. The folder then loads as ``FinetuneEncoder.load``, as
``SentenceTransformer(folder)``, or as ``transformers.AutoModel`` (masked mean of
``last_hidden_state``, the two Dense layers, L2 normalisation), with the same embeddings up
to float rounding.

Texts must be prepared as in training: docstrings removed when ``strip_docstrings`` is set in
``finetune_encoder.json`` (:func:`contrastlab.finetune.index.prepare_code`).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from torch import nn

from .encoder import FinetuneEncoder

__all__ = ["export_sentence_transformers", "sentence_transformer", "ST_FILES"]

#: What :func:`export_sentence_transformers` adds to the folder (files and module folders).
#: ``tokenizer_config.json`` is replaced: sentence-transformers keeps ``max_seq_length`` in its
#: ``model_max_length`` (contrastlab passes ``max_length`` explicitly, so nothing else changes).
ST_FILES = ("modules.json", "sentence_bert_config.json", "config_sentence_transformers.json",
            "tokenizer_config.json", "1_Pooling", "2_Dense", "3_Dense", "4_Normalize")


def sentence_transformer(encoder: FinetuneEncoder, folder: str | Path):
    """A ``SentenceTransformer`` equal to ``encoder`` (backbone read from ``folder``, where
    ``encoder`` was saved; head weights copied): Transformer -> Pooling -> [Dense (ReLU) ->
    Dense] -> Normalize, on the CPU."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import (Dense, Normalize, Pooling,
                                                                    Transformer)

    mods: list[nn.Module] = [Transformer(str(folder), max_seq_length=encoder.max_length),
                             Pooling(encoder.hidden_size, encoder.pooling)]
    if encoder.proj_dim:  # head = Linear, ReLU, Linear
        for lin, act in ((encoder.head[0], nn.ReLU()), (encoder.head[2], nn.Identity())):
            mods.append(Dense(lin.in_features, lin.out_features, activation_function=act,
                              init_weight=lin.weight.detach().clone(),
                              init_bias=lin.bias.detach().clone()))
    mods.append(Normalize())
    return SentenceTransformer(modules=mods, device="cpu")


def export_sentence_transformers(folder: str | Path, encoder: FinetuneEncoder | None = None) -> Path:
    """Add the ``sentence-transformers`` module files (:data:`ST_FILES`, module docstring)
    to a saved encoder folder; the backbone, tokenizer and head files stay as they are.

    Args:
        folder: a :meth:`FinetuneEncoder.save` folder.
        encoder: the encoder saved there (default: loaded from ``folder``).

    Returns:
        ``folder``.

    Raises:
        FileNotFoundError: ``folder`` is not a saved encoder.
    """
    folder = Path(folder)
    encoder = FinetuneEncoder.load(folder) if encoder is None else encoder
    model = sentence_transformer(encoder, folder)
    with tempfile.TemporaryDirectory(dir=folder.parent) as tmp:
        model.save(tmp)
        for name in ST_FILES:
            src = Path(tmp) / name
            if src.is_dir():
                shutil.copytree(src, folder / name, dirs_exist_ok=True)
            elif src.exists():
                shutil.copy2(src, folder / name)
    return folder
