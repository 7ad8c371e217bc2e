"""Teacher extraction throughput: TeacherEncoder vs a plain loop, as a ratio.

Plain loop: the full model (every layer) with ``output_hidden_states=True``, every batch
padded to ``max_length``, texts in their original order, then the masked mean of
``hidden_states[layer]``. TeacherEncoder: layers truncated after ``layer``, batches bucketed
by length. Same texts (function bodies from the installed distributions), same batch size,
same threads. Throughput counts real (non-padding) tokens. Target: >= 2x.

    .venv/bin/python bench/bench_teacher.py [--n 256] [--layer 4] [--max-length 128]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch


def _texts(n: int) -> list[str]:
    import tempfile

    from contrastlab.data.functions import extract_repositories
    from contrastlab.data.repos import fetch_dist

    names = ["requests", "click", "jinja2", "tqdm", "attrs", "packaging"]
    with tempfile.TemporaryDirectory() as tmp:
        for d in names:
            fetch_dist(d, Path(tmp) / d)
        df, _ = extract_repositories(Path(tmp), names, max_functions_per_repo=n)
    return df["body"].tolist()[:n]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--layer", type=int, default=4)
    ap.add_argument("--max-length", type=int, default=128)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, one repeat: a quick check that the benchmark runs (tests/foundation/test_bench_smoke.py)")
    args = ap.parse_args(argv)
    if args.smoke:  # no download: a few bodies written here
        args.n, args.max_length, args.batch_size, args.repeats = 4, 16, 2, 1
    torch.set_num_threads(args.threads)
    from transformers import AutoModel, AutoTokenizer

    from contrastlab.models.teacher import TeacherEncoder

    texts = ([f"def f{i}(x):\n    return x * {i} + sum(range({i}))\n" for i in range(args.n)]
             if args.smoke else _texts(args.n))
    enc = TeacherEncoder("minilm", layer=args.layer, device="cpu", max_length=args.max_length)
    tok = AutoTokenizer.from_pretrained(enc.path)
    full = AutoModel.from_pretrained(enc.path, dtype=torch.float32).eval()
    n_tokens = sum(len(x) for x in tok(texts, truncation=True, max_length=args.max_length)["input_ids"])

    def plain() -> torch.Tensor:
        outs = []
        with torch.inference_mode():
            for s in range(0, len(texts), args.batch_size):
                b = tok(texts[s:s + args.batch_size], padding="max_length", truncation=True,
                        max_length=args.max_length, return_tensors="pt")
                h = full(**b, output_hidden_states=True).hidden_states[args.layer]
                m = b["attention_mask"].unsqueeze(-1).float()
                outs.append((h * m).sum(1) / m.sum(1))
        return torch.cat(outs)

    def ours() -> torch.Tensor:
        return enc.encode_mean(texts, batch_size=args.batch_size)

    ref, got = plain(), ours()  # warm-up, and a check that both compute the same thing
    err = (ref - got).abs().max().item()
    times = {}
    for name, fn in (("plain", plain), ("ours", ours)):
        best = float("inf")
        for _ in range(args.repeats):
            t = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - t)
        times[name] = best
    print(f"{len(texts)} function bodies, {n_tokens} real tokens, layer {args.layer}/"
          f"{enc.num_layers_total}, max_length {args.max_length}, batch {args.batch_size}, "
          f"{args.threads} thread(s); max |diff| of the embeddings {err:.2e}")
    print(f"speed-up of TeacherEncoder over the plain loop (tokens/s ratio): "
          f"{times['plain'] / times['ours']:.2f}x  (target >= 2x)")


if __name__ == "__main__":
    main()
