"""Final runs of one graph variant (stages ``train_graph``, ``default_graph``,
``ablate_graph``): every seed trained once on its chosen configuration and scored once on
the test nodes with the linear probe (Velickovic et al., ICLR 2019) and the notebook-style
probe; the accuracy's 95 % CI is the seeds x test nodes bootstrap of
:mod:`contrastlab.evaluation.stats`.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np
import pandas as pd
import torch

from ..data.planetoid import load_planetoid
from ..evaluation.picks import seed_summary
from ..evaluation.stats import accuracy_summary
from ..io import atomic_path, write_csv, write_json
from ..tracking import variant_run
from ..tuning import read_tuned
from .graph import GraphRunConfig, fit_and_probe, graph_run_config

__all__ = ["FinalRuns", "dataset_digest", "seed_cache_file", "train_seed", "run_final",
           "pca_frame", "final_mode", "run_stage_final"]


@dataclass
class FinalRuns:
    """What :func:`run_final` returns: ``metrics`` (the JSON of the stage, floats rounded to
    6 digits), ``test_pred`` (node, y and the predicted class per seed), ``history`` (epoch,
    mean loss and loss per seed) and the first seed's node ``embeddings`` ``[N, D]``."""

    metrics: dict[str, Any]
    test_pred: pd.DataFrame
    history: pd.DataFrame
    embeddings: torch.Tensor


def dataset_digest(root: str | Path, dataset: str) -> str:
    """SHA-256 prefix (16 hex digits) over the raw Planetoid files of ``dataset`` under
    ``root`` (the dataset's identity in MLflow)."""
    h = hashlib.sha256()
    for f in sorted((Path(root) / dataset / "raw").glob("*")):
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def seed_cache_file(cache_dir: str | Path | None, stage: str, cfg: GraphRunConfig, probe,
                    data_path: str | Path, seed: int) -> Optional[Path]:
    """Per-seed result file under ``cache_dir``, keyed by the stage, the whole configuration,
    the probe and the data path (a changed configuration never reads a stale result), or
    ``None`` without a cache."""
    if not cache_dir:
        return None
    key = json.dumps([stage, cfg.flat(), probe.model_dump(), str(data_path), seed],
                     sort_keys=True, default=str)
    h = hashlib.sha256(key.encode()).hexdigest()[:16]
    return Path(cache_dir) / f"{stage.replace('@', '_')}_seed{seed}_{h}.pt"


def train_seed(data, cfg: GraphRunConfig, seed: int, probe, *, cache: Optional[Path] = None,
               desc: str = "", on_epoch=None) -> dict:
    """One seed's :func:`~contrastlab.training.graph.fit_and_probe` result (with test
    predictions and the notebook probe), read from ``cache`` when it exists there, else
    trained (and saved to ``cache`` when given; a cached result without the probe's ``pick``
    is trained again). ``on_epoch(epoch, loss)`` sees every epoch's
    loss, replayed from the cache too."""
    r = torch.load(cache, weights_only=False) if cache is not None and cache.exists() else None
    if r is not None and "pick" in r:
        if on_epoch is not None:
            for ep, val in enumerate(r["losses"], start=1):
                on_epoch(ep, val)
        return r
    r = fit_and_probe(data, cfg, seed, probe, return_pred=True, notebook=True, progress=True,
                      desc=desc, on_epoch=on_epoch)
    if cache is not None:
        with atomic_path(cache, suffix=".pt") as tmp:
            torch.save(r, tmp)
    return r


