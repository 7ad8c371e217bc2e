"""What ``train_biencoder@<row>`` writes: metrics, per-query ranks, the Rank@k curve, the
training curve, every seed's embeddings (for the BM25 fusions) and the query index.

The metrics JSON has the keys of the code table's trained rows plus ``title``, ``trainer``,
``layers``, ``steps``, ``batch_size`` (per process), ``nproc``, ``index`` (``faiss-cpu
IndexFlatIP`` or ``faiss-gpu IndexFlatIP``) and the training tokens per seed; no wall time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

__all__ = ["row_title", "row_metrics", "write_rank_files", "write_row_outputs"]

#: The registry entries this module reads (a row's loss title): the retrieval losses only, so
#: adding a loss of another track leaves ``train_biencoder`` up to date (scripts/stage_deps.py).
LOSS_NEEDS = ("targets",)


def row_title(be, row) -> str:
    """Report title of a row, from its declaration (trainer, loss, trained layers, towers)."""
    from ..losses import get_spec

    what = ("every layer" if be.layers == "all" else  # not a loss name
            f"top {be.layers} layer{'s' if be.layers != 1 else ''}")
    if row.trainer == "sentence_transformers":
        return f"Bi-encoder fine-tuned by sentence-transformers (MNRL), {what}"
    towers = "shared tower" if be.towers == "shared" else "separate towers"
    return f"Bi-encoder fine-tuned, {get_spec(row.loss).title}, {what}, {towers}"


def row_metrics(be, name: str, res: dict[str, Any], pairs, tuned: bool) -> dict[str, Any]:
    """The metrics JSON of a row (module docstring) from :func:`contrastlab.biencoder.run.run_row`."""
    from ..distributed import world_size
    from ..evaluation.retrieval import rank_metrics

    row = res["row"]
    keys = ("rank_at_1", "rank_at_5", "rank_at_10", "mrr", "median_rank")
    per = [{**rank_metrics(r), "seed": inf["seed"], "val_rank_at_10": float(np.mean(v <= 10)),
            "tokens": int(inf["tokens"]), "final_temperature": float(inf["temperature"])}
           for r, v, inf in zip(res["ranks"]["test"], res["ranks"]["val"], res["info"])]
    n = len(pairs.ids)
    m = {k: float(np.mean([p[k] for p in per])) for k in keys}
    m.update(val_rank_at_10=float(np.mean([p["val_rank_at_10"] for p in per])), per_seed=per,
             n_seeds=len(per), corpus_size=n, n_queries=int(len(pairs.rows("test"))),
             chance_rank_at_10=10.0 / n, variant=name, title=row_title(be, row),
             trainer=row.trainer, loss=row.loss, lr=float(row.lr), temperature=float(row.temperature),
             learn_temperature=bool(row.learn_temperature), residual=False, tuned=bool(tuned),
             layers=be.layers, towers=be.towers if row.trainer == "contrastlab" else "shared",
             steps=be.steps, batch_size=be.batch_size, max_length=be.max_length, model=be.model,
             index=res.get("index", "faiss-cpu IndexFlatIP"), nproc=world_size())
    return m


def write_rank_files(name: str, res: dict[str, Any], pairs, data_dir, k_max: int = 100) -> None:
    """``<data_dir>/<name>_ranks.csv`` (``id, repo, seed, rank``: every seed's test ranks) and
    ``<name>_rank_curve.csv`` (Rank@k for k = 1..k_max, mean over seeds), atomically, from
    ``res["ranks"]["test"]`` ``[S, Qt]`` and ``res["info"]`` (each with its ``seed``)."""
    from ..evaluation.retrieval import rank_at_k_curve
    from ..io import write_csv

    te = pairs.rows("test")
    ranks = pd.concat([pd.DataFrame({"id": pairs.ids[te], "repo": pairs.repo[te], "seed": inf["seed"],
                                     "rank": r}) for r, inf in zip(res["ranks"]["test"], res["info"])])
    write_csv(Path(data_dir) / f"{name}_ranks.csv", ranks)
    curve = np.mean([rank_at_k_curve(r, k_max) for r in res["ranks"]["test"]], axis=0)
    write_csv(Path(data_dir) / f"{name}_rank_curve.csv",
              pd.DataFrame({"k": np.arange(1, k_max + 1), "rank_at_k": curve}))


def write_row_outputs(be, name: str, res: dict[str, Any], pairs, tuned: bool, *, metrics_dir,
                      data_dir, plots_dir, models_dir, k_max: int = 100) -> dict[str, Any]:
    """Write every output of the row atomically; returns the metrics."""
    from ..io import save_safetensors, write_csv, write_json
    from .index import write_code_index

    m = row_metrics(be, name, res, pairs, tuned)
    write_json(Path(metrics_dir) / f"{name}.json", m)
    write_rank_files(name, res, pairs, data_dir, k_max)
    rows = [{"seed": inf["seed"], "step": s, "loss": lo, "temperature": t}
            for inf in res["info"] if inf["curve"]
            for s, lo, t in zip(inf["curve"]["step"], inf["curve"]["loss"], inf["curve"]["temperature"])]
    write_csv(Path(plots_dir) / f"{name}.csv",
              pd.DataFrame(rows, columns=["seed", "step", "loss", "temperature"]))
    out = Path(models_dir) / name
    save_safetensors(out / "embeddings.safetensors",
                     {"sig": res["emb"]["sig"].contiguous(), "body": res["emb"]["body"].contiguous(),
                      "sig_rows": torch.as_tensor(res["sig_rows"]),
                      "seeds": torch.as_tensor([inf["seed"] for inf in res["info"]])})
    sig_enc, _ = res["models"][0]
    write_code_index(out / "index", res["emb"]["body"][0], pairs.meta, sig_enc,
                     {"row": name, "seed": res["info"][0]["seed"], "title": m["title"]})
    return m
