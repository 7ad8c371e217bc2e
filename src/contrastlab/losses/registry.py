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
TRACK_NEEDS: dict[str, tuple[str, ...]] = {
    "graph": ("views",),
    "code": ("targets", "regression"),
    "multilabel": ("multilabels",),
}


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
    """

    target: str
    needs: str
    family: str
    title: str
    defaults: dict[str, Any] = field(default_factory=dict)
    stochastic: bool = False

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
            if p.kind not in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD) or p.default is p.empty:
                continue
            if name in PLUMBING or name in self.defaults:
                continue
            out[name] = p.default
        return out


_FIELDS = {"target", "needs", "family", "title", "defaults", "stochastic"}


def load_table(path: str | Path = TABLE) -> dict[str, LossSpec]:
    """The registry table of ``path`` as ``{name: LossSpec}`` in file order.

    Raises:
        contrastlab.errors.InputError: the file does not parse, an entry is not a mapping,
            lacks ``target``/``needs``/``family``/``title`` or has an unknown key, or a
            ``target`` is not ``"module:function"``.
    """
    import yaml

    path = Path(path)
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as e:
        raise InputError(f"{path}: cannot read the loss registry ({e})") from e
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
                                  bool(e.get("stochastic", False)))
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
    ``{"loss", "sha256", "files"}``, the SHA-256 of the registry entry (as sorted JSON) and
    of the bytes of every file of :func:`source_files`. Written to ``data/loss_code.yaml`` by
    the ``validate_params`` stage; a stage depends on its own entry there (a DVC ``params``
    dependency), so adding a loss or editing another loss's file leaves it up to date.

    Raises:
        contrastlab.errors.UnknownNameError: ``name`` is not registered.
    """
    files = source_files(name)
    h = hashlib.sha256(json.dumps(asdict(get_spec(name)), sort_keys=True).encode())
    for rel in files:
        h.update(rel.encode() + b"\0" + (_SRC.parent / rel).read_bytes() + b"\0")
    return {"loss": name, "sha256": h.hexdigest(), "files": files}