def run_final(data, cfg: GraphRunConfig, seeds: Sequence[int], probe, *, variant: str,
              stage: str, chosen: dict, tracker=None, cache_dir=None,
              data_path: str | Path = "") -> FinalRuns:
    """Train every seed of ``seeds`` on ``cfg`` and score it once on the test nodes.

    Args:
        data: the PyG ``Data`` (public split masks).
        cfg: the variant's configuration with its chosen hyperparameters.
        seeds: training seeds.
        probe: ``graph.probe`` params.
        variant, stage: names for the metrics, progress lines and the seed cache.
        chosen: the tuned choices (stored in the metrics).
        tracker: a :class:`contrastlab.tracking.Tracker`; each seed gets a nested run with its
            loss curve (step = epoch), accuracies and wall time.
        cache_dir, data_path: see :func:`seed_cache_file`.

    Returns:
        :class:`FinalRuns`.
    """
    test_idx = torch.nonzero(data.test_mask).flatten().numpy()
    y_test = data.y[data.test_mask].numpy()
    preds, test_acc, val_acc, nb_acc, cs, picks = {}, [], [], [], [], []
    hist: dict[str, Any] = {"epoch": list(range(1, cfg.train["epochs"] + 1))}
    emb = None
    for seed in seeds:
        t0 = time.perf_counter()
        cache = seed_cache_file(cache_dir, stage, cfg, probe, data_path, seed)
        if tracker is not None:
            with tracker.seed_run(seed) as st:
                r = train_seed(data, cfg, seed, probe, cache=cache, desc=f"{variant} seed {seed}",
                               on_epoch=lambda ep, val, t=st: t.log_metrics({"loss": val}, step=ep))
                st.log_metrics({"logreg_acc": r["test_acc"], "logreg_val_acc": r["val_acc"],
                                "time_s": time.perf_counter() - t0})
        else:
            r = train_seed(data, cfg, seed, probe, cache=cache, desc=f"{variant} seed {seed}")
        preds[f"seed_{seed}"] = r["test_pred"]
        test_acc.append(r["test_acc"])
        val_acc.append(r["val_acc"])
        nb_acc.append(r["notebook_acc"])
        cs.append(r["C"])
        picks.append(r["pick"])
        hist[f"loss_seed{seed}"] = r["losses"]
        if emb is None:
            emb = r["embeddings"]
        print(f"{stage} seed {seed}: val {r['val_acc']:.4f} test {r['test_acc']:.4f} "
              f"({time.perf_counter() - t0:.1f} s)", flush=True)
    correct = np.stack([preds[f"seed_{s}"] == y_test for s in seeds]).astype(float)
    metrics = {
        "variant": variant, "loss": cfg.loss, "n_seeds": len(seeds), "seeds": list(seeds),
        "n_test": int(len(y_test)), "epochs": cfg.train["epochs"],
        "batch_nodes": cfg.train["batch_nodes"],
        **accuracy_summary(correct),
        "logreg_acc_std": float(np.std(test_acc, ddof=1)) if len(test_acc) > 1 else 0.0,
        "logreg_val_acc_mean": float(np.mean(val_acc)),
        "notebook_acc_mean": float(np.mean(nb_acc)),
        "probe_C": cs,
        "picks": {"C": seed_summary(picks)},
        "logreg_val_acc": val_acc,
        **{f"logreg_acc_seed{s}": a for s, a in zip(seeds, test_acc)},
        "tuned": chosen,
        "config": dict(cfg.flat()),
    }
    if tracker is not None:
        tracker.log_metrics({k: v for k, v in metrics.items()
                             if isinstance(v, float) and "seed" not in k})
    metrics = {k: round(v, 6) if isinstance(v, float) else v for k, v in metrics.items()}
    df = pd.DataFrame(hist)
    df.insert(1, "loss", df[[c for c in df.columns if c.startswith("loss_seed")]].mean(axis=1))
    return FinalRuns(metrics, pd.DataFrame({"node": test_idx, "y": y_test, **preds}),
                     df.round(6), emb)


def pca_frame(embeddings: torch.Tensor, labels, seed: int) -> pd.DataFrame:
    """2-D PCA of ``embeddings`` ``[N, D]`` (float64, ``random_state=0``) with each node's
    class ``label`` and the ``seed`` it came from (the report's embedding figure)."""
    from sklearn.decomposition import PCA

    xy = PCA(n_components=2, random_state=0).fit_transform(embeddings.double().numpy())
    return pd.DataFrame({"pc1": xy[:, 0].round(5), "pc2": xy[:, 1].round(5),
                         "label": np.asarray(labels), "seed": seed})


