"""A code variant's settings (tuned choices over params) and its MLflow params, shared by the
code stages. The stage inputs (teacher states with their split, the texts) are loaded by
:mod:`contrastlab.data.code_inputs`."""

from __future__ import annotations

from pathlib import Path

from ..tuning import read_tuned

__all__ = ["variant_settings", "run_params"]


def variant_settings(code, variant: str, tuned: Path | None) -> dict:
    """lr / temperature / residual of a variant (tuned file > variant > code.train)."""
    v = code.variants[variant]
    out = {"lr": v.lr if v.lr is not None else code.train.lr,
           "temperature": v.temperature if v.temperature is not None else code.train.init_temperature,
           "residual": v.residual, "tuned": False}
    if tuned is not None and tuned.exists():
        chosen = read_tuned(tuned)  # empty for a variant without a search space (not tuned)
        out.update({k: float(x) for k, x in chosen.items() if k in ("lr", "temperature")})
        out["tuned"] = bool(chosen)
    return out


def run_params(variant: str, loss: str, cfg: dict) -> dict:
    """The variant's MLflow params, identical in ``train_code`` and ``evaluate_code`` (the
    look-up key of the variant's one run): loss, lr, temperature, residual, tuned."""
    return {"variant": variant, "loss": loss, "lr": float(cfg["lr"]),
            "temperature": float(cfg["temperature"]), "residual": bool(cfg["residual"]),
            "tuned": bool(cfg["tuned"])}
