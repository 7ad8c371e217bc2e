"""The bi-encoder with every layer trained (``presets/code-biencoder-gpu.yaml``) on one GPU:
a validation grid, then the final seeds of each row, per-query ranks written for the report.

Superseded by the pipeline's GPU route (docs/code.md, "Bi-encoder on a GPU through the
pipeline": the preset, a study per row, torchrun, FAISS); kept because the committed GPU table
(``reports/metrics/code_biencoder_gpu/``) was made by this script.

What it runs, in order, within ``--budget-s`` seconds of wall time (a step that would not
finish in the time left is skipped and listed as such, so a short lease still returns what
did run):

1. ``code.biencoder`` from ``params.yaml`` with the GPU preset merged in memory
   (:func:`contrastlab.params.presets.load_with_overrides`): all-MiniLM-L6-v2, every block and
   the embeddings trained, 256 tokens, batch 128, bf16 autocast; ``--model`` points at a local
   copy of the model (a device without the package).
2. Selection on the validation repositories only: the first row (``biencoder_infonce``)
   trained at the study seed (``tune.seeds[0]``) for each ``--grid-lr`` x ``--grid-steps``,
   scored by validation Rank@10 against all bodies; the best pair is used by every row
   (equal budget, like for like). The test repositories are not read in this phase.
3. Final runs: each ``--rows`` row at ``--seeds`` with the chosen pair; validation and test
   ranks (1-based, all 5,848 bodies, exact inner product, ties against) per seed.

Outputs under ``--out``: ``ranks_<row>.csv`` (columns ``seed, split, row, rank``: ``row`` =
the function's row in id order), ``summary.json`` (grid, choice, per-seed Rank@10, tokens,
training seconds: wall times, not for hashed outputs), ``log.txt``.

Where the ``faiss`` module is missing (the GPU image has none and its wheel does not fit the
transfer), :class:`_TorchFlatIP` stands in for ``faiss.IndexFlatIP``: the same exact
inner-product search (``torch.topk`` over ``q @ c.T``), so the ranks are the same up to the
order of exactly tied scores. The summary records which one ran.

Usage (what ran on an H100, docs/code.md)::

    python scripts/gpu_biencoder.py --model /tmp/minilm --functions data/code/functions.parquet \\
        --splits data/code/splits.parquet --out $OUT --budget-s 420
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import types
from pathlib import Path

import numpy as np
import torch


class _TorchFlatIP:
    """Exact inner-product index with ``faiss.IndexFlatIP``'s ``add`` / ``search`` / ``ntotal``."""

    def __init__(self, d: int):
        self.d = d
        self.x = torch.zeros((0, d))

    @property
    def ntotal(self) -> int:
        return len(self.x)

    def add(self, x) -> None:
        dev = "cuda" if torch.cuda.is_available() else "cpu"
        self.x = torch.cat([self.x.to(dev), torch.as_tensor(np.asarray(x), dtype=torch.float32, device=dev)])

    def search(self, q, k: int):
        qq = torch.as_tensor(np.asarray(q), dtype=torch.float32, device=self.x.device)
        s, i = torch.topk(qq @ self.x.T, int(k), dim=1)
        return s.cpu().numpy(), i.cpu().numpy().astype(np.int64)


