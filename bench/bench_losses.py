"""Loss benchmark: forward + backward on CPU, printed as ratios measured in one process.

For each batch size N (D = 128; the tracks' losses run at N = 256 (multi-label: 2 views x
batch 128; code: batch 256), 2048 (graph: 2 x 1024 nodes) and 5416 (graph: 2 x 2708); 64 and
128 are below any track and printed for smaller user batches): every
supervised loss of contrastlab as a ratio to the N x D matmul floor (``S = A B^T`` plus the
two backward products ``G B`` and ``G^T A``), the SupContrast reference algorithm's time over
the loss's time on the same batch (``SupCon alg / it`` >= 1: the loss is at least as fast as
the plain algorithm; ``min`` is the smallest over the losses at that N) and the same against
pytorch-metric-learning's SupConLoss, with the peak resident memory added during the run. Then paired views (``[B, 2, D]``, SimCLR positives) against the
SupContrast reference algorithm with ``n_views = 2``, and 2 x 8192 views with its peak memory.
Wall times are medians of repeated runs; only ratios are printed (plus memory in MiB).

    .venv/bin/python bench/bench_losses.py            # N in {64, ..., 5416} + 2 x 8192 views
    .venv/bin/python bench/bench_losses.py --quick    # N in {64, 256, 1024}, no large run

On a machine whose cores are busy with other jobs, pass ``--threads 1``: with 2 intra-op
threads every parallel region waits for its second thread to be scheduled, and every
time (ours and the peers') then measures the scheduler, not the loss.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import os
import statistics
import sys
import threading
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _peers import supcontrast_reference  # noqa: E402

from contrastlab.losses import get_loss

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * PAGE


class PeakRSS:
    """Peak resident memory above the level at entry, sampled every millisecond."""

    def __enter__(self):
        self.base = rss()
        self.peak = self.base
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()
        return self

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, rss())
            time.sleep(0.001)

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, rss())

    @property
    def mib(self) -> float:
        return (self.peak - self.base) / 2**20


def _trim() -> None:
    """Give freed heap memory back to the OS so that the next peak starts from a clean base."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except OSError:
        pass


def peak_mib(fn) -> float:
    """Peak resident memory (MiB) added by one run of ``fn`` (freed heap trimmed first)."""
    gc.collect()
    _trim()
    with PeakRSS() as mem:
        fn()
    return mem.mib


def rounds(fns: dict, repeats: int) -> dict:
    """Run every function once per round, ``repeats`` rounds after a warm-up round.

    Interleaving keeps the functions of one round under the same machine load, so per-round
    ratios are robust to other processes; returns ``{name: [seconds per round]}``."""
    for fn in fns.values():
        fn()
    out = {k: [] for k in fns}
    for _ in range(repeats):
        for k, fn in fns.items():
            t = time.perf_counter()
            fn()
            out[k].append(time.perf_counter() - t)
    return out


def ratio(times: dict, num: str, den: str) -> float:
    """Median over rounds of ``times[num] / times[den]``."""
    return statistics.median(a / b for a, b in zip(times[num], times[den]))




