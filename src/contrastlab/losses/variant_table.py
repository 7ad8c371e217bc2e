"""The variant table, ``losses/variants.yaml``: per track, every row of the comparison (a
registry loss with the keyword arguments it binds, or a baseline), its roles and labels.

This module reads and validates the file against a loss table passed in
(:data:`contrastlab.losses.registry.LOSSES`); :mod:`.registry` loads it once and looks rows
up (``track_variants``, ``variant_spec``, ``role``, ``method_row``, ``table_conflict``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ..errors import InputError

#: The variant table (YAML): per track, every row of the comparison.
VARIANT_TABLE = Path(__file__).with_name("variants.yaml")
#: Which tracks the variant table may hold (the finetune track trains the multi-label losses).
VARIANT_TRACKS = {"graph": "graph", "code": "code", "multilabel": "multilabel",
                  "finetune": "multilabel"}
_VFIELDS = {"loss", "kwargs", "kind", "title", "short", "cite", "factors", "paper",
            "seed_alias", "alias_of", "method", "estimator", "model_keys", "model_of",
            "deterministic", "tuned"}
#: Fields of a variant that both files know: its ``loss`` and the ``kwargs`` it binds.
SHARED_FIELDS = ("loss", "kwargs")


@dataclass(frozen=True)
class VariantSpec:
    """A row of a track's comparison (an entry of ``variants.yaml``, or a registered loss the
    track can train with, which is a variant of its own name). Its configuration (values and
    search space) is not here: it is written once, in ``params.yaml``
    (``<track>.variants.<name>``, whose ``search`` is merged per key over
    ``<track>.tune.search``: :func:`inherit_search`); its ``loss`` and ``kwargs`` are written
    here only (both files: ``registry.table_conflict``).

    Attributes:
        name: variant name (``params.yaml``'s ``<track>.variants`` key, metrics file stem).
        loss: registry loss it trains with; ``None`` for a baseline.
        kwargs: loss keyword arguments the variant binds (e.g. ``{"weighting": "log_prob"}``).
        kind: ``contrastive`` | ``baseline`` | ``hybrid``.
        title: row label; ``{hybrid_base}`` in a hybrid's label stands for the short label of
            the track's ``hybrid_base`` (:meth:`label`).
        short: short label (figures, headlines).
        cite: paper and equation.
        factors: ``(similarity, dissimilarity)`` of the Sim-Dis ablation (Huang et al. 2025,
            Table 4) or ``None``.
        paper: numbers the paper reports for it, ``{"table1": {dataset: [micro, macro, mAP]},
            "table4": [[COCO micro, macro], [AAPD micro, macro]]}`` (in %).
        seed_alias: variant whose tuning sampler seed this one uses (or ``None``).
        alias_of: variant this one equals as a method (the same gradient, e.g. Sim-Dis Eq. 13 =
            ANY, Huang et al. 2025, Eq. 13): it is not trained, its row is the alias's (or ``None``).
        method: how a baseline or hybrid row is fitted (training dispatches on it, never on the
            row's name; ``""`` for a contrastive variant), e.g. ``forest``, ``neighbours``.
        estimator: the scikit-learn class of a ``forest`` baseline (``ExtraTreesClassifier``).
        model_keys: the hyperparameters of a scikit-learn baseline (``model`` block, search keys).
        model_of: the baseline whose model and tuned choices a hybrid reuses (and the row the
            headline compares it with); ``None``: the track's ``hybrid_base``.
        deterministic: the row gives the same output for every seed (trained on one seed).
        tuned: ``False`` for a row that chooses its own hyperparameter inside every run (nothing
            tuned to report).
    """

    name: str
    loss: str | None
    kwargs: dict[str, Any] = field(default_factory=dict)
    kind: str = "contrastive"
    title: str = ""
    short: str = ""
    cite: str = ""
    factors: tuple[bool, bool] | None = None
    paper: dict[str, Any] = field(default_factory=dict)
    seed_alias: str | None = None
    alias_of: str | None = None
    method: str = ""
    estimator: str = ""
    model_keys: tuple[str, ...] | None = None
    model_defaults: tuple[tuple[str, Any], ...] = ()
    model_of: str | None = None
    deterministic: bool = False
    tuned: bool = True

    def label(self, hybrid_base: str = "") -> str:
        """:attr:`title` with ``{hybrid_base}`` filled in."""
        return self.title.replace("{hybrid_base}", hybrid_base)

    def short_label(self, hybrid_base: str = "") -> str:
        """:attr:`short` with ``{hybrid_base}`` filled in."""
        return self.short.replace("{hybrid_base}", hybrid_base)


def parse_variant(track: str, name: str, e: dict, where: str, losses: Mapping) -> VariantSpec:
    """The :class:`VariantSpec` of entry ``e`` (``losses``: the registry, ``{name: LossSpec}``,
    whose ``title`` and ``cite`` label a row that sets none).

    Raises:
        contrastlab.errors.InputError: ``e`` holds ``params``, an unknown key or kind, or a
            loss ``losses`` lacks.
    """
    if "params" in e:
        raise InputError(f"{where}: params: a variant's configuration (values and search space) "
                         f"is written in params.yaml only, as {track}.variants.{name}; remove it here")
    unknown = set(e) - _VFIELDS
    if unknown:
        raise InputError(f"{where}: unknown keys {sorted(unknown)} (keys: {', '.join(sorted(_VFIELDS))})")
    kind = str(e.get("kind") or "contrastive")
    loss = e.get("loss", name if kind == "contrastive" else None)
    if kind not in ("contrastive", "baseline", "hybrid"):
        raise InputError(f"{where}: kind {kind!r} is not contrastive, baseline or hybrid")
    if loss is not None and loss not in losses:
        raise InputError(f"{where}: loss {loss!r} is not in registry.yaml")
    spec = losses.get(loss) if loss else None
    title = str(e.get("title") or (spec.title if spec else name))
    factors = e.get("factors")
    keys = e.get("model_keys")
    return VariantSpec(name, loss, dict(e.get("kwargs") or {}), kind, title,
                       str(e.get("short") or title.split(" (")[0]),
                       str(e.get("cite") or (spec.cite if spec else "")),
                       tuple(bool(x) for x in factors) if factors else None,
                       dict(e.get("paper") or {}), e.get("seed_alias"),
                       e.get("alias_of"), method=str(e.get("method") or ""),
                       estimator=str(e.get("estimator") or ""),
                       model_keys=tuple(str(k) for k in keys) if "model_keys" in e else None,
                       model_defaults=(tuple((str(k), v) for k, v in keys.items())
                                       if isinstance(keys, dict) else ()),
                       model_of=e.get("model_of"), deterministic=bool(e.get("deterministic", False)),
                       tuned=bool(e.get("tuned", True)))


def read_yaml(path: str | Path, what: str) -> tuple[Path, Any]:
    """``(Path(path), its parsed YAML)`` (an empty file: ``{}``).

    Raises:
        contrastlab.errors.InputError: unreadable or not YAML (naming ``what`` the file is).
    """
    import yaml

    path = Path(path)
    try:
        return path, yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as e:
        raise InputError(f"{path}: cannot read {what} ({e})") from e


def load_variant_table(path: str | Path, losses: Mapping) -> dict[str, dict[str, Any]]:
    """``{track: {"roles": {role: variant}, "variants": {name: VariantSpec}, "written": {name:
    the keys its entry sets itself}}}`` of ``path`` (file order), its losses checked against
    ``losses`` (the registry, ``{name: LossSpec}``).

    Raises:
        contrastlab.errors.InputError: the file does not parse, a track is unknown, an entry
            has an unknown key or kind, names a loss ``losses`` lacks, an ``alias_of`` that is
            not a non-alias row of its track or a ``model_of`` that is not a baseline.
    """
    path, doc = read_yaml(path, "the variant table")
    out: dict[str, dict[str, Any]] = {}
    for track, sec in doc.items():
        if track not in VARIANT_TRACKS or not isinstance(sec, dict):
            raise InputError(f"{path}: {track!r} is not a track section "
                             f"({', '.join(VARIANT_TRACKS)})")
        rows = sec.get("variants") or {}
        vs = {str(n): parse_variant(track, str(n), dict(e or {}), f"{path}: {track}.variants.{n}",
                                    losses) for n, e in rows.items()}
        out[track] = {"roles": dict(sec.get("roles") or {}), "variants": vs,
                      "written": {str(n): frozenset(str(k) for k in (e or {}))
                                  for n, e in rows.items()}}
        for n, v in vs.items():
            if v.alias_of is not None and (v.alias_of not in vs or vs[v.alias_of].alias_of is not None):
                raise InputError(f"{path}: {track}.variants.{n}: alias_of {v.alias_of!r} is not a "
                                 f"variant of {track} that is not itself an alias")
            if v.model_of is not None and (v.kind != "hybrid" or vs.get(v.model_of, v).kind != "baseline"):
                raise InputError(f"{path}: {track}.variants.{n}: model_of {v.model_of!r} must name a "
                                 f"baseline of {track}, on a hybrid")
    return out


def inherit_search(default: dict, own, written: bool) -> dict:
    """A variant's search space over its track's default ``default`` (``<track>.tune.search``).

    ``written`` False (the variant's block has no ``search``): the default. ``own`` None
    (``search: null``): nothing searched (scored once at its declared values). A mapping:
    merged per key over the default: a key it sets replaces that dimension (in the default's
    place), a new key is appended, a key set to null drops the default's dimension."""
    if not written:
        return dict(default)
    if own is None:
        return {}
    return {k: v for k, v in {**default, **own}.items() if v is not None}