def final_mode(g, variant: str, tuned_dir: str | Path | None, ablation: bool = False,
               default: bool = False):
    """The runs of stage ``train_graph`` (tuned choices on ``graph.final.seeds``),
    ``default_graph`` (``default``: the declared configuration on ``graph.final.default_seeds``)
    or ``ablate_graph`` (``ablation``: the tuned choices with ``graph.final.ablation_batch_nodes``
    on ``graph.final.ablation_seeds``).

    Returns:
        ``(cfg, chosen, kind, seeds, sub, run_name)``: the configuration, the tuned choices,
        ``train|default|ablate``, the seeds, the output sub-folder and the MLflow run name.

    Raises:
        ValueError: both modes, the mode's seed list is empty (those runs are off), or a
            tuned mode without ``tuned_dir`` (the folder of tune_graph's choices).
    """
    if ablation and default:
        raise ValueError("--ablation and --default exclude each other")
    if tuned_dir is None and not default:
        raise ValueError("the tuned runs need tuned_dir (tune_graph's choices)")
    chosen = {} if default else read_tuned(f"{tuned_dir}/{variant}.json")
    cfg = graph_run_config(g, variant).with_choices(chosen)
    kind, seeds, sub, run_name = "train", g.final.seeds, "", variant
    if default:
        kind, seeds, sub, run_name = "default", g.final.default_seeds, "default/", f"{variant}-default"
    if ablation:
        cfg.train["batch_nodes"] = g.final.ablation_batch_nodes
        kind, seeds, sub, run_name = "ablate", g.final.ablation_seeds, "ablation/", f"{variant}-ablation"
    if not seeds:
        raise ValueError(f"graph.final.{'default_' if default else 'ablation_' if ablation else ''}"
                         "seeds is empty: these runs are off")
    return cfg, chosen, kind, list(seeds), sub, run_name


def run_stage_final(g, variant: str, *, ablation: bool = False, default: bool = False,
                    data_path: str | Path, tuned_dir: str | Path | None,
                    metrics_dir: str | Path, report_data_dir: str | Path, plots_dir: str | Path,
                    seed_cache: str | Path | None = None) -> FinalRuns:
    """One final-runs stage end to end (:func:`final_mode`, :func:`run_final`) and its files.

    Writes (small, committed): ``<metrics_dir>/<sub><variant>.json`` (per-seed accuracies,
    mean and 95 % CI, the chosen hyperparameters), ``<report_data_dir>/<sub><variant>_test_pred.csv``
    (predicted class of every test node per seed, for the paired tests),
    ``<plots_dir>/<sub><variant>.csv`` (loss per epoch) and, for the tuned runs,
    ``<report_data_dir>/<variant>_pca.csv`` (2-D PCA of the first seed's embeddings).
    MLflow: one run with the configuration, the dataset (``log_input``), the history and the
    metrics as artifacts, and a nested run per seed. Wall times go to MLflow and the log only.
    """
    cfg, chosen, kind, seeds, sub, run_name = final_mode(g, variant, tuned_dir, ablation, default)
    torch.set_num_threads(g.threads)
    data, _ = load_planetoid(data_path, g.dataset)
    stage = f"{kind}_graph@{variant}"
    logged = {"variant": variant, "stage": stage, "seeds": seeds, **cfg.flat(),
              **{f"tuned.{k}": v for k, v in chosen.items()}}
    with variant_run("graph", run_name, logged, stage=stage) as tracker:
        tracker.log_dataset(g.dataset, digest=dataset_digest(data_path, g.dataset),
                            source=str(data_path), context="training")
        res = run_final(data, cfg, seeds, g.probe, variant=variant, stage=stage, chosen=chosen,
                        tracker=tracker, cache_dir=seed_cache, data_path=data_path)
        write_json(f"{metrics_dir}/{sub}{variant}.json", res.metrics)
        write_csv(f"{report_data_dir}/{sub}{variant}_test_pred.csv", res.test_pred)
        write_csv(f"{plots_dir}/{sub}{variant}.csv", res.history)
        tracker.log_artifact(f"{plots_dir}/{sub}{variant}.csv", "history")
        tracker.log_artifact(f"{metrics_dir}/{sub}{variant}.json", "metrics")
    if kind == "train":
        write_csv(f"{report_data_dir}/{variant}_pca.csv",
                  pca_frame(res.embeddings, data.y.numpy(), seeds[0]))
    return res
