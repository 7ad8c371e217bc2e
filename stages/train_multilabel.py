"""DVC stage ``train_multilabel@<dataset>-<loss>``: two-phase training + test evaluation.

For every seed in ``multilabel.seeds`` (run in ``multilabel.train.workers`` parallel worker
processes): contrastive phase with registry loss ``<loss>`` (or the BCE baseline for
``loss=bce``), classifier phase on the frozen encoder, then micro-F1 / macro-F1 (threshold
``train.threshold``) / mAP / precision@k on the test split (and the kNN problem x tier
purity for humaneval). Training and evaluation share a stage so the default track fits its
CPU budget (one process start per variant instead of two).

Outputs: ``reports/metrics/multilabel/<dataset>_<loss>.json`` (flat: mean, ``_std``,
``_seed<s>``; no wall times), ``reports/plots/multilabel/<dataset>_<loss>.csv`` (epoch, loss
mean/std over seeds, per-seed loss, classifier-phase BCE). MLflow run
``train_multilabel@<dataset>-<loss>`` with per-epoch metrics and ``time_s``, which also goes
to ``reports/timings/multilabel/<dataset>_<loss>.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from contrastlab.cli import run_stage
from contrastlab.errors import InputError, UnknownNameError
from contrastlab.io import write_csv, write_json
from contrastlab.params import load_params
from contrastlab.timings import write_timing
from contrastlab.tracking import stage_run
from contrastlab.training.multilabel import TrainConfig, run_seeds, summarize


def make_config(p, dataset: str, loss: str, encoder: str) -> TrainConfig:
    """TrainConfig from ``multilabel.train`` + ``multilabel.data.<dataset>`` overrides +
    ``multilabel.variants.<loss>``."""
    ml = p.multilabel
    t, d, v = ml.train, ml.data[dataset], ml.variants[loss]
    return TrainConfig(
        loss=loss, temperature=v.temperature, loss_kwargs=dict(v.kwargs), encoder=encoder, hidden=list(t.hidden),
        enc_dim=t.enc_dim, proj_dim=t.proj_dim, dropout=t.dropout,
        batch_size=d.batch_size or t.batch_size, epochs=d.epochs or t.epochs, lr=t.lr,
        weight_decay=t.weight_decay, warmup=t.warmup, clf_epochs=t.clf_epochs, clf_lr=t.clf_lr,
        threshold=t.threshold, precision_at=list(d.precision_at), knn_k=t.knn_k,
        threads=t.threads_per_worker, device=t.device)


def _log_history(tracker, hist: np.ndarray, results) -> None:
    """Per-epoch training loss (mean and per seed, ``step`` = epoch) in ONE MLflow batch:
    one database transaction instead of one per epoch."""
    if not tracker.active:
        return
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    ts = int(time.time() * 1000)
    ms = []
    for e in range(hist.shape[1]):
        ms.append(Metric("loss", float(hist[:, e].mean()), ts, e + 1))
        ms += [Metric(f"loss_seed{r.seed}", float(r.history[e]), ts, e + 1) for r in results]
    client = MlflowClient()
    for i in range(0, len(ms), 1000):  # MLflow's batch limit
        client.log_batch(tracker.run_id, metrics=ms[i:i + 1000])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--loss", required=True)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--data-dir", default="data/multilabel")
    ap.add_argument("--metrics-dir", default="reports/metrics/multilabel")
    ap.add_argument("--plots-dir", default="reports/plots/multilabel")
    args = ap.parse_args(argv)
    p = load_params(args.params)
    ml = p.multilabel
    ds, loss = args.dataset, args.loss
    if ds not in ml.data:
        raise UnknownNameError(f"{args.params}: multilabel.data has no entry {ds!r}")
    if loss not in ml.variants:
        raise UnknownNameError(f"{args.params}: multilabel.variants has no entry {loss!r}")
    if loss != "bce":
        from contrastlab.losses import get_spec

        if get_spec(loss).needs != "multilabels":
            raise InputError(f"loss {loss!r} is not a multi-label loss (needs={get_spec(loss).needs})")
        from contrastlab.training.multilabel import resolve_loss

        try:
            resolve_loss(loss, dict(ml.variants[loss].kwargs))
        except ValueError as e:
            raise InputError(f"{args.params}: multilabel.variants.{loss}.kwargs: {e}") from None
    src = Path(args.data_dir) / ds
    meta_path = src / "meta.json"
    if not meta_path.exists():
        raise FileNotFoundError(f"{meta_path}: missing (run build_multilabel@{ds} first)")
    meta = json.loads(meta_path.read_text())
    from safetensors.numpy import load_file

    data = load_file(str(src / "data.safetensors"))
    cfg = make_config(p, ds, loss, meta["encoder"])
    stage = f"train_multilabel@{ds}-{loss}"
    logged = {"dataset": ds, "loss": loss, "seeds": ml.seeds, "train": ml.train,
              "data": ml.data[ds], "variant": ml.variants[loss]}
    with stage_run("multilabel", stage, logged) as tracker:
        t0 = time.perf_counter()
        results = run_seeds(data, cfg, ml.seeds, workers=ml.train.workers,
                            progress=lambda r: print(f"{stage} seed {r.seed}: "
                                                     + ", ".join(f"{k}={v:.4f}" for k, v in r.metrics.items()
                                                                 if k != "map_labels_skipped")
                                                     + f" ({r.time_s:.1f}s)", flush=True))
        wall = time.perf_counter() - t0
        out = summarize(results)
        write_timing("multilabel", f"{ds}_{loss}", {"time_s": round(wall, 3)})
        out["threshold"] = cfg.threshold
        out["temperature"] = cfg.temperature if loss != "bce" else 0.0
        out["epochs"] = cfg.epochs
        out["n_train"] = int(len(data["x_train"]))
        hist = np.array([r.history for r in results])  # [S, E]
        rows = {"epoch": np.arange(1, hist.shape[1] + 1), "loss": hist.mean(0),
                "loss_std": hist.std(0, ddof=1) if len(results) > 1 else np.zeros(hist.shape[1])}
        for r in results:
            rows[f"loss_seed{r.seed}"] = r.history
        clf = [r.clf_history for r in results]
        if clf[0]:
            c = np.array(clf).mean(0)
            rows["clf_bce"] = np.pad(c, (0, max(0, hist.shape[1] - len(c))), constant_values=np.nan)[: hist.shape[1]]
        import pandas as pd

        _log_history(tracker, hist, results)
        tracker.log_metrics({k: v for k, v in out.items() if isinstance(v, (int, float))}
                            | {"time_s": round(wall, 3)})
        write_csv(Path(args.plots_dir) / f"{ds}_{loss}.csv", pd.DataFrame(rows))
        write_json(Path(args.metrics_dir) / f"{ds}_{loss}.json", out)
    print(f"{stage}: micro-F1 {out['micro_f1']:.4f} ± {out['micro_f1_std']:.4f}, macro-F1 "
          f"{out['macro_f1']:.4f} ± {out['macro_f1_std']:.4f}, mAP {out['map']:.4f} ± {out['map_std']:.4f} "
          f"({wall:.1f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(run_stage(main))
