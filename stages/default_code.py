"""DVC stage ``default_code@<variant>``: the loss's declared configuration (params.yaml's lr
and initial temperature, trial 0 of its study) trained on the final seeds and tested, so the
report can set default against tuned on validation and on test. A variant without a search
space (the from-scratch ablations) has nothing to compare: its final run is its default, and
the stage writes a JSON that says so. Otherwise trains like ``train_code`` (same seeds, same
library, no MLflow run) into ``data/code/default_models/<variant>`` and evaluates like
``evaluate_code`` (:func:`contrastlab.evaluation.code_eval.evaluate_variant`), writing
``reports/metrics/code/default/<variant>.json`` and
``reports/data/code/default/<variant>_ranks.csv``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from contrastlab.cli import run_stage
from contrastlab.evaluation.code_eval import evaluate_variant
from contrastlab.io import write_csv, write_json
from contrastlab.params import load_params
from contrastlab.training.code import prepare_targets, train_seeds
from contrastlab.training.code_inputs import add_input_args, load_code_data, variant_settings


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--variant", required=True)
    add_input_args(ap)
    ap.add_argument("--models", default="data/code/default_models")
    ap.add_argument("--metrics", default="reports/metrics/code/default")
    ap.add_argument("--ranks", default="reports/data/code/default")
    args = ap.parse_args(argv)
    code = load_params(args.params).code
    v, out_dir = code.variants[args.variant], Path(args.models) / args.variant
    metrics, ranks_csv = Path(args.metrics) / f"{args.variant}.json", Path(args.ranks) / f"{args.variant}_ranks.csv"
    out_dir.mkdir(parents=True, exist_ok=True)
    if not v.search:  # an ablation at its declared configuration: the final run is the default
        write_json(metrics, {"variant": args.variant, "searched": False,
                             "note": "no search space: the final run is the declared configuration"})
        write_csv(ranks_csv, pd.DataFrame({"id": [], "repo": [], "seed": [], "rank": []}))
        return 0
    cfg = variant_settings(code, args.variant, None)  # declared lr / temperature (trial 0)
    data, hidden = load_code_data(args.functions, args.splits, args.teacher)
    targets = prepare_targets(data, code.target.centre, code.target.whiten_eps)
    summaries = train_seeds(data, hidden, v.loss, code.model, code.train, out_dir, targets=targets,
                            seeds=list(code.train.seeds), lr=cfg["lr"], temperature=cfg["temperature"],
                            residual=cfg["residual"], workers=code.train.workers)
    write_json(out_dir / "summary.json", {"variant": args.variant, "loss": v.loss, **cfg, "seeds": [
        {k: x for k, x in s.items() if k not in ("history", "time_s")} for s in summaries]})
    out, _, ranks, _ = evaluate_variant(code, out_dir, args.functions, args.splits, args.teacher)
    write_json(metrics, {**out, "variant": args.variant, "searched": True})
    write_csv(ranks_csv, ranks)
    print(f"default_code@{args.variant}: lr {cfg['lr']:g}, τ0 {cfg['temperature']:g}: val R@10 "
          f"{out['val_rank_at_10']:.2%}, test R@10 {out['rank_at_10']:.2%}")
    return 0


if __name__ == "__main__":
    sys.exit(run_stage(main))
