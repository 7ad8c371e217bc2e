"""Coverage of the pipeline's 95 % bootstrap intervals by simulation, at full size.

For each interval procedure (graph accuracy, clustered Rank@k, multi-label mAP / micro-F1 /
macro-F1) prints the fraction of replications whose interval covers the known population
value, the ratio of that fraction to the nominal 0.95, the mean interval width and the
fraction of intervals that contain their own estimate. The test suite runs the same
simulators at 200 replications (tests/protocol/test_coverage.py).

    python bench/bench_coverage.py --reps 1000
"""

from __future__ import annotations

import argparse

from contrastlab.evaluation.coverage import (coverage, sim_accuracy, sim_clustered_hits,
                                             sim_multilabel)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=1000, help="replications per procedure")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, one repeat: a quick check that the benchmark runs (tests/foundation/test_bench_smoke.py)")
    args = ap.parse_args(argv)
    if args.smoke:
        args.reps = 3
    runs = [
        ("graph accuracy (1000 nodes x 10 seeds)", sim_accuracy,
         dict(n_items=1000, n_seeds=10, n_resamples=1000)),
        ("clustered Rank@k (39 groups x ~38 queries, 3 seeds)", sim_clustered_hits,
         dict(n_resamples=1000)),
        ("multi-label (600 rows, 5 labels, 3 seeds)", sim_multilabel,
         dict(n_items=600, n_resamples=500)),
        ("multi-label (300 rows, 5 labels, 5 seeds)", sim_multilabel,
         dict(n_items=300, n_seeds=5, n_resamples=500)),
    ]
    if args.smoke:
        runs = [(name, sim, {**kw, "n_resamples": 50}) for name, sim, kw in runs]
    print(f"| procedure | metric | coverage | coverage / 0.95 | mean width | contains estimate |")
    print("|---|---|---|---|---|---|")
    for name, sim, kw in runs:
        cov = coverage(sim, args.reps, seed=args.seed, **kw)
        for key in sorted({k.split(".")[0] for k in cov}):
            c = cov[f"{key}.coverage"]
            print(f"| {name} | {key} | {c:.3f} | {c / 0.95:.3f} | {cov[f'{key}.width']:.4f} | "
                  f"{cov[f'{key}.contains_estimate']:.3f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
