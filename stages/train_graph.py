"""DVC stage ``train_graph@<variant>``: self-supervised GCN training on Cora, one run per seed.

Reads ``graph.variants.<variant>`` (loss and its params), the active preset (seeds,
epochs, loss batch), ``graph.model`` and ``graph.train``. Writes
``data/graph/train/<variant>/`` (``embeddings.safetensors``: encoder outputs
``[n_seeds, 2708, out_dim]`` on the clean graph; ``info.json``: seeds, wall time per run)
and the per-epoch loss history ``reports/plots/graph/<variant>.csv``. Logs one MLflow
run ``train_graph@<variant>`` with the loss per epoch (``loss_seed<k>``, step = epoch).
"""

from __future__ import annotations

import argparse
import sys
import time

import pandas as pd
import torch

from contrastlab.cli import run_stage
from contrastlab.data.cora import load_cora
from contrastlab.errors import UnknownNameError
from contrastlab.io import atomic_dir, save_safetensors, write_csv, write_json
from contrastlab.params import load_params
from contrastlab.tracking import stage_run
from contrastlab.training.graph import embed, make_graph_loss, train_graph_ssl


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--variant", required=True)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--data", default="data/graph/planetoid")
    ap.add_argument("--out", default="data/graph/train")
    ap.add_argument("--plots", default="reports/plots/graph")
    args = ap.parse_args(argv)
    g = load_params(args.params).graph
    if args.variant not in g.variants:
        raise UnknownNameError(f"{args.params}: graph.variants has no {args.variant!r} "
                               f"(known: {', '.join(g.variants)})")
    v = g.variants[args.variant]
    preset = g.active_preset
    torch.set_num_threads(g.threads)
    data, _ = load_cora(args.data)
    epochs = v.epochs or preset.epochs
    cfg = dict(epochs=epochs, lr=v.lr or g.train.lr,
               weight_decay=g.train.weight_decay if v.weight_decay is None else v.weight_decay,
               feature_mask=g.train.feature_mask, edge_drop=g.train.edge_drop,
               feature_mask_mode=g.train.feature_mask_mode, batch_nodes=preset.batch_nodes,
               **g.model.model_dump())
    loss_fn = make_graph_loss(v.loss, **v.loss_kwargs())
    logged = {"variant": args.variant, "preset": g.preset, **preset.model_dump(),
              "loss": v.model_dump(), **cfg}
    embs, times, hist = [], [], {"epoch": list(range(1, epochs + 1))}
    with stage_run("graph", f"train_graph@{args.variant}", logged) as tracker:
        for seed in preset.seeds:
            t0 = time.perf_counter()
            res = train_graph_ssl(
                data, loss_fn, seed=seed, desc=f"{args.variant} seed {seed}",
                on_epoch=lambda ep, val, s=seed: tracker.log_metrics({f"loss_seed{s}": val}, step=ep),
                **cfg)
            times.append(time.perf_counter() - t0)
            embs.append(embed(res.encoder, data))
            hist[f"loss_seed{seed}"] = res.losses
            print(f"{args.variant} seed {seed}: final loss {res.losses[-1]:.4f}, "
                  f"{times[-1]:.1f} s", flush=True)
        tracker.log_metrics({"time_s": sum(times)})
    df = pd.DataFrame(hist)
    df.insert(1, "loss", df[[c for c in df.columns if c.startswith("loss_seed")]].mean(axis=1))
    with atomic_dir(f"{args.out}/{args.variant}") as tmp:
        save_safetensors(tmp / "embeddings.safetensors", {"embeddings": torch.stack(embs)},
                         metadata={"seeds": ",".join(map(str, preset.seeds))})
        write_json(tmp / "info.json", {"variant": args.variant, "loss": v.loss,
                                       "seeds": preset.seeds, "epochs": epochs,
                                       "time_s_per_seed": [round(t, 3) for t in times]})
    write_csv(f"{args.plots}/{args.variant}.csv", df)
    return 0


if __name__ == "__main__":
    sys.exit(run_stage(main))
