"""Loading the code track's stage inputs: teacher states with their split
(:class:`~contrastlab.models.code_student.CodeData`) and the signature and body texts, in
function-id order, shared by the code track's training and evaluation stages."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..models.code_student import CodeData
from .teacher_states import load_teacher_states

__all__ = ["load_code_data", "load_code_texts"]


def load_code_data(splits: str, teacher: str) -> tuple[CodeData, int]:
    """Teacher states + split of every function, rows in id order (the texts are not read
    here: :func:`load_code_texts`).

    Args:
        splits: ``splits.parquet`` (``id``, ``split``, optional ``dup_group``/``repo_group``).
        teacher: the teacher-states folder (``contrastlab.data.teacher_states``).

    Returns:
        ``(CodeData, hidden size of the teacher)``.

    Raises:
        ValueError: the states' ids differ from the split's (rerun ``teacher_states``).
    """
    st = load_teacher_states(Path(teacher))
    sp = pd.read_parquet(splits).sort_values("id")
    ids = st["ids"].numpy()
    if len(ids) != len(sp) or (sp["id"].to_numpy() != ids).any():
        raise ValueError(f"{teacher}: teacher states do not match {splits} (rerun teacher_states)")
    dup = sp["dup_group"].to_numpy() if "dup_group" in sp else np.arange(len(sp))
    repo = sp["repo_group"].to_numpy() if "repo_group" in sp else sp["repo"].to_numpy()
    data = CodeData(st["sig_states"], st["sig_mask"], st["body_emb"], sp["split"].to_numpy(),
                    np.asarray(dup, dtype=np.int64), repo)
    return data, int(st["index"]["hidden_size"])


def load_code_texts(functions: str, teacher: str) -> tuple[list[str], list[str]]:
    """``(signatures, bodies)`` of every function in id order (the teacher states' order).

    Raises:
        ValueError: ``functions`` and the teacher states list different ids.
    """
    fn = pd.read_parquet(functions, columns=["id", "signature", "body"]).sort_values("id")
    ids = load_teacher_states(Path(teacher))["ids"].numpy()
    if len(fn) != len(ids) or (fn["id"].to_numpy() != ids).any():
        raise ValueError(f"{functions} does not match {teacher} (rerun teacher_states)")
    return fn["signature"].tolist(), fn["body"].tolist()
