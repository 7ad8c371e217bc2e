"""The loss registry: name -> where the loss lives and what it needs.

The table itself is data, ``losses/registry.yaml`` (one entry per loss), so that adding a
loss changes no Python file that stages import: DVC stages depend on the entries they use
(:func:`code_digest`, ``data/loss_code.yaml``), not on the whole table. ``params.yaml`` and
the reports refer to losses by these names. Entries are lazy (``"module:function"``) so that
importing the registry imports no loss module.

Adding a loss: write ``src/contrastlab/losses/<yours>.py`` with a function following the
conventions of this package (see ``contrastlab/losses/__init__.py``), then add one entry to
``registry.yaml``. Every stage that takes a ``loss`` param, and every report table, picks
it up by name.

``needs`` says what the loss consumes besides embeddings:
- ``views``: two (or ``n_views``) augmented views of the same samples, no labels;
- ``labels``: integer class labels ``[N]`` (or an explicit positive mask);
- ``multilabels``: multi-hot labels ``[N, C]``;
- ``targets``: paired target vectors (retrieval: prediction i <-> target i);
- ``regression``: paired target vectors, no negatives.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib
import inspect
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..errors import InputError, UnknownNameError
from .variant_table import (SHARED_FIELDS, VARIANT_TABLE, VARIANT_TRACKS, VariantSpec,
                            inherit_search, parse_variant, read_yaml)
from .variant_table import load_variant_table as _load_variants

#: The table (YAML, one mapping per loss name).
TABLE = Path(__file__).with_name("registry.yaml")
#: ``src/`` (paths in :func:`code_digest` are relative to its parent, the project root).
_SRC = Path(__file__).resolve().parents[2]


#: Keyword arguments that are plumbing (reduction, distributed slices, randomness, test
#: hooks), not knobs a user sets in ``params.yaml``; :attr:`LossSpec.kwargs` leaves them out.
PLUMBING = frozenset({"reduction", "return_stats", "contrast_features", "contrast_labels",
                      "anchor_offset", "offset", "generator", "mixing", "contrast_mode",
                      "targets_with_grad", "eps"})

#: Which ``needs`` each track can train with (the params validators and the training code
#: accept exactly these; ``scripts/stage_deps.py`` reads the same from ``LOSS_NEEDS``).
TRACK_NEEDS: dict[str, tuple[str, ...]] = {"graph": ("views",), "code": ("targets", "regression"),
                                            "multilabel": ("multilabels",)}


@dataclass(frozen=True)
class LossSpec:
    """A registry entry.

    Attributes:
        target: ``"module:function"``, imported on first use.
        needs: what the loss consumes besides embeddings (see the module docstring); the
            tracks accept the losses whose ``needs`` is in :data:`TRACK_NEEDS`.
        family: ``supervised`` | ``multilabel`` | ``retrieval`` | ``selfsup`` (documentation
            and report grouping).
        title: row label in the reports.
        defaults: keyword arguments bound when loading (e.g. ``{"mode": "sim_only"}``).
        stochastic: the loss draws random numbers and takes ``generator=`` (a
            ``torch.Generator``); training passes its generator so reruns are bitwise equal.
        cite: paper and equation (the reports' source column); may be empty.
    """

    target: str
    needs: str
    family: str
    title: str
    defaults: dict[str, Any] = field(default_factory=dict)
    stochastic: bool = False
    cite: str = ""

    @property
    def module(self) -> str:
        """Dotted module name of the loss function."""
        return self.target.partition(":")[0]

    def function(self) -> Callable[..., Any]:
        """The loss function itself (import on first use, nothing bound)."""
        mod, _, fn = self.target.partition(":")
        return getattr(importlib.import_module(mod), fn)

    def load(self) -> Callable[..., Any]:
        """Import and return the loss function (with ``defaults`` bound as keywords)."""
        f = self.function()
        return functools.partial(f, **self.defaults) if self.defaults else f

    @property
    def kwargs(self) -> dict[str, Any]:
        """The loss-specific knobs: keyword arguments of the function with a default value
        (``{name: default}``), without :data:`PLUMBING` and without ``defaults`` (bound).
        Imports the loss module. ``params.yaml`` may set exactly these per variant."""
        sig = inspect.signature(self.function())
        out = {}
        for name, p in sig.parameters.items():
            if (p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is not p.empty
                    and name not in PLUMBING and name not in self.defaults):
                out[name] = p.default
        return out


_FIELDS = {"target", "needs", "family", "title", "defaults", "stochastic", "cite"}
#: Entry fields that only label reports (left out of :func:`code_digest`).
LABEL_FIELDS = frozenset({"title", "cite"})


def load_table(path: str | Path = TABLE) -> dict[str, LossSpec]:
    """The registry table of ``path`` as ``{name: LossSpec}`` in file order.

    Raises:
        contrastlab.errors.InputError: the file does not parse, an entry is not a mapping,
            lacks ``target``/``needs``/``family``/``title`` or has an unknown key, or a
            ``target`` is not ``"module:function"``.
    """
    path, doc = read_yaml(path, "the loss registry")
    if not isinstance(doc, dict):
        raise InputError(f"{path}: expected a mapping of loss name -> entry")
    out: dict[str, LossSpec] = {}
    for name, e in doc.items():
        where = f"{path}: loss {name!r}"
        if not isinstance(e, dict):
            raise InputError(f"{where}: expected a mapping, got {type(e).__name__}")
        unknown = set(e) - _FIELDS
        lacking = {"target", "needs", "family", "title"} - set(e)
        if unknown or lacking:
            raise InputError(f"{where}: unknown keys {sorted(unknown)}, missing keys "
                             f"{sorted(lacking)} (keys: {', '.join(sorted(_FIELDS))})")
        mod, sep, fn = str(e["target"]).partition(":")
        if not sep or not mod.startswith("contrastlab.") or not fn.isidentifier():
            raise InputError(f"{where}: target {e['target']!r} is not "
                             "'contrastlab.<module>:<function>'")
        out[str(name)] = LossSpec(str(e["target"]), str(e["needs"]), str(e["family"]),
                                  str(e["title"]), dict(e.get("defaults") or {}),
                                  bool(e.get("stochastic", False)), str(e.get("cite") or ""))
    return out


#: name -> :class:`LossSpec`, from ``registry.yaml``.
LOSSES: dict[str, LossSpec] = load_table()


def names_for(track: str) -> list[str]:
    """Registry names a track can train with (``needs`` in ``TRACK_NEEDS[track]``), in
    registry order. Reads only this file (imports no loss module)."""
    if track not in TRACK_NEEDS:
        raise KeyError(f"unknown track {track!r}; known: {', '.join(TRACK_NEEDS)}")
    return [n for n, s in LOSSES.items() if s.needs in TRACK_NEEDS[track]]


def check_name(track: str, name: str, kind: str) -> str:
    """``name`` if it is a registry loss ``track`` can train with, else ``ValueError`` naming
    ``kind`` (e.g. "two-view loss") and the known names (used by the params validators)."""
    ok = names_for(track)
    if name not in ok:
        raise ValueError(f"{name!r} is not a registered {kind}; known: {', '.join(ok)}")
    return name


def title(name: str) -> str:
    """Report label of ``name`` (the registry title; the name itself if not registered)."""
    spec = LOSSES.get(name)
    return spec.title if spec is not None else name


def get_spec(name: str) -> LossSpec:
    """Registry entry of ``name``.

    Raises:
        contrastlab.errors.UnknownNameError: (a ``KeyError`` and an ``InputError``) ``name``
            is not registered; the message lists the known names.
    """
    try:
        return LOSSES[name]
    except KeyError:
        raise UnknownNameError(f"unknown loss {name!r}; known: {', '.join(sorted(LOSSES))}") from None


def get_loss(name: str) -> Callable[..., Any]:
    """The loss function registered as ``name``."""
    return get_spec(name).load()


def source_files(name: str) -> list[str]:
    """The source files loss ``name`` runs: its module and, transitively, every module of
    the ``contrastlab`` package it imports (imports inside functions included; package
    ``__init__`` files left out), as sorted paths relative to the project root
    (``src/contrastlab/losses/selfsup.py``, ...).

    Raises:
        contrastlab.errors.UnknownNameError: ``name`` is not registered.
    """
    todo, seen = [get_spec(name).module], set()
    while todo:
        mod = todo.pop()
        f = _module_file(mod)
        if f is None or f in seen:
            continue
        seen.add(f)
        pkg = mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"), str(f))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = ".".join(pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                                    + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                if base.split(".")[0] == "contrastlab":
                    todo.append(base)
                    todo.extend(f"{base}.{a.name}" for a in node.names)
            elif isinstance(node, ast.Import):
                todo.extend(a.name for a in node.names if a.name.split(".")[0] == "contrastlab")
    return sorted(p.relative_to(_SRC.parent).as_posix() for p in seen
                  if p.name != "__init__.py")


def _module_file(dotted: str) -> Path | None:
    base = _SRC.joinpath(*dotted.split("."))
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    return None


def code_digest(name: str) -> dict[str, Any]:
    """What a stage that trains with loss ``name`` depends on, in one comparable value:
    ``{"loss", "sha256", "files"}``, the SHA-256 of the registry entry (as sorted JSON, without
    the report labels :data:`LABEL_FIELDS`, which change no training) and
    of the bytes of every file of :func:`source_files`. Written to ``data/loss_code.yaml`` by
    the ``validate_params`` stage; a stage depends on its own entry there (a DVC ``params``
    dependency), so adding a loss or editing another loss's file leaves it up to date.

    Raises:
        contrastlab.errors.UnknownNameError: ``name`` is not registered.
    """
    files = source_files(name)
    entry = {k: v for k, v in asdict(get_spec(name)).items() if k not in LABEL_FIELDS}
    h = hashlib.sha256(json.dumps(entry, sort_keys=True).encode())
    for rel in files:
        h.update(rel.encode() + b"\0" + (_SRC.parent / rel).read_bytes() + b"\0")
    return {"loss": name, "sha256": h.hexdigest(), "files": files}


# --------------------------------------------------------------------------- variants
def load_variant_table(path: str | Path = VARIANT_TABLE) -> dict[str, dict[str, Any]]:
    """:func:`.variant_table.load_variant_table` of ``path`` against :data:`LOSSES`."""
    return _load_variants(path, LOSSES)


#: track -> roles and variants, from ``variants.yaml``.
VARIANTS: dict[str, dict[str, Any]] = load_variant_table()


def track_variants(track: str) -> dict[str, VariantSpec]:
    """The variants ``variants.yaml`` lists for ``track``, in file order."""
    return dict(VARIANTS.get(track, {}).get("variants", {}))


def table_keys(track: str, name: str) -> frozenset[str]:
    """The fields the ``variants.yaml`` entry of ``name`` in ``track`` sets itself (empty for a
    variant the table does not list): a field set here is not set again in ``params.yaml``
    (:func:`table_conflict`)."""
    return VARIANTS.get(track, {}).get("written", {}).get(name, frozenset())


def table_conflict(track: str, name: str, written, section: str = "variants") -> str | None:
    """The error line for a field of ``SHARED_FIELDS`` that ``params.yaml`` sets for variant
    ``name`` (``written``: the fields its ``<track>.<section>.<name>`` block sets) and
    ``variants.yaml`` sets too, e.g. ``"multilabel.variants.simdis.kwargs: set in both
    params.yaml and src/contrastlab/losses/variants.yaml ..."``; ``None`` when there is none.
    A value is written once: neither file silently wins."""
    both = [k for k in SHARED_FIELDS if k in written and k in table_keys(track, name)]
    if not both:
        return None
    k = both[0]
    return (f"{track}.{section}.{name}.{k}: set in both params.yaml and "
            f"src/contrastlab/losses/variants.yaml (the variant table holds a variant's {k}; "
            f"remove it from params.yaml)")


def resolve_variant(track: str, name: str, v, default_search: dict, kind: str) -> None:
    """Resolve, in place, what the variant ``name`` of ``track`` inherits: its ``loss`` from
    the variant table (default: its name) and its ``search`` merged over ``default_search``
    (:func:`inherit_search`). Shared by the graph and code schemas (``v``: a
    variant model with ``loss`` and ``search``).

    Raises:
        ValueError: ``loss`` set in both params.yaml and the variant table, or differing from
            the table's; no loss where the name is neither a table row nor a registry loss.
    """
    written = set(v.model_fields_set)
    err = table_conflict(track, name, written)
    if err:
        raise ValueError(err)
    row = track_variants(track).get(name)
    where = f"{track}.variants.{name}.loss"
    if v.loss is None:
        if row is None:  # not in the table: a registry loss is a variant of its own name
            try:
                check_name(track, name, kind)
            except ValueError as e:
                raise ValueError(f"{where}: required ({name!r} is not a variant of "
                                 f"src/contrastlab/losses/variants.yaml; {e})") from None
        elif row.loss is None:
            raise ValueError(f"{where}: {name!r} is a {row.kind} row of variants.yaml, not a "
                             f"variant trained with a loss")
        v.loss = row.loss if row is not None else name
    elif row is not None and v.loss != row.loss:
        raise ValueError(f"{where}: {v.loss!r} differs from the loss variants.yaml gives this "
                         f"variant ({row.loss!r}); its row there names its loss")
    v.search = inherit_search(default_search, v.search, "search" in written)


def variant_spec(track: str, name: str) -> VariantSpec:
    """The variant ``name`` of ``track``: its ``variants.yaml`` entry, else the registered loss
    of that name (if the track can train it) as a variant of its own name.

    Raises:
        contrastlab.errors.UnknownNameError: neither.
    """
    table = track_variants(track)
    if name in table:
        return table[name]
    if name in LOSSES and name in names_for(VARIANT_TRACKS[track]):
        return parse_variant(track, name, {}, name, LOSSES)
    raise UnknownNameError(f"unknown {track} variant {name!r}; known: "
                           f"{', '.join([*table, *(n for n in names_for(VARIANT_TRACKS[track]) if n not in table)])}")


def method_row(track: str, method: str) -> str:
    """The name of the row of ``track`` whose ``method`` is ``method`` (``variants.yaml``),
    e.g. ``method_row("code", "lexical")``: code that computes a baseline names its output by
    the table, not by a literal. Reads only the variant table (no loss).

    Raises:
        contrastlab.errors.UnknownNameError: no row, or more than one, has that method.
    """
    rows = [n for n, v in track_variants(track).items() if v.method == method]
    if len(rows) != 1:
        raise UnknownNameError(f"{track}: {len(rows)} rows of variants.yaml have method {method!r} "
                               f"({', '.join(rows) or 'none'}); expected one")
    return rows[0]


def role(track: str, key: str) -> str:
    """The variant with the job ``key`` in ``track`` (``variants.yaml`` ``roles``), e.g.
    ``role("multilabel", "hybrid_base")``.

    Raises:
        KeyError: the track has no such role.
    """
    return VARIANTS[track]["roles"][key]


def role_conflict(track: str, written) -> str | None:
    """The error line for a role of ``track`` (``variants.yaml`` ``roles``) that the track's
    ``params.yaml`` section sets (``written``: the keys the section sets), e.g.
    ``"multilabel.hybrid_base: a role, set in src/contrastlab/losses/variants.yaml (roles:),
    not in params.yaml ..."``; ``None`` when it sets none. A role is written once, in the
    variant table (the schemas read it as a property): params.yaml never silently wins."""
    roles = VARIANTS.get(track, {}).get("roles", {})
    hit = [k for k in written if k in roles]
    if not hit:
        return None
    k = hit[0]
    return (f"{track}.{k}: a role, set in src/contrastlab/losses/variants.yaml (roles: "
            f"{track}.roles.{k} = {roles[k]!r}), not in params.yaml; remove it from params.yaml")


def reject_roles(track: str, data):
    """``data`` (a track's raw ``params.yaml`` section) unchanged, for a schema's before-
    validator.

    Raises:
        ValueError: the section sets a role of the variant table (:func:`role_conflict`).
    """
    err = role_conflict(track, data) if isinstance(data, dict) else None
    if err:
        raise ValueError(err)
    return data