def _install_faiss_shim() -> str:
    try:
        import faiss  # noqa: F401

        return "faiss"
    except ImportError:
        mod = types.ModuleType("faiss")
        mod.IndexFlatIP = _TorchFlatIP
        mod.get_num_gpus = lambda: 0
        sys.modules["faiss"] = mod
        return "torch exact inner product (faiss not installed)"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--preset", default="presets/code-biencoder-gpu.yaml")
    ap.add_argument("--model", default=None, help="local model folder (default: params)")
    ap.add_argument("--functions", default="data/code/functions.parquet")
    ap.add_argument("--splits", default="data/code/splits.parquet")
    ap.add_argument("--out", required=True)
    ap.add_argument("--rows", nargs="+", default=None, help="default: every declared row")
    ap.add_argument("--seeds", nargs="+", type=int, default=None, help="default: code.biencoder.seeds")
    ap.add_argument("--grid-lr", nargs="+", type=float, default=[3e-5, 1e-4])
    ap.add_argument("--grid-steps", nargs="+", type=int, default=[100, 300])
    ap.add_argument("--choice", nargs=2, type=float, default=None, metavar=("LR", "STEPS"),
                    help="skip the grid: a choice an earlier run made on validation")
    ap.add_argument("--budget-s", type=float, default=420.0)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true", help="CPU smoke: 64 tokens, batch 8, 40 functions per split")
    args = ap.parse_args(argv)

    t_start = time.perf_counter()
    index_kind = _install_faiss_shim()
    from contrastlab.biencoder.data import build_cache, load_pairs
    from contrastlab.biencoder.run import apply_choices, embed_all, row_of, score_row, train_row
    from contrastlab.biencoder.train import load_cache
    from contrastlab.params.presets import load_with_overrides

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    log = open(out / "log.txt", "a", encoding="utf-8")

    def say(msg: str) -> None:
        line = f"[{time.perf_counter() - t_start:6.0f} s] {msg}"
        print(line, flush=True)
        log.write(line + "\n")
        log.flush()

    be = load_with_overrides(args.params, [args.preset]).code.biencoder
    upd = {"device": args.device}
    if args.model:
        upd["model"] = args.model
    if args.tiny:
        upd.update(max_length=64, batch_size=8, sub_batch=8, batch_size_encode=32, hardneg_refresh=2)
    be = be.model_copy(update=upd)
    pairs = load_pairs(args.functions, args.splits)
    if args.tiny:  # a few functions per split, the rest excluded
        keep = np.concatenate([pairs.rows(s)[:40] for s in ("train", "val", "test")])
        split = np.full(len(pairs.split), "excluded", dtype=object)
        split[keep] = pairs.split[keep]
        pairs.split = split
    sig_inp, body_inp = load_cache(build_cache(be, pairs.signatures, pairs.bodies))
    va, te = pairs.rows("val"), pairs.rows("test")
    rows = args.rows or list(be.rows)
    seeds = args.seeds if args.seeds is not None else list(be.seeds)
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    summary: dict = {"device": gpu, "torch": torch.__version__, "index": index_kind,
                     "preset": args.preset, "layers": str(be.layers), "max_length": be.max_length,
                     "batch_size": be.batch_size, "n_bodies": len(pairs.ids), "n_val": len(va),
                     "n_test": len(te), "grid": [], "choice": None, "finals": {}, "skipped": []}

    def dump() -> None:
        (out / "summary.json").write_text(json.dumps(summary, indent=1, sort_keys=True))

    say(f"device {gpu}; index {index_kind}; {len(pairs.ids)} bodies, {len(va)} val, {len(te)} test")
    per_step = None  # measured seconds per training step (1 row, 1 seed)

    def fits(steps: int) -> bool:
        left = args.budget_s - (time.perf_counter() - t_start)
        return per_step is None or per_step * steps * 1.3 + 20 < left

    def run_one(name: str, lr: float, steps: int, seed: int, splits: tuple[str, ...]):
        nonlocal per_step
        b = be.model_copy(update={"steps": steps})
        row = apply_choices(row_of(b, name), {"lr": lr})
        s_enc, b_enc, info = train_row(b, row, pairs, sig_inp, body_inp, seed)
        q_rows = np.concatenate([va, te]) if "test" in splits else va
        q, c = embed_all(b, s_enc, b_enc, sig_inp, body_inp, q_rows)
        ranks = {"val": score_row(q[:len(va)], c, va, 10)}
        if "test" in splits:
            ranks["test"] = score_row(q[len(va):], c, te, 100)
        sec = float(info["seconds"])
        per_step = sec / steps if per_step is None else max(per_step, sec / steps)
        return ranks, {"tokens": int(info["tokens"]), "seconds": round(sec, 1),
                       "temperature": float(info["temperature"])}

    # 2. the validation grid (first row, study seed)
    first, tune_seed = rows[0], int(be.tune.seeds[0])
    for steps in ([] if args.choice else sorted(args.grid_steps)):
        for lr in args.grid_lr:
            if not fits(steps):
                summary["skipped"].append(f"grid lr={lr} steps={steps}")
                continue
            r, info = run_one(first, lr, steps, tune_seed, ("val",))
            v = float(np.mean(r["val"] <= 10))
            summary["grid"].append({"lr": lr, "steps": steps, "val_rank_at_10": v, **info})
            say(f"grid {first} lr {lr:g} steps {steps}: val R@10 {v:.2%} ({info['seconds']} s, "
                f"{info['tokens'] / max(info['seconds'], 1e-9):.0f} tokens/s)")
            dump()
    if args.choice:
        summary["grid"].append({"lr": args.choice[0], "steps": int(args.choice[1]), "val_rank_at_10": None,
                                "given": True})
    if not summary["grid"]:
        say("no grid point ran")
        dump()
        return 1
    best = max(summary["grid"], key=lambda g: (g["val_rank_at_10"] or 0, -g["steps"]))
    summary["choice"] = {"lr": best["lr"], "steps": best["steps"]}
    say(f"chosen on validation: lr {best['lr']:g}, steps {best['steps']}")

    # 3. finals: seeds outer so that every row gets its first seeds before any its third
    recs: dict[str, list] = {r: [] for r in rows}
    for seed in seeds:
        for name in rows:
            if not fits(best["steps"]):
                summary["skipped"].append(f"{name} seed {seed}")
                continue
            try:
                r, info = run_one(name, best["lr"], best["steps"], seed, ("val", "test"))
            except Exception as e:  # noqa: BLE001 - one row's failure is reported, the rest run
                summary["skipped"].append(f"{name} seed {seed}: {type(e).__name__}: {e}")
                say(f"{name} seed {seed} failed: {type(e).__name__}: {e}")
                continue
            for split, rk in r.items():
                rr = va if split == "val" else te
                recs[name] += [(seed, split, int(i), int(k)) for i, k in zip(rr, rk)]
            import pandas as pd

            pd.DataFrame(recs[name], columns=["seed", "split", "row", "rank"]).to_csv(
                out / f"ranks_{name}.csv", index=False)
            res = {"seed": seed, "val_rank_at_10": float(np.mean(r["val"] <= 10)),
                   "test_rank_at_10": float(np.mean(r["test"] <= 10)),
                   "test_mrr": float(np.mean(1.0 / r["test"])), **info}
            summary["finals"].setdefault(name, []).append(res)
            say(f"final {name} seed {seed}: val R@10 {res['val_rank_at_10']:.2%} test R@10 "
                f"{res['test_rank_at_10']:.2%} MRR {res['test_mrr']:.3f} ({info['seconds']} s)")
            dump()
    dump()
    say("done; skipped: " + ("; ".join(summary["skipped"]) or "nothing"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
