"""The code track's student and what it needs besides training: rows (:class:`CodeData`), the
training-fitted target space (:class:`Targets`, :func:`prepare_targets`), the model
(:class:`CodeStudent`), inference (:func:`predict`) and byte-reproducible checkpoints
(:func:`save_student`, :func:`load_student`). Here, not in training, so that evaluation does
not import training (tests/foundation/test_imports.py).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .code_baselines import TargetSpace, pooled_signature
from .sig_predictor import SigPredictor

__all__ = ["CodeData", "Targets", "prepare_targets", "CodeStudent", "predict", "trim_padding", "is_contrastive",
           "CHECKPOINT_SUFFIX", "checkpoint_path", "save_student", "read_checkpoint",
           "load_student"]

#: ``needs`` of the registry losses this module looks up (read by scripts/stage_deps.py).
LOSS_NEEDS = ("targets", "regression")


def is_contrastive(loss: str) -> bool:
    """A retrieval loss with in-batch negatives (registry ``needs == "targets"``)."""
    from ..losses import get_spec

    return get_spec(loss).needs == "targets"


@dataclass
class CodeData:
    """Everything the loop needs, rows in function-id order.

    ``sig_states`` fp16 ``[N, T, H]``, ``sig_mask`` bool ``[N, T]``, ``body_emb`` fp32
    ``[N, H]`` (raw teacher space), ``split`` array of ``train|val|test|excluded`` ``[N]``,
    ``dup_group`` int64 ``[N]`` near-duplicate group ids (never each other's hard
    negatives), ``repo`` ``[N]`` repository (group) of each row (bootstrap clusters).
    """

    sig_states: Tensor
    sig_mask: Tensor
    body_emb: Tensor
    split: np.ndarray
    dup_group: np.ndarray
    repo: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def rows(self, split: str) -> np.ndarray:
        return np.nonzero(self.split == split)[0]


@dataclass
class Targets:
    """Target space fitted on training rows only.

    ``body`` ``[N, H]`` target-space bodies (unnormalised, the regression targets),
    ``corpus`` ``[N, H]`` the same L2-normalised (the retrieval corpus), ``body_space`` and
    ``sig_space`` the fitted maps (bodies; pooled signature states, for the residual).
    """

    body: Tensor
    corpus: Tensor
    body_space: TargetSpace
    sig_space: TargetSpace


def prepare_targets(data: CodeData, centre: str = "mean", eps: float = 1e-3) -> Targets:
    """Fit the target space on the training rows and map every body (and pooled signature).

    Raises:
        ValueError: no training rows, or unknown ``centre``.
    """
    tr = data.rows("train")
    if len(tr) == 0:
        raise ValueError("no training functions to fit the target space on (check the split)")
    trt = torch.as_tensor(tr)
    body_space = TargetSpace.fit(data.body_emb[trt].float(), centre, eps)
    pooled_tr = pooled_signature(data.sig_states[trt], data.sig_mask[trt])
    sig_space = TargetSpace.fit(pooled_tr, centre, eps)
    body = body_space(data.body_emb.float())
    return Targets(body, F.normalize(body, dim=-1), body_space, sig_space)


class CodeStudent(nn.Module):
    """SigPredictor plus, for InfoNCE, the learnable log-temperature (init
    ``log(init_temperature)``) and, when ``residual``, the zero-shot base map.

    ``forward(states [B, T, H], mask [B, T]) -> [B, H]`` float32 (L2-normalised for the
    contrastive losses).
    """

    def __init__(self, hidden_size: int, loss: str, d_model: int, n_layers: int, n_heads: int,
                 ffn: int, dropout: float, init_temperature: float = 0.07,
                 residual: bool = False, sig_space: TargetSpace | None = None):
        super().__init__()
        self.loss_name = loss
        self.residual = bool(residual)
        self.predictor = SigPredictor(hidden_size, d_model, n_layers, n_heads, ffn, dropout)
        if is_contrastive(loss):
            self.log_temperature = nn.Parameter(torch.tensor(math.log(init_temperature)))
        if self.residual:
            if sig_space is None:
                raise ValueError("a residual student needs the signature space (sig_space)")
            nn.init.zeros_(self.predictor.out.weight)
            nn.init.zeros_(self.predictor.out.bias)
            self.register_buffer("sig_mean", sig_space.mean.clone())
            self.register_buffer("sig_proj", sig_space.proj.clone())
            self.sig_kind = sig_space.kind

    @property
    def normalize(self) -> bool:
        return is_contrastive(self.loss_name)

    def forward(self, states: Tensor, mask: Tensor) -> Tensor:
        y = self.predictor(states, mask, normalize=False)
        if self.residual:
            m = mask.unsqueeze(-1).float()
            base = (states.float() * m).sum(1) / m.sum(1).clamp_min(1.0) - self.sig_mean
            if self.sig_kind == "whiten":
                base = base @ self.sig_proj
            y = y + base
        return F.normalize(y, dim=-1) if self.normalize else y


def trim_padding(states: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
    """Drop padding columns that no row of the batch uses."""
    t = int(mask.sum(1).max().item()) if mask.numel() else 1
    return states[:, :max(1, t)], mask[:, :max(1, t)]


@torch.no_grad()
def predict(model: nn.Module, data: CodeData, rows: np.ndarray, device: torch.device,
            batch_size: int = 256) -> Tensor:
    """L2-normalised predictions ``[len(rows), H]`` (fp32, CPU) in eval mode."""
    was = model.training
    model.eval()
    out = []
    for s in range(0, len(rows), batch_size):
        idx = torch.as_tensor(rows[s:s + batch_size])
        st, mk = trim_padding(data.sig_states[idx], data.sig_mask[idx])
        out.append(F.normalize(model(st.to(device), mk.to(device)).float(), dim=-1).cpu())
    model.train(was)
    return torch.cat(out) if out else torch.zeros((0, data.body_emb.shape[1]))


#: Checkpoint format: safetensors (the weights) with one metadata key holding the rest as
#: sorted JSON, so equal weights give equal bytes (``torch.save`` writes a random
#: serialization id and the temporary file's name into its zip archive).
CHECKPOINT_SUFFIX = ".safetensors"
_META_KEY = "contrastlab"


def checkpoint_path(models_dir: str | Path, seed: int) -> Path:
    """``<models_dir>/seed<seed>.safetensors``: where a variant's seed is saved."""
    return Path(models_dir) / f"seed{int(seed)}{CHECKPOINT_SUFFIX}"


