"""Build the fine-tuning table of HumanEval variants (sandboxed tiers + splits).

Tiers: :func:`contrastlab.data.humaneval.tier_problem` (HumanEval, Chen et al. 2021; each
assertion run in the :mod:`contrastlab.sandbox` bubblewrap sandbox); splits:
:func:`contrastlab.finetune.data.make_splits`.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from .data import SPLITS, TIERS, make_splits, strip_docstrings

__all__ = ["build_variants"]


def build_variants(ft, h):
    """All variants with tier, text and split.

    Args:
        ft: :class:`contrastlab.params.finetune.FinetuneParams`.
        h: ``multilabel.humaneval`` params (variants per problem, sandbox limits, seed).

    Returns:
        ``(df, stats)``: a pandas DataFrame (one row per variant: ``id`` = ``<problem>/<variant>``,
        ``problem``, ``tier``, ``mutation``, ``variant``, ``source``, ``text``, ``split``)
        and a JSON-able dict of counts.

    Raises:
        contrastlab.sandbox.SandboxUnavailable: bubblewrap cannot start and
            ``allow_unsandboxed`` is false.
    """
    import pandas as pd

    from ..data.humaneval import load_problems, sandbox_mode, tier_problem

    mode = sandbox_mode(allow_unsandboxed=h.allow_unsandboxed)
    probs = load_problems(ft.data.max_problems)
    sandbox = dict(timeout_s=h.timeout_s, assert_timeout_s=min(1.0, h.timeout_s), cpu_s=h.cpu_s,
                   memory_mb=h.memory_mb, fsize_mb=h.fsize_mb, mode=mode)
    with ThreadPoolExecutor(h.workers) as pool:
        jobs = [pool.submit(tier_problem, pr, h.variants_per_problem, h.seed + i, **sandbox)
                for i, pr in enumerate(probs)]
        rows = [r for j in jobs for r in j.result()]
    df = pd.DataFrame(rows)[["problem", "variant", "mutation", "source", "tier"]]
    df.insert(0, "id", [f"{p}/{v}" for p, v in zip(df["problem"], df["variant"])])
    df["text"] = [strip_docstrings(s) if ft.strip_docstrings else s for s in df["source"]]
    d = ft.data
    df["split"] = make_splits(df["problem"].to_numpy(), df["tier"].to_numpy(),
                              test_problem_fraction=d.test_problem_fraction,
                              test_fraction=d.test_fraction, val_fraction=d.val_fraction,
                              seed=d.seed)
    stats = {"n_variants": int(len(df)), "n_problems": int(df["problem"].nunique()),
             "sandbox": mode,
             "splits": {s: int((df["split"] == s).sum()) for s in SPLITS},
             "tiers": {s: {t: int(((df["split"] == s) & (df["tier"] == t)).sum()) for t in TIERS}
                       for s in SPLITS},
             "problems_per_split": {s: int(df.loc[df["split"] == s, "problem"].nunique())
                                    for s in SPLITS}}
    return df, stats

