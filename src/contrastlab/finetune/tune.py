"""Tuning of one fine-tuning row under the shared protocol (stage ``tune_finetune@<row>``):
:func:`run_tuning`.

``finetune.tune.trials`` trials of the row's search space (:func:`row_space`), Hyperband
pruning after each seed, trial 0 the declared configuration. A trial trains one run per seed of
``finetune.tune.seeds`` and scores the mean best validation retrieval mAP (standard error
stored). Only split (a)'s training and validation rows are read. Rows without training
(``frozen``, ``tfidf``) are not tuned: a note is written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..errors import InputError, UnknownNameError
from ..io import write_csv, write_json
from ..params.finetune import (  # UNTRAINED_ROWS re-exported
    FINETUNE_VARIANTS, ROW_METHOD, TUNABLE, UNTRAINED_ROWS, FinetuneParams)
from ..tracking import stage_run
from ..tuning import (SearchDim, TuneResult, read_tuned, run_study, seed_mean, study_history,
                      tune_kwargs, write_tuned)
from .data import label_matrix, label_names
from .run import ALL_VARIANTS, load_cache, train_seed

__all__ = ["run_tuning", "row_space", "apply_tuned", "load_tuned", "TUNED_ROWS", "UNTRAINED_ROWS"]

#: Rows that are tuned: every fine-tuning variant and the ``head`` baseline.
TUNED_ROWS = tuple(v for v in ALL_VARIANTS if v not in UNTRAINED_ROWS)


def row_space(ft, row: str) -> dict[str, SearchDim]:
    """The search space of ``row``: ``ft.tune.search`` without ``temperature`` for a variant
    without a loss (``loss: null`` in the variant table: the BCE classifier has none) and without ``lr_encoder`` when no encoder block is trained
    (the ``frozen_head`` row, or ``ft.layers == 0``); empty for the untrained rows.

    Raises:
        UnknownNameError: not a row of the track.
    """
    if row in UNTRAINED_ROWS:
        return {}
    if row not in TUNED_ROWS:
        raise UnknownNameError(f"unknown fine-tuning row {row!r}; known: "
                               f"{', '.join(TUNED_ROWS + UNTRAINED_ROWS)}")
    space = dict(ft.tune.search)
    if row in FINETUNE_VARIANTS and FINETUNE_VARIANTS[row][0] is None:  # no loss: the BCE classifier
        space.pop("temperature", None)
    if ROW_METHOD.get(row) == "frozen_head" or ft.layers == 0:
        space.pop("lr_encoder", None)
    return space


def apply_tuned(ft, choices: dict[str, Any]):
    """``ft`` with a study's ``choices`` (e.g. :func:`contrastlab.tuning.read_tuned`) applied,
    revalidated by the schema.

    Raises:
        ValueError: a choice that the schema rejects or that is not a tunable field.
    """
    bad = sorted(set(choices) - set(TUNABLE))
    if bad:
        raise ValueError(f"tuned choices {bad} are not tunable fine-tuning params ({', '.join(TUNABLE)})")
    # the fields only: a role (index_variant, a computed field) is not a params key
    return FinetuneParams(**{**ft.model_dump(exclude=set(FinetuneParams.model_computed_fields)),
                             **choices})


def load_tuned(ft, path: str | Path | None):
    """``ft`` with the choices of the tuned JSON at ``path`` applied (``None``: ``ft``).

    Raises:
        FileNotFoundError, ValueError: as :func:`contrastlab.tuning.read_tuned`.
    """
    return ft if path is None else apply_tuned(ft, read_tuned(path))


def run_tuning(ft, row: str, df: pd.DataFrame, cache: dict | None, tuned_dir: str | Path,
               history_dir: str | Path, journal_dir: str | Path) -> TuneResult | None:
    """Tune ``row`` of the ``finetune`` params ``ft`` on the variants table ``df``
    (``finetune_data``) with the lower-layer ``cache`` tensors (``finetune_cache``).

    Writes ``<tuned_dir>/<row>.json`` (read by ``finetune_encoder@<row>``),
    ``<history_dir>/<row>.csv`` (trial, state, value, best so far, se, one column per
    hyperparameter) and the study journal ``<journal_dir>/<row>/journal.log`` (an interrupted
    study resumes); for an untrained row, a note with no choices and ``study.json``.

    Returns:
        The :class:`contrastlab.tuning.TuneResult`, or ``None`` for an untrained row.

    Raises:
        UnknownNameError: not a row of the track.
        contrastlab.errors.InputError: the cache is missing for a trained row.
    """
    space = row_space(ft, row)
    out_dir = Path(journal_dir) / row
    t = ft.tune
    if row in UNTRAINED_ROWS:
        note = "no training: nothing to tune"
        write_json(out_dir / "study.json", {"study": None, "variant": row, "note": note})
        write_json(Path(tuned_dir) / f"{row}.json", {"track": "finetune", "variant": row,
                                                    "params": {}, "note": note})
        write_csv(Path(history_dir) / f"{row}.csv",
                  pd.DataFrame(columns=["trial", "state", "value", "best_so_far", "se"]))
        return None
    if cache is None:
        raise InputError(f"tuning {row!r} needs the lower-layer cache (finetune_cache)")
    base = load_cache(cache)
    problems = df["problem"].astype(str).to_numpy()
    tiers = df["tier"].astype(str).to_numpy()
    split = df["split"].astype(str).to_numpy()
    y = label_matrix(problems, tiers, label_names(problems))
    keys = np.array([f"{a}|{b}" for a, b in zip(problems, tiers)], dtype=object)
    tr, va = np.flatnonzero(split == "train"), np.flatnonzero(split == "val")
    if not len(va):
        raise InputError("tuning needs validation rows (finetune.data.val_fraction > 0)")
    fixed = {"row": row, "tune_seeds": list(t.seeds), **ft.model_dump(mode="json", exclude={
        "tune", "seeds", "variants", "index_variant", "eval", "device", "nproc", *space})}
    default = {k: getattr(ft, k) for k in space}

    def objective(choices: dict, report=None):
        cfg = apply_tuned(ft, choices)

        def score(seed: int) -> float:
            _, _, r = train_seed(cfg, base, row, seed, y=y, problems=problems, keys=keys,
                                 train_idx=tr, val_idx=va, device=ft.device)
            return max(r.curve["val_map"])
        return seed_mean(t.seeds, score, report)

    with stage_run("finetune", f"tune_finetune@{row}", {"variant": row, **fixed}) as tracker:
        res = run_study(track="finetune", variant=row, space=space, objective=objective,
                        out_dir=out_dir, fixed=fixed, tracker=tracker, default=default,
                        **tune_kwargs(t))
    write_tuned(Path(tuned_dir) / f"{row}.json", res, track="finetune", variant=row,
                objective="val_map", space=space, n_trials=t.trials)
    hist = study_history(track="finetune", variant=row, space=space, out_dir=out_dir,
                         storage=t.storage, fixed=fixed)
    write_csv(Path(history_dir) / f"{row}.csv", hist)
    return res