def save_student(path: str | Path, student: CodeStudent, *, hidden_size: int, model_p,
                 epoch: int, val: dict[str, Any]) -> None:
    """Write ``student`` atomically as a byte-reproducible safetensors checkpoint.

    Tensors: the student's ``state_dict`` (float32 weights; a residual student's
    ``sig_mean``/``sig_proj`` buffers included). Metadata (one key, sorted JSON): ``loss``,
    ``hidden_size``, ``model`` (``model_p`` as a dict), ``residual``, ``sig_kind``, ``epoch``
    and the validation row ``val`` (wall times dropped, NaN as null).
    """
    from ..io import save_safetensors

    meta = {"loss": student.loss_name, "hidden_size": int(hidden_size),
            "model": model_p.model_dump() if hasattr(model_p, "model_dump") else dict(model_p),
            "residual": bool(student.residual),
            "sig_kind": getattr(student, "sig_kind", None), "epoch": int(epoch),
            "val": {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                    for k, v in val.items() if k != "epoch_time_s"}}
    tensors = {k: v.detach().cpu() for k, v in student.state_dict().items()}
    save_safetensors(path, tensors, metadata={_META_KEY: json.dumps(meta, sort_keys=True)})


def read_checkpoint(path: str | Path) -> tuple[dict[str, Tensor], dict[str, Any]]:
    """``(state_dict, metadata)`` of a checkpoint written by :func:`save_student`.

    Raises:
        FileNotFoundError: no such file.
        ValueError: the file is not a contrastlab code checkpoint.
    """
    from safetensors import SafetensorError, safe_open

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no checkpoint (run train_code first)")
    try:
        with safe_open(str(path), framework="pt") as f:
            meta = (f.metadata() or {}).get(_META_KEY)
            sd = {k: f.get_tensor(k) for k in f.keys()}
    except SafetensorError as e:
        raise ValueError(f"{path}: not a safetensors checkpoint ({e})") from e
    if meta is None:
        raise ValueError(f"{path}: safetensors file without contrastlab metadata")
    return sd, json.loads(meta)


def load_student(path: Path, device: torch.device | str = "cpu") -> CodeStudent:
    """Rebuild a :class:`CodeStudent` (eval mode, on ``device``) from a checkpoint written by
    :func:`save_student`. Raises as :func:`read_checkpoint`."""
    sd, ck = read_checkpoint(path)
    m = ck["model"]
    residual = bool(ck.get("residual", False))
    space = TargetSpace(sd["sig_mean"], sd["sig_proj"], ck["sig_kind"]) if residual else None
    st = CodeStudent(ck["hidden_size"], ck["loss"], m["d_model"], m["n_layers"], m["n_heads"],
                     m["ffn"], m["dropout"], residual=residual, sig_space=space)
    st.load_state_dict(sd)
    return st.to(device).eval()
