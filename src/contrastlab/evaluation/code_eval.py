"""Test evaluation of one trained code-retrieval variant (stages ``evaluate_code@<v>`` and
``default_code@<v>``; callable from a notebook): every seed's predictions for the test
signatures ranked against every body of the corpus with FAISS (inner product on
L2-normalised vectors), Rank@k and MRR per seed and their means.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..data.code_inputs import load_code_data
from ..io import read_json
from ..models.code_student import checkpoint_path, load_student, predict, prepare_targets
from ..utils import pick_device, set_cpu_threads
from .retrieval import build_index, rank_at_k_curve, rank_metrics, true_ranks

__all__ = ["evaluate_variant"]


def evaluate_variant(code, models_dir: str | Path, splits: str | Path,
                     teacher: str | Path) -> tuple[dict, list[dict], pd.DataFrame, np.ndarray]:
    """Evaluate the checkpoints of ``models_dir`` (``summary.json`` + ``seed<k>.safetensors``).

    Args:
        code: the ``code`` params section. models_dir: one variant's model folder.
        splits, teacher: ``splits.parquet`` and the teacher-states folder.

    Returns:
        ``(out, per_seed, ranks, curve)``: the metrics JSON (means over seeds of Rank@1/5/10
        as fractions, MRR, median rank, mean cosine, validation Rank@10, best epoch, corpus
        and query counts, the variant's lr / temperature / residual / tuned, ``per_seed``);
        the per-seed metrics; the per-query test ranks (``id, repo, seed, rank``, 1 = first);
        the mean Rank@k curve for k = 1..``code.evaluate.k_max``.

    Raises:
        FileNotFoundError: a checkpoint or an input is missing.
    """
    set_cpu_threads(code.train.threads)
    data, _ = load_code_data(splits, teacher)
    targets = prepare_targets(data, code.target.centre, code.target.whiten_eps)
    models = Path(models_dir)
    summary = read_json(models / "summary.json")
    dev = pick_device(code.evaluate.device)
    test = data.rows("test")
    index = build_index(targets.corpus, code.evaluate.device)
    per_seed, rank_rows, curves = [], [], []
    for s in summary["seeds"]:
        student = load_student(checkpoint_path(models, s["seed"]), dev)
        pred = predict(student, data, test, dev)
        ranks = true_ranks(pred, targets.corpus, test, code.evaluate.k_max, index=index)
        m = rank_metrics(ranks)
        m["mean_cosine"] = float((pred * targets.corpus[test]).sum(-1).mean())
        m.update(seed=int(s["seed"]), best_epoch=int(s["best_epoch"]),
                 epochs_run=int(s["epochs_run"]), val_rank_at_10=float(s["best_val_rank_at_10"]))
        per_seed.append(m)
        rank_rows.append(pd.DataFrame({"id": test, "repo": data.repo[test], "seed": s["seed"],
                                       "rank": ranks}))
        curves.append(rank_at_k_curve(ranks, code.evaluate.k_max))
    keys = ["rank_at_1", "rank_at_5", "rank_at_10", "mrr", "median_rank", "mean_cosine",
            "val_rank_at_10", "best_epoch"]
    out = {k: float(np.mean([m[k] for m in per_seed])) for k in keys}
    out.update(corpus_size=int(len(targets.corpus)), n_queries=int(len(test)),
               n_seeds=len(per_seed), chance_rank_at_10=10.0 / len(targets.corpus),
               loss=summary["loss"],
               lr=summary["lr"], temperature=summary["temperature"],
               residual=summary["residual"], tuned=summary["tuned"],
               centre=code.target.centre, per_seed=per_seed)
    return out, per_seed, pd.concat(rank_rows), np.mean(curves, 0)
