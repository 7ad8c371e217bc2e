"""DVC stage ``finetune_evaluate``: the comparison table with clustered CIs, and the index.

Reads every variant's per-query arrays (``reports/metrics/finetune/items/<variant>.npz``)
and builds, per split (a: unseen submissions of seen problems; b: unseen problems) and
metric, the table of :func:`contrastlab.finetune.evaluate.table`: means over seeds and
queries, bias-corrected 95 % intervals from a bootstrap that resamples problems (clusters)
and seeds (``n - 1`` of ``n``), the Model Confidence Set of the best, Holm-corrected tests
against the strongest baseline (the baseline row with the best validation kNN problem x tier
purity). Then writes the FAISS index of ``finetune.index_variant`` (first seed) with its
encoder and logs both to MLflow (``mlflow.pytorch`` model + ``index/`` artifacts).

Outputs: ``reports/metrics/finetune/summary.json`` (committed) and ``data/finetune/index/``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from contrastlab.cli import run_stage
from contrastlab.errors import InputError
from contrastlab.finetune.evaluate import BASELINES, table
from contrastlab.finetune.index import log_to_mlflow, write_index
from contrastlab.finetune.encoder import FinetuneEncoder
from contrastlab.io import write_json
from contrastlab.params import load_params
from contrastlab.tracking import variant_run


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--data", default="data/finetune/humaneval/variants.parquet")
    ap.add_argument("--metrics-dir", default="reports/metrics/finetune")
    ap.add_argument("--runs-dir", default="data/finetune/runs")
    ap.add_argument("--index", default="data/finetune/index")
    args = ap.parse_args(argv)
    p = load_params(args.params)
    ft = p.finetune
    df = pd.read_parquet(args.data)
    mdir = Path(args.metrics_dir)
    names = [*ft.variants, *BASELINES]
    items = {}
    for v in names:
        f = mdir / "items" / f"{v}.npz"
        if not f.exists():
            raise InputError(f"{f}: missing; run finetune_encoder@{v} first")
        with np.load(f) as z:
            items[v] = {k: z[k] for k in z.files if k != "seeds"}
    kmax = max(ft.eval.knn_k)
    val_key = f"val/knn{kmax}_pxt"
    val = {v: float(np.mean(items[v][val_key])) for v in names}
    baseline = max(BASELINES, key=lambda b: val[b])
    split = df["split"].to_numpy()
    clusters = {"a": df.loc[split == "test_a", "problem"].astype(str).to_numpy(),
                "b": df.loc[split == "test_b", "problem"].astype(str).to_numpy()}
    from contrastlab.finetune.evaluate import purity_ceiling

    ceil = purity_ceiling(df["problem"].astype(str), df["tier"].astype(str), split, kmax)
    out = {"baseline": baseline, "ceiling": {f"knn{kmax}_pxt": {s: float(c.mean()) for s, c in ceil.items()}}, "baseline_rule": f"best validation kNN@{kmax} problem x tier purity",
           "validation": val, "variants": names, "tables": {}}
    for s in ("a", "b"):
        metrics = sorted({k.split("/", 1)[1] for k in items[names[0]] if k.startswith(f"{s}/")})
        out["tables"][s] = {}
        for m in metrics:
            t = table({v: items[v][f"{s}/{m}"] for v in names}, clusters[s], baseline=baseline,
                      n_resamples=ft.eval.n_resamples, seed=0)
            out["tables"][s][m] = t
    write_json(mdir / "summary.json", out)
    run = Path(args.runs_dir) / ft.index_variant
    from safetensors.torch import load_file

    emb = load_file(str(run / "embeddings.safetensors"))["embeddings"][0]
    enc = FinetuneEncoder.load(run / "model")
    rows = [{"id": str(i), "problem": str(pr), "tier": str(t), "split": str(sp)}
            for i, pr, t, sp in zip(df["id"], df["problem"], df["tier"], df["split"])]
    write_index(args.index, emb, rows, enc, {"variant": ft.index_variant, "seed": ft.seeds[0],
                                             "strip_docstrings": ft.strip_docstrings})
    with variant_run("finetune", "evaluation", {"variants": names, "baseline": baseline},
                     stage="finetune_evaluate") as tracker:
        a = out["tables"]["a"][f"knn{kmax}_pxt"]
        tracker.log_metrics({f"a_knn{kmax}_pxt_{v}": a[v]["mean"] for v in names})
        if tracker.active:
            uri = log_to_mlflow(args.index)
            print(f"finetune_evaluate: MLflow model {uri}")
    a = out["tables"]["a"][f"knn{kmax}_pxt"]
    b = out["tables"]["b"][f"knn{kmax}_pxt"]
    for v in names:
        print(f"{v:>10}: kNN@{kmax} problem x tier  a {a[v]['mean']:.3f} [{a[v]['ci_low']:.3f}, "
              f"{a[v]['ci_high']:.3f}]  b {b[v]['mean']:.3f} [{b[v]['ci_low']:.3f}, {b[v]['ci_high']:.3f}]")
    return 0


if __name__ == "__main__":
    sys.exit(run_stage(main))
