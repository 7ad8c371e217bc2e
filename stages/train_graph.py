"""DVC stage ``train_graph@<variant>`` (and ``default_graph@<variant>`` with ``--default``,
``ablate_graph@<variant>`` with ``--ablation``): final runs of a variant, each seed scored
once on the test nodes (runs, statistics and files:
:func:`contrastlab.training.graph_final.run_stage_final`). Writes
``reports/metrics/graph/[<mode>/]<variant>.json``, ``reports/data/graph/[<mode>/]<variant>_test_pred.csv``,
``reports/plots/graph/[<mode>/]<variant>.csv`` and, tuned, ``reports/data/graph/<variant>_pca.csv``.
``--only-seed`` trains one seed into ``--seed-cache`` (seeds in parallel processes).
"""

from _dvc import run

from contrastlab.cli import stage_parser
from contrastlab.params import load_params
from contrastlab.training.graph_final import final_mode, run_stage_final, seed_cache_file, train_seed


def main(argv: list[str] | None = None) -> int:
    ap = stage_parser(__doc__, "--data", "--metrics", "--report-data", "--plots")
    ap.add_argument("--variant", required=True)
    ap.add_argument("--tuned", help="folder of tune_graph's choices (required unless --default)")
    ap.add_argument("--ablation", action="store_true",
                    help="loss-batch ablation: graph.final.ablation_batch_nodes and ablation_seeds")
    ap.add_argument("--default", action="store_true",
                    help="the untuned (declared) configuration on graph.final.default_seeds")
    ap.add_argument("--seed-cache", default=None,
                    help="folder of per-seed results: a seed found there is not retrained, "
                    "a seed trained is saved there (runs of single seeds in parallel)")
    ap.add_argument("--only-seed", type=int, default=None,
                    help="train just this seed into --seed-cache and exit (no outputs)")
    args = ap.parse_args(argv)
    if args.tuned is None and not args.default:
        ap.error("--tuned is required (the untuned --default runs alone read no choices)")
    g = load_params(args.params).graph
    if args.only_seed is not None:  # one seed into the cache (seeds in parallel processes)
        import torch

        from contrastlab.data.planetoid import load_planetoid

        torch.set_num_threads(g.threads)
        cfg, _, kind, seeds, _, _ = final_mode(g, args.variant, args.tuned, args.ablation, args.default)
        cache = seed_cache_file(args.seed_cache, f"{kind}_graph@{args.variant}", cfg, g.probe,
                                args.data, args.only_seed)
        if cache is None or args.only_seed not in seeds:
            raise ValueError(f"--only-seed needs --seed-cache and one of the seeds {seeds}")
        train_seed(load_planetoid(args.data, g.dataset)[0], cfg, args.only_seed, g.probe,
                   cache=cache, desc=f"{args.variant} seed {args.only_seed}")
        return 0
    res = run_stage_final(g, args.variant, ablation=args.ablation, default=args.default,
                          data_path=args.data, tuned_dir=args.tuned, metrics_dir=args.metrics,
                          report_data_dir=args.report_data, plots_dir=args.plots,
                          seed_cache=args.seed_cache)
    m = res.metrics
    print(f"{args.variant}: test acc {m['logreg_acc_mean']:.4f} [{m['logreg_acc_ci_low']:.4f}, "
          f"{m['logreg_acc_ci_high']:.4f}] over {m['n_seeds']} seeds", flush=True)
    return 0


if __name__ == "__main__":
    run(main)