def batch(n: int, d: int, c: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x = F.normalize(torch.randn(n, d, generator=g), dim=-1)
    y = torch.randint(0, max(2, n // 32), (n,), generator=g)
    multi = torch.rand(n, c, generator=g) < 2.0 / c
    multi[torch.arange(n), torch.randint(0, c, (n,), generator=g)] = True
    return x, y, multi


def fwd_bwd(loss_fn, x, *args, views=None, **kw):
    def run():
        f = (x if views is None else views).clone().requires_grad_(True)
        loss_fn(f, *args, **kw).backward()

    return run


def _repeat(fn, k: int):
    def run():
        for _ in range(k):
            fn()

    return run


def floor_fn(n: int, d: int):
    a, b = torch.randn(n, d), torch.randn(n, d)
    g = torch.randn(n, n)

    def run():
        s = a @ b.T
        ga = g @ b
        gb = g.T @ a
        del s, ga, gb

    return run


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small sizes, few repeats, no 2 x 8192 run")
    ap.add_argument("--sizes", type=int, nargs="*", default=None)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--labels", type=int, default=20, help="number of classes C of the multi-hot labels")
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--temperature", type=float, default=0.1)
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, one repeat: a quick check that the benchmark runs (tests/foundation/test_bench_smoke.py)")
    args = ap.parse_args(argv)
    if args.smoke:
        args.quick, args.sizes, args.repeats = True, args.sizes or [32], 1
    torch.set_num_threads(args.threads)
    sizes = args.sizes or ([64, 256, 1024] if args.quick else [64, 128, 256, 512, 1024, 2048, 4096, 5416])
    reps = args.repeats or (5 if args.quick else 7)
    d, tau = args.dim, args.temperature
    from pytorch_metric_learning.losses import SupConLoss

    pml = SupConLoss(temperature=tau)
    print(f"contrastlab loss benchmark: D={d}, C={args.labels}, tau={tau}, threads={args.threads}; "
          f"forward+backward, {reps} interleaved rounds, median of per-round ratios")
    names = ["supcon", "all", "any", "mulsupcon", "simdis", "sim_only", "dis_only"]
    for n in sizes:
        x, y, multi = batch(n, d, args.labels)
        fns = {"floor": floor_fn(n, d)}
        for name in names:
            fns[name] = fwd_bwd(get_loss(name), x, y if name == "supcon" else multi, temperature=tau)
        fns["SupContrast algorithm"] = fwd_bwd(supcontrast_reference, x, y, views=x.unsqueeze(1), temperature=tau)
        fns["pytorch-metric-learning SupConLoss"] = fwd_bwd(pml, x, y)
        # small batches finish in microseconds: repeat each call so that a round lasts long
        # enough for the clock and the interleaving to mean something
        inner = 1 if args.smoke else max(1, int(2048 / n) ** 2)
        times = rounds({k: _repeat(f, inner) for k, f in fns.items()}, reps)
        sc = "SupContrast algorithm"
        worst = min(ratio(times, sc, name) for name in names)
        print(f"\nN = {n}   (min over the losses of SupCon alg / it: {worst:.2f})")
        print(f"  {'loss':36s} {'x floor':>8s} {'SupCon alg / it':>16s} {'PML / it':>9s} {'x supcon':>9s} {'peak MiB':>9s}")
        for name in fns:
            print(f"  {name:36s} {ratio(times, name, 'floor'):8.2f} {ratio(times, sc, name):16.2f} "
                  f"{ratio(times, 'pytorch-metric-learning SupConLoss', name):9.2f} "
                  f"{ratio(times, name, 'supcon'):9.2f} {peak_mib(fns[name]):9.0f}", flush=True)

    print("\nPaired views (features [B, 2, D], positives = the other view; peer: SupContrast algorithm, n_views=2)")
    print(f"  {'2B views':>9s} {'ours x floor':>13s} {'ref x floor':>12s} {'ref / ours':>11s} {'ours MiB':>9s} {'ref MiB':>8s}")
    for n in sizes:
        g = torch.Generator().manual_seed(1)
        v = F.normalize(torch.randn(n // 2, 2, d, generator=g), dim=-1)
        fns = {"floor": floor_fn(n, d),
               "ours": fwd_bwd(get_loss("supcon"), v, temperature=tau, base_temperature=None),
               "ref": fwd_bwd(supcontrast_reference, v, torch.arange(n // 2), temperature=tau)}
        inner = 1 if args.smoke else max(1, int(2048 / n) ** 2)
        times = rounds({k: _repeat(f, inner) for k, f in fns.items()}, reps)
        print(f"  {n:9d} {ratio(times, 'ours', 'floor'):13.2f} {ratio(times, 'ref', 'floor'):12.2f} "
              f"{ratio(times, 'ref', 'ours'):11.2f} {peak_mib(fns['ours']):9.0f} {peak_mib(fns['ref']):8.0f}")
    if not args.quick:
        b = 8192
        g = torch.Generator().manual_seed(2)
        v = F.normalize(torch.randn(b, 2, d, generator=g), dim=-1)
        fns = {"floor": floor_fn(2 * b, d), "ours": fwd_bwd(get_loss("supcon"), v, temperature=tau, base_temperature=None)}
        times = rounds(fns, 1)
        m = peak_mib(fns["ours"])
        print(f"\n2 x {b} views: supcon forward+backward {ratio(times, 'ours', 'floor'):.2f} x floor, "
              f"peak {m / 1024:.2f} GiB added ({'within' if m < 8 * 1024 else 'OVER'} 8 GB)")


if __name__ == "__main__":
    main()
