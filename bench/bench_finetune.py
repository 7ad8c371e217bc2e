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
ratios (the load of a shared machine scales every loop alike within a run).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
import torch.nn.functional as F


def _texts(n: int) -> tuple[list[str], list[str]]:
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


def plain_loop(texts, y, batches, max_length: int, lr: float) -> tuple[float, int]:
    """A plain fine-tuning loop; returns (seconds, real tokens)."""
    from transformers import AutoModel, AutoTokenizer

    from contrastlab.losses import get_loss
    from contrastlab.models.teacher import resolve_model

    path = resolve_model("minilm")
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModel.from_pretrained(path).train()
    h = model.config.hidden_size
    head = torch.nn.Sequential(torch.nn.Linear(h, h), torch.nn.ReLU(), torch.nn.Linear(h, 128))
    opt = torch.optim.AdamW(list(model.parameters()) + list(head.parameters()), lr=lr)
    loss_fn = get_loss("mulsupcon")
    tokens, t0 = 0, 0.0
    for i, rows in enumerate(batches):
        if i == 1:
            t0 = time.perf_counter()  # the first step warms up
        enc = tok([texts[r] for r in rows], padding=True, truncation=True,
                  max_length=max_length, return_tensors="pt")
        out = model(**enc).last_hidden_state
        m = enc["attention_mask"].unsqueeze(-1).float()
        z = F.normalize(head((out * m).sum(1) / m.sum(1)), dim=-1)
        loss = loss_fn(z.unsqueeze(1), y[rows], temperature=0.1)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if i >= 1:
            tokens += int(enc["attention_mask"].sum())
    return time.perf_counter() - t0, tokens


def ours(texts, y, batches, max_length: int, layers, lr: float) -> tuple[float, int, float]:
    """Our loop on fixed batches; returns (seconds, real tokens, cache seconds)."""
    from contrastlab.finetune.encoder import FinetuneEncoder
    from contrastlab.finetune.train import Inputs, _forward_rows
    from contrastlab.losses import get_loss

    enc = FinetuneEncoder("minilm", layers=layers, proj_dim=128, max_length=max_length).train()
    ids = enc.tokenize(texts)
    t_cache = 0.0
    if enc.train_embeddings:
        inp = Inputs(ids=ids, level=0)
    else:
        t = time.perf_counter()
        inp = Inputs(states=enc.lower_states(ids), ids=ids, level=enc.n_frozen)
        t_cache = time.perf_counter() - t
        enc.train()
    opt = torch.optim.AdamW([{"params": enc.encoder_parameters(), "lr": lr},
                             {"params": enc.head_parameters(), "lr": lr}])
    loss_fn = get_loss("mulsupcon")
    tokens, t0 = 0, 0.0
    for i, rows in enumerate(batches):
        if i == 1:
            t0 = time.perf_counter()
        z = _forward_rows(enc, inp, rows)
        loss = loss_fn(z.unsqueeze(1), y[rows], temperature=0.1)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if i >= 1:
            tokens += sum(len(ids[r]) for r in rows)
    return time.perf_counter() - t0, tokens, t_cache


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=64)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=4, help="timed steps (+1 warm-up)")
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--max-length", type=int, default=256)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    from contrastlab.finetune.data import label_matrix, label_names

    texts, probs = _texts(args.rows)
    tiers = ["PASS"] * len(texts)
    y = label_matrix(probs, tiers, label_names(probs))
    rng = np.random.default_rng(0)
    batches = [rng.choice(len(texts), args.batch, replace=False).tolist() for _ in range(args.steps + 1)]
    torch.manual_seed(0)
    t_plain, n_plain = plain_loop(texts, y, batches, args.max_length, 5e-5)
    torch.manual_seed(0)
    t_all, n_all, _ = ours(texts, y, batches, args.max_length, "all", 5e-5)
    torch.manual_seed(0)
    t_k, n_k, t_cache = ours(texts, y, batches, args.max_length, args.layers, 5e-5)
    assert n_plain == n_all == n_k, (n_plain, n_all, n_k)
    r_plain, r_all, r_k = n_plain / t_plain, n_all / t_all, n_k / t_k
    print(f"rows {len(texts)}, batch {args.batch}, {args.steps} timed steps, max_length "
          f"{args.max_length}, {args.threads} thread(s), {n_plain} real tokens per loop")
    print(f"plain transformers loop : {r_plain:8.0f} tokens/s")
    print(f"ours, all layers        : {r_all:8.0f} tokens/s")
    print(f"ours, top {args.layers} layer(s), cached: {r_k:8.0f} tokens/s "
          f"(cache of {len(texts)} rows: {t_cache:.1f} s once)")
    print(f"ratio ours_all / plain        = {r_all / r_plain:.2f}")
    print(f"ratio cached_{args.layers} / ours_all     = {r_k / r_all:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
