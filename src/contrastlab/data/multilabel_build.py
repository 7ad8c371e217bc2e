"""Building one multi-label data set as train/validation/test tensors (stage
``build_multilabel@<dataset>``; callable from a notebook): :func:`build_dataset`.

MULAN sets: ARFF + XML -> (optional seeded train subsample) -> validation split carved from
the training set by iterative stratification (``multilabel.train.val_fraction``,
``split_seed``) -> z-scored features (mean/std of the training part).
User data sets (``multilabel.custom.<name>``): ARFF + label XML or CSV/Parquet, same path.
``reuters``: ModApte 90 categories from the raw SGML -> frozen teacher mean states.
``humaneval``: canonical + AST-mutant variants, tiered by sandboxed execution of each
assertion -> frozen teacher mean states of the variant source; per-assertion results are
kept in ``tiers.parquet``.

Outputs: ``data/multilabel/<dataset>/data.safetensors`` (x_train, y_train, x_test, y_test,
and g_train/g_test group ids for humaneval), ``meta.json`` (label names, statistics) and
``reports/data/multilabel/<dataset>_dataset.json`` (statistics for the report).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from ..errors import UnknownNameError
from ..io import save_safetensors, write_json, write_parquet
from ..timings import write_timing
from ..utils import repo_root
from .multilabel import MULAN, label_stats, load_mulan, load_user_dataset, stratified_val_split

__all__ = ["build_dataset", "build_humaneval"]


def _teacher_features(texts: list[str], name: str, max_length: int, batch_size: int = 64) -> np.ndarray:
    from ..models.teacher import TeacherEncoder

    enc = TeacherEncoder(name, layer=None, device="auto", max_length=max_length)
    return enc.encode_mean(texts, batch_size=batch_size).float().numpy()


def build_humaneval(p, out_dir: Path) -> dict:
    """Tier every variant in the sandbox (parallel threads, each one child process)."""
    from concurrent.futures import ThreadPoolExecutor

    import pandas as pd
    from tqdm import tqdm

    from .humaneval import TIERS, load_problems, sandbox_mode, tier_problem

    h = p.multilabel.humaneval
    mode = sandbox_mode(allow_unsandboxed=h.allow_unsandboxed)  # SandboxUnavailable: says why
    probs = load_problems(h.max_problems)
    sandbox = dict(timeout_s=h.timeout_s, assert_timeout_s=min(1.0, h.timeout_s), cpu_s=h.cpu_s,
                   memory_mb=h.memory_mb, fsize_mb=h.fsize_mb, mode=mode)
    with ThreadPoolExecutor(h.workers) as pool:
        jobs = [pool.submit(tier_problem, pr, h.variants_per_problem, h.seed + i, **sandbox)
                for i, pr in enumerate(probs)]
        rows = [r for j in tqdm(jobs, desc="humaneval tiers", mininterval=5) for r in j.result()]
    df = pd.DataFrame(rows)
    write_parquet(out_dir / "tiers.parquet", df)
    rng = np.random.default_rng(h.seed)
    test = np.zeros(len(df), dtype=bool)
    for _, idx in df.groupby("problem").indices.items():
        k = max(1, int(round(h.test_fraction * len(idx))))
        test[rng.permutation(idx)[:k]] = True
    labels = [f"problem_{pr.short_id}" for pr in probs] + [f"tier_{t}" for t in TIERS]
    col = {n: i for i, n in enumerate(labels)}
    y = np.zeros((len(df), len(labels)), dtype=np.uint8)
    y[np.arange(len(df)), [col[f"problem_{x}"] for x in df["problem"]]] = 1
    y[np.arange(len(df)), [col[f"tier_{x}"] for x in df["tier"]]] = 1
    x = _teacher_features(df["source"].tolist(), h.teacher, h.max_length)
    pairs = [f"{a}|{b}" for a, b in zip(df["problem"], df["tier"])]
    gid = {g: i for i, g in enumerate(sorted(set(pairs)))}
    groups = np.array([gid[g] for g in pairs], dtype=np.int64)  # (problem, tier) ids
    from ..metrics import knn_label_purity

    # reference for the trained encoders' knn_purity: the frozen teacher states themselves
    purity = knn_label_purity(x[~test], groups[~test], x[test], groups[test], p.multilabel.train.knn_k)
    return {"x_train": x[~test], "y_train": y[~test], "x_test": x[test], "y_test": y[test],
            "g_train": groups[~test], "g_test": groups[test], "labels": labels,
            "extra": {"knn_purity_teacher": purity,"tiers": df["tier"].value_counts().to_dict(),
                      "canonical_not_pass": int(((df["mutation"] == "canonical") & (df["tier"] != "PASS")).sum()),
                      "status": df["status"].value_counts().to_dict()}}


def build_dataset(p, name: str, out_dir: str | Path, report_dir: str | Path,
                  params_file: str = "params.yaml") -> dict:
    """Build data set ``name`` of ``p.multilabel`` (MULAN, a user data set, ``reuters`` or
    ``humaneval``) into ``out_dir`` (the stage passes ``data/multilabel/<name>``):
    ``data.safetensors`` (``x_*`` float32, ``y_*`` uint8, ``g_*`` group ids for humaneval),
    ``meta.json``, and the report's ``<report_dir>/<name>_dataset.json``.

    Returns:
        The ``meta.json`` content (label names and statistics).

    Raises:
        contrastlab.errors.UnknownNameError: ``name`` has no ``multilabel.data`` entry or is
            not a known data set. FileNotFoundError: its files are missing offline.
    """
    ml = p.multilabel
    if name not in ml.data:
        raise UnknownNameError(f"{params_file}: multilabel.data has no entry {name!r}")
    dp = ml.data[name]
    root = repo_root()  # relative paths are under it; `root / path` keeps an absolute path
    out_dir = Path(out_dir)
    t0 = time.perf_counter()
    extra: dict = {}
    if name in MULAN or name in ml.custom:
        if name in MULAN:
            d = load_mulan(name, root / ml.vendor_root, root / ml.optional_root)
        else:
            d = load_user_dataset(name, ml.custom[name], root)
        arrays = {"x_train": d.x_train, "y_train": d.y_train, "x_test": d.x_test, "y_test": d.y_test}
        labels = d.label_names
        kind = "mlp"
        extra = {"dropped_attributes": d.meta.get("dropped", [])}
    elif name == "reuters":
        from .reuters import modapte_90, read_reuters

        m = modapte_90(read_reuters(root / ml.reuters.raw_dir))
        for split, cap in (("train", dp.max_train), ("test", dp.max_test)):
            if cap and len(m[f"{split}_text"]) > cap:  # subsample before the (slow) teacher pass
                keep = np.sort(np.random.default_rng(0).permutation(len(m[f"{split}_text"]))[:cap])
                m[f"{split}_text"] = [m[f"{split}_text"][i] for i in keep]
                m[f"y_{split}"] = m[f"y_{split}"][keep]
        arrays = {"x_train": _teacher_features(m["train_text"], ml.reuters.teacher, ml.reuters.max_length, ml.reuters.batch_size),
                  "y_train": m["y_train"],
                  "x_test": _teacher_features(m["test_text"], ml.reuters.teacher, ml.reuters.max_length, ml.reuters.batch_size),
                  "y_test": m["y_test"]}
        labels = m["labels"]
        kind = "teacher_head"
        extra = {"n_modapte_train": m["n_modapte_train"], "n_modapte_test": m["n_modapte_test"],
                 "n_train_full": len(m["train_ids"])}
    elif name == "humaneval":
        out_dir.mkdir(parents=True, exist_ok=True)
        r = build_humaneval(p, out_dir)
        labels, extra = r.pop("labels"), r.pop("extra")
        arrays = r
        kind = "teacher_head"
    else:
        raise UnknownNameError(f"unknown data set {name!r}")
    n_full = extra.pop("n_train_full", len(arrays["x_train"]))
    for split, cap in (("train", dp.max_train), ("test", dp.max_test)):
        n = len(arrays[f"x_{split}"])
        if cap and n > cap:
            keep = np.sort(np.random.default_rng(0).permutation(n)[:cap])
            for k in [k for k in arrays if k.endswith(f"_{split}")]:
                arrays[k] = arrays[k][keep]
    n_used = len(arrays["x_train"])
    tr, va = stratified_val_split(arrays["y_train"], ml.train.val_fraction, ml.train.split_seed)
    for k in [k for k in list(arrays) if k.endswith("_train")]:
        full = arrays[k]
        arrays[k.replace("_train", "_val")] = full[va]
        arrays[k] = full[tr]
    if dp.standardize and kind == "mlp":
        mu = arrays["x_train"].mean(0)
        sd = arrays["x_train"].std(0)
        sd[sd < 1e-8] = 1.0
        for split in ("train", "val", "test"):
            arrays[f"x_{split}"] = (arrays[f"x_{split}"] - mu) / sd
    import torch

    tensors = {k: torch.as_tensor(np.ascontiguousarray(v)) for k, v in arrays.items()}
    tensors = {k: (v.float() if k.startswith("x_") else v) for k, v in tensors.items()}
    meta = {
        "dataset": name, "encoder": kind, "labels": labels,
        "n_features": int(arrays["x_train"].shape[1]),
        "train_full": int(n_full), "subsampled_to": int(n_used) if n_used < n_full else 0,
        "train": label_stats(arrays["y_train"]), "val": label_stats(arrays["y_val"]),
        "test": label_stats(arrays["y_test"]),
        **extra,
    }
    save_safetensors(out_dir / "data.safetensors", tensors)
    write_json(out_dir / "meta.json", meta)
    write_json(Path(report_dir) / f"{name}_dataset.json",
               {k: v for k, v in meta.items() if k != "labels"}
               | {"n_labels": len(labels)})
    # wall time: run-dependent, so MLflow/timings only, never the hashed dataset JSON
    write_timing("multilabel", f"build_{name}", {"time_s": round(time.perf_counter() - t0, 3)})
    if extra.get("dropped_attributes"):
        print(f"{name}: dropped identifier-like attribute(s) {extra['dropped_attributes']}")
    print(f"{name}: train {tuple(arrays['x_train'].shape)}, val {tuple(arrays['x_val'].shape)} (of {n_full}), test {tuple(arrays['x_test'].shape)}, "
          f"{len(labels)} labels, cardinality {meta['train']['cardinality']:.2f}")
    return meta
