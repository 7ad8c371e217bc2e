"""Train / val / test split by repository (as in the retrieval experiment notes; RNG seed 42).

Whole repository groups go to one split (:func:`repository_groups`: a shared top-level
package or name family), and near-duplicate bodies (MinHash LSH, :func:`near_duplicate_groups`)
never sit on both sides (:func:`assign_splits`). Repositories are visited in a seeded order,
each to the split furthest below its target share; with three or more, every split gets one.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from ..errors import InputError

__all__ = ["split_functions", "split_by_repository", "SPLITS", "split_summary", "name_family", "repository_groups",
           "top_level_names", "token_shingles", "near_duplicate_groups", "assign_splits"]

SPLITS = ("train", "val", "test")


def split_by_repository(repo_sizes: dict[str, int], fractions: tuple[float, float, float] = (0.8, 0.1, 0.1),
                        seed: int = 42) -> dict[str, str]:
    """Assign each repository to ``train``, ``val`` or ``test``.

    Args:
        repo_sizes: repository name -> number of functions (> 0).
        fractions: target share of functions for train, val, test (sum 1).
        seed: order of the greedy assignment.

    Returns:
        repository name -> split name.

    Raises:
        ValueError: fewer than 3 repositories, or fractions not summing to 1.
    """
    if len(repo_sizes) < 3:
        raise InputError(f"need at least 3 repositories to split by repository, got {len(repo_sizes)}")
    if abs(sum(fractions) - 1.0) > 1e-6:
        raise InputError(f"split fractions must sum to 1, got {fractions}")
    names = sorted(repo_sizes)
    rng = np.random.default_rng(seed)
    order = [names[i] for i in rng.permutation(len(names))]
    total = float(sum(repo_sizes.values()))
    counts = np.zeros(3)
    target = np.asarray(fractions) * total
    out: dict[str, str] = {}
    for name in order:
        # the split furthest below its target share (train first on ties), so with three
        # or more repositories every split receives one
        j = int(np.argmax((target - counts) / target))
        out[name] = SPLITS[j]
        counts[j] += repo_sizes[name]
    return out


def split_summary(df: Any) -> dict[str, Any]:
    """Counts of functions and repositories per split (``df`` has ``repo`` and ``split``)."""
    out: dict[str, Any] = {}
    for s in (*SPLITS, "excluded"):
        part = df[df["split"] == s]
        out[s] = {"functions": int(len(part)), "repositories": sorted(part["repo"].unique().tolist())}
    return out


# --------------------------------------------------------------------------- leakage control
_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+|[^\sA-Za-z0-9_]")
_FAMILY_SEP = re.compile(r"[-_.]")
#: Top-level folders some distributions ship that say nothing about shared code.
_GENERIC_TOP = {"__init__", "tests", "test", "testing", "docs", "examples", "benchmarks",
                "scripts", "bin", "src", "_vendor", "setup", "conftest"}


class _UnionFind:
    def __init__(self, items):
        self.parent = {x: x for x in items}

    def find(self, x):
        root = x
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[x] != root:
            self.parent[x], x = root, self.parent[x]
        return root

    def union(self, a, b) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            # the smaller name is the root, so group names do not depend on visiting order
            lo, hi = sorted((ra, rb))
            self.parent[hi] = lo


def name_family(name: str, stop: Iterable[str] = ("python", "py", "types")) -> str:
    """First component of a normalised distribution name (PEP 503: lower case, ``-_.`` runs
    are one separator): ``mlflow-skinny`` -> ``mlflow``, ``opentelemetry-sdk`` ->
    ``opentelemetry``. A first component in ``stop`` (``python-dateutil``) is not a family:
    the whole normalised name is returned."""
    norm = re.sub(r"[-_.]+", "-", name.lower())
    head = _FAMILY_SEP.split(norm, 1)[0]
    return norm if head in set(stop) else head


def repository_groups(top_levels: Mapping[str, Iterable[str]],
                      stop: Iterable[str] = ("python", "py", "types")) -> dict[str, str]:
    """Group repositories that must land in one split.

    Two repositories are joined when they ship a common top-level package (first path
    component of their files, e.g. ``mlflow/`` in both ``mlflow`` and ``mlflow-skinny``) or
    share a name family (:func:`name_family`: ``dvc`` / ``dvc-data``, ``opentelemetry-*``);
    the relation is closed transitively (union-find).

    Args:
        top_levels: repository name -> its top-level package or module names.
        stop: name prefixes that do not make a family.

    Returns:
        repository name -> group name (the alphabetically first member).
    """
    names = sorted(top_levels)
    uf = _UnionFind(names)
    by_key: dict[tuple[str, str], str] = {}
    for n in names:
        keys = [("family", name_family(n, stop))]
        keys += [("pkg", t) for t in top_levels[n] if t and t not in _GENERIC_TOP]
        for k in keys:
            if k in by_key:
                uf.union(n, by_key[k])
            else:
                by_key[k] = n
    return {n: uf.find(n) for n in names}


def top_level_names(paths: Iterable[str]) -> set[str]:
    """Top-level package or module names of repository-relative file paths
    (``mlflow/a/b.py`` -> ``mlflow``, ``six.py`` -> ``six``)."""
    out = set()
    for p in paths:
        head = p.split("/", 1)[0]
        out.add(head[:-3] if head.endswith(".py") and "/" not in p else head)
    return out


def token_shingles(text: str, k: int = 3) -> set[str]:
    """Set of ``k``-token shingles of ``text`` (identifiers, numbers, single punctuation
    characters; whitespace ignored). Texts shorter than ``k`` tokens give one shingle."""
    toks = _TOKEN.findall(text)
    if len(toks) <= k:
        return {" ".join(toks)}
    return {" ".join(toks[i:i + k]) for i in range(len(toks) - k + 1)}


def near_duplicate_groups(bodies: Sequence[str], threshold: float = 0.8, k: int = 3,
                          num_perm: int = 128, seed: int = 1) -> np.ndarray:
    """Group near-duplicate bodies: MinHash LSH (Broder 1997; datasketch's ``MinHashLSH``,
    Leskovec, Rajaraman & Ullman, *Mining of Massive Datasets*, ch. 3) on token
    ``k``-shingles, candidates confirmed by their exact Jaccard similarity ``>= threshold``,
    groups closed transitively.

    Args:
        bodies: ``N`` texts.
        threshold: Jaccard similarity of the shingle sets, in ``(0, 1]``.
        k: tokens per shingle. num_perm: MinHash permutations. seed: MinHash seed.

    Returns:
        int64 ``[N]`` group ids: the smallest row index of each group (a body alone is its
        own group).
    """
    from datasketch import MinHash, MinHashLSH

    if not 0 < threshold <= 1:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")
    sh = [token_shingles(b, k) for b in bodies]
    lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)
    uf = _UnionFind(range(len(bodies)))
    for i, s in enumerate(sh):
        m = MinHash(num_perm=num_perm, seed=seed)
        m.update_batch([x.encode("utf-8") for x in s])
        for j in lsh.query(m):
            if len(s & sh[j]) / max(1, len(s | sh[j])) >= threshold:
                uf.union(i, j)
        lsh.insert(i, m)
    return np.array([uf.find(i) for i in range(len(bodies))], dtype=np.int64)


def assign_splits(repos: Sequence[str], groups: Mapping[str, str], dup_group: np.ndarray,
                  fractions: tuple[float, float, float] = (0.8, 0.1, 0.1),
                  seed: int = 42) -> np.ndarray:
    """Split functions by repository group, then exclude cross-split near-duplicates.

    Args:
        repos: ``[N]`` repository of each function.
        groups: repository -> repository group (:func:`repository_groups`).
        dup_group: ``[N]`` near-duplicate group ids (:func:`near_duplicate_groups`).
        fractions, seed: see :func:`split_by_repository` (applied to the groups).

    Returns:
        ``[N]`` array of ``train|val|test|excluded``. A near-duplicate group's members that
        land in another split than the group's first member (smallest row) are
        ``excluded``: kept in the retrieval corpus, never trained on or queried.
    """
    repos = np.asarray(repos)
    gnames = np.array([groups[r] for r in repos])
    sizes = dict(zip(*np.unique(gnames, return_counts=True)))
    assign = split_by_repository({str(k): int(v) for k, v in sizes.items()}, fractions, seed)
    split = np.array([assign[g] for g in gnames], dtype=object)
    first = split[np.asarray(dup_group)]
    return np.where(first == split, split, "excluded").astype(object)


def split_functions(df, s) -> tuple[Any, dict[str, Any]]:
    """The repository-grouped, near-duplicate-aware split of the extracted functions (stage
    ``split_by_repo``).

    Args:
        df: the functions (``id``, ``repo``, ``path``, ``body``), any row order.
        s: the ``code.split`` params (fractions, seed, ``family_stop``, MinHash settings).

    Returns:
        ``(splits, summary)``: a DataFrame in id order (``id, repo, repo_group, dup_group,
        split``) and the summary written to ``splits.json`` (per split: functions,
        repositories, repository groups; near-duplicate groups; joined repositories).
    """
    import pandas as pd

    df = df.sort_values("id").reset_index(drop=True)
    tops = {r: top_level_names(g["path"]) for r, g in df.groupby("repo")}
    groups = repository_groups(tops, stop=s.family_stop)
    dup = near_duplicate_groups(df["body"].tolist(), s.near_dup_threshold, s.shingle, s.num_perm)
    split = assign_splits(df["repo"].to_numpy(), groups, dup, (s.train, s.val, s.test), s.seed)
    out = pd.DataFrame({"id": df["id"].to_numpy(), "repo": df["repo"].to_numpy(),
                        "repo_group": [groups[r] for r in df["repo"]],
                        "dup_group": df["id"].to_numpy()[dup], "split": split.astype(str)})
    summary = split_summary(out)
    for k, v in summary.items():
        v["repository_groups"] = int(out.loc[out["split"] == k, "repo_group"].nunique())
    summary["near_duplicates"] = {
        "functions_in_groups": int((np.bincount(dup, minlength=len(dup))[dup] > 1).sum()),
        "groups": int(sum(1 for c in np.bincount(dup) if c > 1))}
    summary["joined_repositories"] = {g: sorted(r for r, gg in groups.items() if gg == g)
                                      for g in sorted(set(groups.values()))
                                      if sum(1 for gg in groups.values() if gg == g) > 1}
    return out, summary
