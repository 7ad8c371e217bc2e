"""Loss-specific knobs of ``params.yaml`` checked against the loss functions themselves.

A variant's loss-specific keys (graph: the variant's extra keys such as ``alpha`` or
``n_hard``; multi-label: ``multilabel.variants.<loss>.kwargs``) must be keyword arguments of
the registered loss (:attr:`contrastlab.losses.LossSpec.kwargs`). The check imports the loss
modules, so it is not part of :func:`contrastlab.params.load_params` (which every stage runs
and which must not make every stage depend on every loss file); the ``validate_params``
stage runs it once, before any other stage.
"""

from __future__ import annotations

from pathlib import Path

from . import Params, ParamsError
from ..losses.registry import get_spec

#: This module loads every registry loss (read by ``scripts/stage_deps.py``).
LOSS_NEEDS = "*"

__all__ = ["loss_keyword_errors", "check_loss_keywords", "loss_code"]


def _bad(loss: str, keys, where: str) -> list[str]:
    spec = get_spec(loss)
    try:
        accepted = spec.kwargs
    except (ImportError, AttributeError) as e:
        return [f"{where}: loss {loss!r} cannot be imported from {spec.target}: {e}"]
    return [f"{where}.{k}: not a keyword argument of loss {loss!r} ({spec.target}); "
            f"it accepts: {', '.join(sorted(accepted)) or 'none'}"
            for k in keys if k not in accepted]


def loss_keyword_errors(p: Params) -> list[str]:
    """Every loss-specific key of ``p`` that its loss does not accept, as
    ``"graph.variants.<v>.<key>: ..."`` lines (empty: all good)."""
    errs: list[str] = []
    for name, v in p.graph.variants.items():
        errs += _bad(v.loss, list((v.model_extra or {})) + ["temperature"],
                     f"graph.variants.{name}")
    from .multilabel import variant_loss

    for name, v in p.multilabel.variants.items():
        loss = variant_loss(name)[0]  # None: a baseline (logistic regression, BCE MLP)
        if name in p.multilabel.losses and loss is not None:
            errs += _bad(loss, list(v.kwargs), f"multilabel.variants.{name}.kwargs")
    return errs


def check_loss_keywords(p: Params, path: str | Path = "params.yaml") -> None:
    """Raise :class:`ParamsError` naming the file and every offending dotted key."""
    errs = loss_keyword_errors(p)
    if errs:
        raise ParamsError(f"{path}: invalid loss keyword(s) ({len(errs)} problem(s)):\n"
                          + "\n".join(f"  - {e}" for e in errs))


def loss_code(p: Params, raw: dict) -> dict:
    """The content of ``data/loss_code.yaml`` (written by the ``validate_params`` stage): for
    every registered loss and for every variant of every track, the
    :func:`~contrastlab.losses.registry.code_digest` of the loss it trains with.

    Args:
        p: the validated params.
        raw: the same params file as loaded by ``yaml.safe_load`` (a row's
            ``variant_sha256`` hashes its ``<track>.variants.<name>`` block as written).

    ``needs.<needs>.<loss>``: every registry loss, grouped by what it consumes (a stage that
    may load any loss of a kind depends on the whole group), with its files.
    ``variants.<track>.<variant>``: ``{"loss", "sha256"}`` of the loss of one variant
    (``{"loss": null}`` for a baseline without a contrastive loss; a graph fine-tuning row of
    ``graph.finetune``: its pre-training variant's loss, and its own block), and for a row of
    ``variants.yaml`` ``variant_sha256``, the hash of what it binds for training: its loss, its
    ``kwargs``, how a baseline or hybrid is fitted (``method``, ``estimator``, ``model_keys``
    defaults, ``model_of``, ``deterministic``, ``tuned``) and its configuration, the ``<track>.variants.<name>`` block of ``raw`` as
    written (null where the file has none); a per-variant stage depends on exactly this key, so adding a loss, or editing a file that
    only other losses use, leaves it up to date (docs/usage.md).
    ``roles.<track>.<role>``: the variant with that job (``variants.yaml`` ``roles:``, the only
    place a role is written; DVC cannot read it there), e.g. ``roles.multilabel.hybrid_base``;
    a stage whose code reads a role depends on its key, so changing the role reruns it.
    """
    import hashlib
    import json

    from ..losses.registry import LOSSES, VARIANTS, code_digest, track_variants
    from .finetune import FINETUNE_VARIANTS
    from .multilabel import variant_loss

    needs: dict[str, dict] = {}
    for name, spec in LOSSES.items():
        needs.setdefault(spec.needs, {})[name] = code_digest(name)
    by_name = {n: d for group in needs.values() for n, d in group.items()}

    def declared(track: str, variant: str, section: str = "variants") -> dict | None:
        sec = raw.get(track)
        block = sec.get(section) if isinstance(sec, dict) else None
        return block.get(variant) if isinstance(block, dict) else None

    def of(loss: str | None, track: str = "", variant: str = "", section: str = "variants") -> dict:
        # the files are listed once, under needs; a row of variants.yaml adds the hash of
        # what it binds for training (loss, kwargs, its params.yaml block), not its labels
        out = {"loss": loss, "sha256": by_name[loss]["sha256"]} if loss else {"loss": None}
        row = track_variants(track).get(variant) if track else None
        if row is not None:
            bound = {"loss": row.loss, "kwargs": row.kwargs, "params": declared(track, variant, section)}
            # how a baseline or hybrid row is fitted (the fields training dispatches on), only
            # where set, so a loss row's hash is what it was before these fields existed
            how = {k: v for k, v, unset in (
                ("method", row.method, ""), ("estimator", row.estimator, ""),
                ("model_defaults", [list(x) for x in row.model_defaults], []),
                ("model_of", row.model_of, None), ("deterministic", row.deterministic, False),
                ("tuned", row.tuned, True)) if v != unset}
            if how:
                bound["how"] = how
            out["variant_sha256"] = hashlib.sha256(
                json.dumps(bound, sort_keys=True).encode()).hexdigest()
        return out

    ml = p.multilabel
    hybrid = variant_loss(ml.hybrid_base)[0]
    variants = {
        "graph": {**{v: of(x.loss, "graph", v) for v, x in p.graph.variants.items()},
                  # a fine-tuning row trains its pre-training variant's loss
                  **{v: of(p.graph.variants[x.pretrain].loss, "graph", v, "finetune")
                     for v, x in p.graph.finetune.items()}},
        "code": {v: of(x.loss, "code", v) for v, x in p.code.variants.items()},
        "multilabel": {**{v: of(variant_loss(v)[0], "multilabel", v) for v in ml.losses},
                       **{h: of(hybrid, "multilabel", h) for h in ml.hybrids}},
        "finetune": {v: of(FINETUNE_VARIANTS.get(v, (v, {}))[0], "finetune", v)
                     for v in p.finetune.variants},
    }
    roles = {t: dict(sec["roles"]) for t, sec in VARIANTS.items() if sec.get("roles")}
    return {"needs": needs, "roles": roles, "variants": variants}
