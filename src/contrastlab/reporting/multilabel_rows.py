"""Rows of the multi-label section (:mod:`contrastlab.reporting.multilabel`): the variant
table's multi-label rows, their labels and the paper's numbers, and :func:`rows_for`, the
rows of one report built from the params (nothing module-level changes per report).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..losses.registry import role, title, track_variants

#: The rows, their labels and the paper's numbers: the multi-label section of the variant
#: table (``contrastlab/losses/variants.yaml``; a hybrid's labels name its ``hybrid_base``).
_TABLE = track_variants("multilabel")
#: Declared aliases (``alias_of``): variant -> the variant it equals as a method. An alias is
#: not a row: its target's row carries its name (one method, shown once, ranked once).
ALIASES = {n: v.alias_of for n, v in _TABLE.items() if v.alias_of}
BASELINES = [n for n, v in _TABLE.items() if v.kind == "baseline"]
HYBRID_ROWS = [n for n, v in _TABLE.items() if v.kind == "hybrid"]


@dataclass(frozen=True)
class Rows:
    """The rows of the section and their labels, built from the variant table (and the
    ``multilabel`` params, :func:`rows_for`); nothing module-level is changed per report.

    Attributes:
        base: the contrastive variant whose encoder the hybrids use (``hybrid_base``).
        titles: row label per variant (an alias's target names its alias).
        shorts: short names (CD diagram, headlines).
        table1: the row order of the tables (contrastive variants, hybrids, baselines).
        contrastive: the contrastive rows of ``table1``.
    """

    base: str
    titles: dict[str, str]
    shorts: dict[str, str]
    table1: list[str]
    contrastive: list[str]

    def short(self, v: str) -> str:
        """Short display name of a row (an alias's target names its alias: ``ANY = Sim-Dis Eq. 13``)."""
        return self.shorts.get(v) or self.titles.get(v, v).split(" (")[0]

    def hybrid_pairs(self) -> list[tuple[str, str]]:
        """``(hybrid, reference)`` of every hybrid row: the baseline whose model it reuses
        (``model_of``), else the ``hybrid_base`` variant; hybrids reusing a baseline first."""
        return sorted(((h, _TABLE[h].model_of or self.base) for h in HYBRID_ROWS),
                      key=lambda p: _TABLE[p[0]].model_of is None)


def rows_for(ml=None) -> Rows:
    """The rows for the ``multilabel`` params section ``ml`` (``None``: the variant table's
    own, ``hybrid_base`` its role): the hybrids' labels name ``ml.hybrid_base``'s short name;
    a loss of ``ml.losses`` beyond the table (a loss added to the registry) is a contrastive
    row titled by its registry title, before the hybrids."""
    base = role("multilabel", "hybrid_base")
    base_short = _TABLE[base].short
    titles = {n: v.label(base_short) for n, v in _TABLE.items()}
    shorts = {n: v.short_label(base_short) for n, v in _TABLE.items()}
    for a, t in ALIASES.items():
        titles[t] = f"{titles[t]} = {shorts[a]} (alias: the same gradient)"
        shorts[t] = f"{shorts[t]} = {shorts[a]}"
    contrastive = [n for n, v in _TABLE.items() if v.kind == "contrastive" and n not in ALIASES]
    if ml is not None:
        base = ml.hybrid_base
        base_short = Rows(base, titles, shorts, [], []).short(base)
        for h in HYBRID_ROWS:
            titles[h] = _TABLE[h].label(base_short)
            shorts[h] = _TABLE[h].short_label(base_short)
        for v in ml.losses:
            if v not in contrastive and v not in HYBRID_ROWS and v not in BASELINES:
                contrastive.append(v)
                titles[v] = title(v)
    return Rows(base, titles, shorts, [*contrastive, *HYBRID_ROWS, *BASELINES], contrastive)


#: The variant table's own rows (the report builds its rows from params, :func:`rows_for`).
ROWS = rows_for()
TITLES = ROWS.titles
TABLE1_ROWS = ROWS.table1
CONTRASTIVE = ROWS.contrastive
METRICS = [("micro_f1", "micro-F1 @0.5"), ("macro_f1", "macro-F1 @0.5"),
           ("micro_f1_val_t", "micro-F1 @val-t"), ("macro_f1_val_t", "macro-F1 @val-t"),
           ("map", "mAP"), ("map_frequent", "mAP (frequent labels)")]
#: Short display name of a row of :data:`ROWS` (:meth:`Rows.short`).
short = ROWS.short


ALPHA = 0.05
#: Sim-Dis paper (Huang et al. 2025) Table 1 (image data, ResNet-50) and Table 2 (AAPD,
#: RoBERTa), in %: ``{dataset: {variant: (micro-F1, macro-F1, mAP or None)}}``.
PAPER_TABLE1: dict[str, dict[str, tuple]] = {}
for _n, _v in _TABLE.items():
    for _ds, _vals in _v.paper.get("table1", {}).items():
        PAPER_TABLE1.setdefault(_ds, {})[_n] = tuple(_vals)
#: Sim-Dis paper Table 4 (micro-F1, macro-F1 in %): MS-COCO, AAPD, in the order neither
#: factor, similarity only, dissimilarity only, both.
PAPER_TABLE4: dict[str, tuple] = {
    n: tuple(tuple(p) for p in v.paper["table4"])
    for n, v in sorted(((n, v) for n, v in _TABLE.items() if v.factors and "table4" in v.paper),
                       key=lambda nv: 2 * nv[1].factors[1] + nv[1].factors[0])}


def _paper_name(v: str) -> str:
    """The loss's name in the paper (its registry title)."""
    return title(_TABLE[v].loss or v)
