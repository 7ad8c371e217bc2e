"""Every DVC stage's code dependencies, computed from what its script imports.

DVC sees a stage's code as one value: the params gate (``validate_params``) depends on all the
code (``src/contrastlab``, each folder of stage scripts, this file) and writes, per stage, the
SHA-256 of the closure below (:func:`code_digests`) to the ``code`` section of
``data/loss_code.yaml``; every other stage depends on its key ``code.<stage>`` as a DVC
``params`` dependency, in place of a list of files. ``--write`` writes those keys and the
gate's folders; the check reports a stage without its key, a stage that still lists code
files, and a gate that misses a file of some closure.

For each stage of ``dvc.yaml`` (``foreach``/``matrix`` stages included) the script named in
its ``cmd`` (any ``*.py`` path in the command that exists, e.g. ``stages/train_code.py``
after ``python -m torch.distributed.run ...``) is parsed with :mod:`ast`, and the
transitive closure of its imports inside ``src/contrastlab`` is computed:

- ``import contrastlab.a.b`` / ``from contrastlab.a import b`` / relative imports, at any
  depth of the file (imports inside functions count too);
- every package ``__init__.py`` on the way (importing ``contrastlab.a.b`` runs
  ``contrastlab/__init__.py`` and ``contrastlab/a/__init__.py``);
- sibling scripts a stage imports after putting its own folder on ``sys.path``
  (``from train_code import ...`` -> ``stages/train_code.py``);
- ``importlib.import_module(f"contrastlab.pkg.{x}")``: every module of ``contrastlab.pkg``;
- a package ``__init__``'s module-level ``__getattr__`` (lazy attributes): its imports count
  for a file that imports from the package a name the ``__init__`` does not define;
- data a module reads, declared by a module-level ``DATA_DEPS = ("templates",)`` (paths
  relative to the module's folder, e.g. the report's Jinja2 templates);
- the loss registry (``losses/registry.yaml``): loss modules are imported lazily, by name. A
  module that loads registry losses declares which ones with a module-level
  ``LOSS_NEEDS = ("views",)`` (the ``needs`` values of
  :class:`contrastlab.losses.registry.LossSpec`) or ``LOSS_NEEDS = "*"``. A module that
  calls ``get_loss``/``load_loss`` without declaring ``LOSS_NEEDS`` is an error (the
  ``contrastlab.losses`` package itself is exempt: it resolves names its callers pass in).

Loss code is not in the closure (so not in the digest) of the stages that train losses
(``LOSS_NEEDS = "*"``, the ``validate_params`` gate, excepted: its closure holds every loss
file, ``registry.yaml`` and ``variants.yaml``). The gate also writes, per registered loss and
per variant, a digest of the loss's registry entry and source files. Besides its
``code.<stage>`` key, a stage depends on the keys of that file it uses:

- a stage that runs over a track's variants (``foreach: ${graph.variants}``,
  ``${graph.finetune}``, ``${code.variants}``, ``${multilabel.losses}``, ``${finetune.variants}``, or a ``matrix``
  axis over one of them) depends on ``variants.<track>.<its variant>`` only;
- any other stage whose code loads losses depends on ``needs.<n>`` for each of its
  ``LOSS_NEEDS``;
- a stage whose code reads the whole table (imports ``LOSSES``, ``title``, ``get_spec``, ...
  outside the ``losses`` and ``params`` packages, e.g. the report) depends on its ``needs``,
  ``roles`` and ``variants`` sections.

So adding a graph loss (its file, a registry entry, a params variant) leaves every code and
multi-label stage and every other graph variant up to date, and editing
``losses/selfsup.py`` reruns the graph variants and nothing of the other tracks. (The
``params`` package reads the table to validate names; the gate does that check for every
stage, so it is not a dependency of theirs.)

Roles (``variants.yaml`` ``roles:``, e.g. ``multilabel.hybrid_base``) are written in the
variant table only, which DVC cannot read; the gate copies them to ``roles.<track>.<role>``
of ``data/loss_code.yaml``. A stage whose code reads a role lists that key in its
``data/loss_code.yaml`` params entry, by hand (code shared by several stages reads a role
for some rows only, e.g. the hybrid rows of ``training/multilabel_final.py``, so the import
closure cannot tell which stage reads it): ``--write`` keeps these keys and the check reports
one that names no role of the table. A stage that trains the row a role names may also list
its track's whole variant section, ``variants.<track>``, by hand (``finetune_index``: every
fine-tuning row, the index variant's among them); ``--write`` keeps it too. Where a stage's ``deps``/``params`` must name a role's
value, ``--write`` writes it as a literal (:func:`hybrid_inputs`: the multi-label hybrid
stage's tuned choices and variant params, of ``hybrid_base`` and of each hybrid's
``model_of``), and the check reports a literal that differs from the table.

Usage::

    python scripts/stage_deps.py            # check: exit 1 listing every missing dependency
    python scripts/stage_deps.py --write    # rewrite the code deps of every stage in dvc.yaml
    python scripts/stage_deps.py --show train_graph

If ``dvc.yaml`` has a ``validate_params`` stage, every other stage must also depend on its
output (a bad ``params.yaml`` then stops ``dvc repro`` before any stage deletes its outputs).

``--write`` also regenerates the per-variant top-level ``plots:`` of ``dvc.yaml`` and the
``artifacts:`` of the code models from ``params.yaml`` (:data:`PLOT_SPECS`): a variant added
to ``params.yaml`` gets its curves in ``dvc plots show`` without editing ``dvc.yaml``; the
check mode reports them when they are out of date. Plots with other ids are kept as written.
It also writes the role literals of the hybrid stage (see above).

``--write`` removes, from each stage's ``deps``, the entries that are Python code (``*.py``
files and folders under ``src/`` or next to the stage script; the digest covers them), puts
the gate's output first (the gate's own deps: the code folders) and keeps every other
dependency (data, folders of data) and the file's comments. Rerun it after adding a stage.
"""

from __future__ import annotations

import argparse
import ast
import functools
import hashlib
import re
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path

PACKAGE = "contrastlab"
#: Names that load a registry loss and so require a ``LOSS_NEEDS`` declaration.
LOADERS = {"get_loss", "load_loss"}
#: Names of the registry whose import means the module reads the loss table.
TABLE_NAMES = {"LOSSES", "LossSpec", "title", "names_for", "get_spec", "get_loss", "load_loss",
               "check_name", "load_table", "code_digest", "source_files", "VARIANTS",
               "track_variants", "variant_spec", "load_variant_table", "role"}
#: The loss table and the gate's per-loss digests (see the module docstring).
REGISTRY_TABLE = "src/contrastlab/losses/registry.yaml"
#: The variant table (rows and their labels; their configurations are params.yaml's); the gate
#: hashes its rows (loss, kwargs and the params.yaml block of each).
VARIANT_TABLE = "src/contrastlab/losses/variants.yaml"
LOSS_CODE = "data/loss_code.yaml"
#: Key prefix, in ``data/loss_code.yaml``, of each stage's code digest (its import closure).
CODE_PREFIX = "code."
#: The sections of ``data/loss_code.yaml`` a stage that reads the whole loss table depends on.
TABLE_SECTIONS = ["needs", "roles", "variants"]
#: ``foreach`` / ``matrix`` expressions that run over one track's variants -> the track.
VARIANT_AXES = {"${graph.variants}": "graph", "${graph.finetune}": "graph", "${code.variants}": "code",
                "${multilabel.losses}": "multilabel", "${multilabel.hybrids}": "multilabel",
                "${finetune.variants}": "finetune"}
#: Modules of the ``params`` package that each hold one section's schema. The package's
#: ``__init__`` imports all of them to validate the whole file, which is the gate's job (every
#: stage depends on its output), so a stage depends on the schema of the sections it declares
#: in its ``params:`` only: editing the graph schema leaves the code and multi-label stages
#: up to date. A section module that another kept module imports is still reached that way.
PARAMS_SECTIONS = {"code", "graph", "multilabel", "finetune", "report"}
#: Keys of ``data/loss_code.yaml`` that copy the variant table's roles (declared by hand in a
#: stage's ``data/loss_code.yaml`` params entry; see the module docstring).
ROLE_PREFIX = "roles."
#: The axis of the stage(s) training the multi-label hybrid rows: they read the tuned choices
#: and params of :func:`hybrid_inputs`, written in their deps and params as literals.
HYBRID_AXIS = "${multilabel.hybrids}"
_TUNED_ML = re.compile(r"^reports/tuned/multilabel/(?!\$\{item)[^/]+\.json$")
_ML_VARIANT = re.compile(r"^multilabel\.variants\.(?!\$\{item).+$")

#: The first stage: validates params.yaml; every other stage depends on its output.
GATE_STAGE = "validate_params"
_REG_RE = re.compile(r"^(contrastlab(?:\.\w+)+):\w+$")


class _AllNames(set):
    def __contains__(self, item) -> bool:  # a plain module: any name may be defined
        return True


_ALL = _AllNames()


class DepsError(RuntimeError):
    """dvc.yaml or a stage script cannot be analysed."""


@dataclass
class Closure:
    files: set[Path] = field(default_factory=set)       # repo-relative
    loss_needs: set[str] = field(default_factory=set)   # "*" = all
    loaders: set[Path] = field(default_factory=set)     # modules calling get_loss etc.
    declared: set[Path] = field(default_factory=set)    # modules declaring LOSS_NEEDS
    table: set[Path] = field(default_factory=set)       # modules importing registry names


@functools.lru_cache(maxsize=None)
def _parse(text: str) -> ast.Module:
    """The syntax tree of a file's text, shared by every :class:`Analyzer` of this process (a
    copy of the project parses no file twice; the trees are only read, never changed)."""
    return ast.parse(text)


def _yaml(text: str):
    """YAML text parsed as ``yaml.safe_load`` does, with libyaml's C parser where PyYAML has it
    (the same objects, about 9 times faster on this dvc.yaml; a params gate reads it often)."""
    import yaml

    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


class Analyzer:
    """Import closures inside ``<root>/src/contrastlab`` (cached per file)."""

    def __init__(self, root: Path):
        self.root = Path(root).resolve()
        self.src = self.root / "src"
        self._registry: dict[str, set[str]] | None = None
        # each file is parsed and read once per analysis (no file changes during one)
        self._trees: dict[Path, ast.Module] = {}
        self._direct: dict[Path, tuple] = {}

    # ------------------------------------------------------------------ module resolution
    def module_file(self, dotted: str) -> Path | None:
        """File of module ``dotted`` (``pkg/__init__.py`` for a package), or None."""
        if dotted != PACKAGE and not dotted.startswith(PACKAGE + "."):
            return None
        base = self.src.joinpath(*dotted.split("."))
        if (base / "__init__.py").is_file():
            return base / "__init__.py"
        if base.with_suffix(".py").is_file():
            return base.with_suffix(".py")
        return None

    def with_parents(self, dotted: str) -> list[Path]:
        """The module's file and every parent package's ``__init__.py``."""
        parts = dotted.split(".")
        out = []
        for i in range(1, len(parts) + 1):
            f = self.module_file(".".join(parts[:i]))
            if f is not None:
                out.append(f)
        return out

    def module_name(self, path: Path) -> str | None:
        try:
            rel = path.resolve().relative_to(self.src)
        except ValueError:
            return None
        parts = list(rel.with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        return ".".join(parts)

    def registry(self) -> dict[str, set[str]]:
        """``needs -> {module}`` from the ``target`` strings of ``losses/registry.yaml``."""
        if self._registry is None:
            reg = self.root / REGISTRY_TABLE
            self._registry = {}
            doc = _yaml(reg.read_text(encoding="utf-8")) if reg.is_file() else {}
            for name, e in (doc or {}).items():
                target = str((e or {}).get("target", ""))
                if not _REG_RE.match(target):
                    raise DepsError(f"{reg}: loss {name!r} has no 'contrastlab.x:fn' target")
                mod = _REG_RE.match(target).group(1)
                self._registry.setdefault(str(e.get("needs") or "?"), set()).add(mod)
        return self._registry

    def _init_tree(self, dotted: str):
        f = self.module_file(dotted)
        if f is None or f.name != "__init__.py":
            return None, None
        return f, self._tree(f)

    def _tree(self, path: Path) -> ast.Module:
        if path not in self._trees:
            text = path.read_text(encoding="utf-8")
            try:
                self._trees[path] = _parse(text)
            except SyntaxError:  # again, for the message with the file's name
                ast.parse(text, str(path))
                raise
        return self._trees[path]

    def top_names(self, dotted: str) -> set[str]:
        """Names a package's ``__init__`` defines at module level (all names for a module)."""
        f, tree = self._init_tree(dotted)
        if tree is None:
            return _ALL
        out: set[str] = set()
        for n in tree.body:
            if isinstance(n, (ast.FunctionDef, ast.ClassDef)):
                out.add(n.name)
            elif isinstance(n, (ast.Import, ast.ImportFrom)):
                out.update((a.asname or a.name).split(".")[0] for a in n.names)
            elif isinstance(n, (ast.Assign, ast.AnnAssign)):
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                    out.update(x.id for x in ast.walk(t) if isinstance(x, ast.Name))
        return out

    def lazy(self, dotted: str) -> set[str]:
        """Modules a package's module-level ``__getattr__`` imports on attribute access."""
        f, tree = self._init_tree(dotted)
        fn = None if tree is None else next(
            (n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "__getattr__"),
            None)
        out: set[str] = set()
        if fn is None:
            return out
        for node in ast.walk(fn):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = ".".join([dotted] + ([node.module] if node.module else []))
                out.add(base)
                out.update(f"{base}.{a.name}" for a in node.names
                           if self.module_file(f"{base}.{a.name}") is not None)
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PACKAGE):
                out.add(node.module)
            elif isinstance(node, ast.Import):
                out.update(a.name for a in node.names if a.name.startswith(PACKAGE))
        return out

    # ------------------------------------------------------------------ one file
    def direct(self, path: Path) -> tuple[set[str], set[Path], set[str] | None, bool, bool]:
        """``(modules, sibling script files, LOSS_NEEDS or None, calls a loader, imports
        registry names)`` of one file (computed once per file)."""
        if path not in self._direct:
            self._direct[path] = self._direct_uncached(path)
        return self._direct[path]

    def _direct_uncached(self, path: Path) -> tuple[set[str], set[Path], set[str] | None, bool, bool]:
        tree = self._tree(path)
        mods: set[str] = set()
        siblings: set[Path] = set()
        pkg = self.module_name(path)
        if pkg is not None and path.name != "__init__.py":
            pkg = pkg.rpartition(".")[0]
        needs: set[str] | None = None
        loader = False
        table = False
        lazy_fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef)
                        and n.name == "__getattr__"), None) if path.name == "__init__.py" else None
        skip = set(map(id, ast.walk(lazy_fn))) if lazy_fn is not None else set()
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] == PACKAGE:
                        mods.add(a.name)
                    elif (path.parent / f"{a.name}.py").is_file() and pkg is None:
                        siblings.add(path.parent / f"{a.name}.py")
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    if pkg is None:
                        raise DepsError(f"{path}: relative import outside the package")
                    base_parts = pkg.split(".")
                    if node.level > 1:
                        base_parts = base_parts[: -(node.level - 1)]
                    base = ".".join(base_parts + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                if base.split(".")[0] == PACKAGE:
                    mods.add(base)
                    if base in (f"{PACKAGE}.losses", f"{PACKAGE}.losses.registry") and any(
                            a.name in TABLE_NAMES for a in node.names):
                        table = True
                    for a in node.names:  # `from pkg import submodule`
                        if self.module_file(f"{base}.{a.name}") is not None:
                            mods.add(f"{base}.{a.name}")
                        elif a.name not in self.top_names(base):
                            mods.update(self.lazy(base))  # served by the package's __getattr__
                elif pkg is None and base and (path.parent / f"{base}.py").is_file():
                    siblings.add(path.parent / f"{base}.py")
            elif isinstance(node, ast.Call):
                fn = node.func
                name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", None)
                if name in LOADERS:
                    loader = True
                if name == "import_module" and node.args:
                    a = node.args[0]
                    if isinstance(a, ast.Constant) and isinstance(a.value, str):
                        if a.value.split(".")[0] == PACKAGE:
                            mods.add(a.value)
                    elif isinstance(a, ast.JoinedStr) and a.values and isinstance(
                            a.values[0], ast.Constant):
                        prefix = str(a.values[0].value).rstrip(".")
                        d = self.src.joinpath(*prefix.split("."))
                        if prefix.split(".")[0] == PACKAGE and d.is_dir():
                            mods.add(prefix)
                            mods.update(f"{prefix}.{p.stem}" for p in d.glob("*.py")
                                        if p.stem != "__init__")
            elif isinstance(node, ast.Assign) and node in tree.body:
                for t in node.targets:
                    if isinstance(t, ast.Name) and t.id == "LOSS_NEEDS":
                        v = ast.literal_eval(node.value)
                        needs = {v} if isinstance(v, str) else set(v)
                    if isinstance(t, ast.Name) and t.id == "DATA_DEPS":
                        for rel in ast.literal_eval(node.value):
                            data = (path.parent / rel).resolve()
                            if not data.exists():
                                raise DepsError(f"{path}: DATA_DEPS names {rel!r}, which "
                                                "does not exist")
                            siblings.add(data)
        return mods, siblings, needs, loader, table

    def closure(self, scripts: list[Path], sections: set[str] | None = None) -> Closure:
        """Transitive closure of ``scripts`` (absolute paths). With ``sections`` (the
        ``params.yaml`` sections the stage declares), the ``params`` package's ``__init__``
        contributes only those sections' schema modules (see :data:`PARAMS_SECTIONS`)."""
        c = Closure()
        todo = [Path(s).resolve() for s in scripts]
        seen: set[Path] = set()
        params_init = self.module_file(f"{PACKAGE}.params")
        while todo:
            f = todo.pop()
            if f in seen:
                continue
            seen.add(f)
            c.files.add(f)
            if f.is_dir() or f.suffix != ".py":
                continue  # DATA_DEPS: a dependency, not a module
            mods, sibs, needs, loader, table = self.direct(f)
            if sections is not None and params_init is not None and f == params_init.resolve():
                mods = {m for m in mods if m.rpartition(".")[2] not in PARAMS_SECTIONS
                        or m.rpartition(".")[2] in sections}
            if needs is not None:
                c.loss_needs |= needs
                c.declared.add(f)
            if table:
                c.table.add(f)
            # the losses package itself only resolves names its callers pass in
            if loader and not (self.module_name(f) or "").startswith(f"{PACKAGE}.losses"):
                c.loaders.add(f)
            todo.extend(sibs)
            for m in mods:
                todo.extend(self.with_parents(m))
            if "*" in c.loss_needs and not getattr(c, "_reg_done", False):
                # the gate: every loss file (the others reach loss code via data/loss_code.yaml)
                for mods_of in self.registry().values():
                    for m in mods_of:
                        todo.extend(self.with_parents(m))
                c._reg_done = True  # type: ignore[attr-defined]
        undeclared = c.loaders - c.declared
        if undeclared:
            names = ", ".join(sorted(self.rel(p) for p in undeclared))
            raise DepsError(f"{names}: loads registry losses but declares no LOSS_NEEDS")
        c.files = {Path(self.rel(p)) for p in c.files}
        if "*" in c.loss_needs:
            c.files.update({Path(REGISTRY_TABLE), Path(VARIANT_TABLE)})
        return c

    def table_readers(self, c: Closure) -> set[Path]:
        """Modules of ``c`` that read the loss table for their output: they import registry
        names, declare no ``LOSS_NEEDS`` and lie outside the ``losses`` and ``params``
        packages (which resolve or validate names their callers pass in)."""
        out = set()
        for f in c.table - c.declared:
            mod = self.module_name(f) or ""
            if not mod.startswith((f"{PACKAGE}.losses", f"{PACKAGE}.params")):
                out.add(f)
        return out

    def rel(self, p: Path) -> str:
        return p.resolve().relative_to(self.root).as_posix()


#: Per-variant top-level plots, generated from params.yaml: (id, track, properties, y file
#: pattern, y column). ``{v}`` is a variant (multi-label: a contrastive one), ``{ds}`` a
#: multi-label data set (one plot per data set).
PLOT_SPECS = [
    ("graph_loss", "graph", {"title": "Graph SSL training loss (mean over seeds)",
                             "template": "linear", "x": "epoch", "y_label": "loss"},
     "reports/plots/graph/{v}.csv", "loss"),
    ("code_val_rank_at_10", "code", {"title": "Code retrieval validation Rank@10",
                                     "template": "linear", "x": "epoch",
                                     "y_label": "Rank@10 (validation)"},
     "reports/plots/code/{v}.csv", "val_rank_at_10"),
    ("code_rank_at_k", "code", {"title": "Code retrieval test Rank@k", "template": "linear",
                                "x": "k", "y_label": "Rank@k (test)"},
     "reports/data/code/{v}_rank_curve.csv", "rank_at_k"),
    ("multilabel_{ds}_val_map", "multilabel",
     {"title": "Multi-label {ds}, validation mAP during contrastive training (seed 0)",
      "template": "linear", "x": "step", "y_label": "validation mAP"},
     "reports/plots/multilabel/{ds}_{v}.csv", "val_map"),
    ("tune_graph", "graph", {"title": "Graph tuning history (validation objective per trial)",
                             "template": "scatter", "x": "trial"},
     "reports/plots/tune/graph/{v}.csv", "value"),
    ("tune_code", "code", {"title": "Code tuning history (best validation Rank@10 per trial)",
                           "template": "scatter", "x": "trial"},
     "reports/plots/tune/code/{v}.csv", "value"),
]


def generated(root: Path) -> tuple[list[dict], dict[str, dict]]:
    """``(plots, artifacts)`` that ``dvc.yaml`` should hold for the variants of
    ``params.yaml`` (empty when the project has no such params)."""
    params = _params_doc(root)
    if not all(isinstance(params.get(t), dict) for t in ("graph", "code", "multilabel")):
        return [], {}
    from contrastlab.params.multilabel import BASELINES
    ml = params["multilabel"]
    names = {"graph": list(params["graph"].get("variants") or {}),
             "code": list(params["code"].get("variants") or {}),
             "multilabel": [n for n in ml.get("losses") or [] if n not in BASELINES]}
    plots = []
    for pid, track, props, pattern, col in PLOT_SPECS:
        for ds in (ml.get("datasets") or [] if "{ds}" in pid else [None]):
            fmt = {"ds": ds} if ds else {}
            body = {k: (v.format(**fmt) if isinstance(v, str) else v) for k, v in props.items()}
            body["y"] = {pattern.format(v=v, **fmt): col for v in names[track]}
            if body["y"]:
                plots.append({pid.format(**fmt): body})
    arts = {}
    from contrastlab.params import load_params

    resolved = load_params(root / "params.yaml").code.variants  # loss: the variant table's
    for v in params["code"].get("variants") or {}:
        loss = resolved[v].loss
        how = ("from the zero-shot map (residual)" if resolved[v].residual else "from scratch")
        arts[f"code-{v.replace('_', '-')}"] = {
            "path": f"data/code/models/{v}", "type": "model",
            "desc": f"SigPredictor checkpoints (one per seed) trained {how} with the {loss} loss",
            "labels": ["code", loss]}
    return plots, arts


def _plain(x):
    """ruamel containers as plain dicts and lists (for comparing)."""
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_plain(v) for v in x]
    return x


def stale_generated(root: Path) -> list[str]:
    """Generated plot ids and artifacts that ``dvc.yaml`` lacks or holds differently."""

    doc = _yaml((Path(root) / "dvc.yaml").read_text(encoding="utf-8")) or {}
    plots, arts = generated(root)
    have = {next(iter(p)): next(iter(p.values())) for p in doc.get("plots") or []
            if isinstance(p, dict)}
    out = [f"plots: {next(iter(p))}" for p in plots
           if have.get(next(iter(p))) != next(iter(p.values()))]
    have_a = doc.get("artifacts") or {}
    out += [f"artifacts: {k}" for k, v in arts.items() if have_a.get(k) != v]
    out += [f"artifacts: {k} (no such variant)" for k in have_a
            if k.startswith("code-") and k not in arts and arts]
    for name, st in (doc.get("stages") or {}).items():
        want = _hybrid_want(root, st)
        have = _hybrid_have(_body(st))
        if want is not None and have != want:
            w, h = want["deps"] + want["params"], have["deps"] + have["params"]
            lacks, stale = [x for x in w if x not in h], [x for x in h if x not in w]
            out.append(f"stages: {name}: lacks {lacks}, has {stale}"
                       + ("" if lacks or stale else " (in another order)")
                       + f" (its rows read the tuned choices and params of {hybrid_inputs(root)}: "
                       "the role multilabel.hybrid_base of variants.yaml, then the hybrids' "
                       "model_of)")
    return out


def hybrid_inputs(root: Path) -> list[str] | None:
    """The variants whose tuned choices and params the multi-label hybrid rows read: the role
    ``multilabel.hybrid_base`` of the variant table, then each hybrid's ``model_of`` (the
    hybrids of ``params.yaml`` ``multilabel.hybrids``, else the table's); None when the
    project has no such table or role."""

    f = Path(root) / VARIANT_TABLE
    if not f.is_file():
        return None
    ml = (_yaml(f.read_text(encoding="utf-8")) or {}).get("multilabel") or {}
    base = (ml.get("roles") or {}).get("hybrid_base")
    if base is None:
        return None
    rows = ml.get("variants") or {}
    hybrids = (_params_doc(root).get("multilabel") or {}).get("hybrids")
    if hybrids is None:
        hybrids = [n for n, e in rows.items() if (e or {}).get("kind") == "hybrid"]
    mo = [(rows.get(h) or {}).get("model_of") for h in hybrids]
    return list(dict.fromkeys([str(base), *(str(m) for m in mo if m)]))


def _is_hybrid_stage(st: dict) -> bool:
    return st.get("foreach") == HYBRID_AXIS or HYBRID_AXIS in (st.get("matrix") or {}).values()


def _hybrid_want(root: Path, st: dict) -> dict | None:
    """What a hybrid stage's literal deps and params should be (None: not such a stage)."""
    names = hybrid_inputs(root) if _is_hybrid_stage(st) else None
    if names is None:
        return None
    return {"deps": [f"reports/tuned/multilabel/{v}.json" for v in names],
            "params": [f"multilabel.variants.{v}" for v in names]}


def _is_hybrid_param(p) -> bool:
    # a variant's params, or a role written as a params.yaml key (no longer one)
    return isinstance(p, str) and (bool(_ML_VARIANT.match(p)) or p == "multilabel.hybrid_base")


def _hybrid_have(body: dict) -> dict:
    return {"deps": [d for d in _dep_paths(body) if _TUNED_ML.match(d)],
            "params": [p for p in body.get("params") or [] if _is_hybrid_param(p)]}


def _replace_run(seq, match, new: list[str]) -> bool:
    """Replace the entries of the ruamel ``seq`` that ``match`` by ``new``, at the place of the
    first (appended when none); True when something changed."""
    idx = [i for i, x in enumerate(seq) if match(x)]
    if [seq[i] for i in idx] == new:
        return False
    pos = idx[0] if idx else len(seq)
    for i in reversed(idx):
        del seq[i]
    for j, x in enumerate(new):
        seq.insert(pos + j, x)
    return True


def _write_hybrid_inputs(doc, root: Path) -> list[str]:
    """Write :func:`hybrid_inputs` into the hybrid stages of the ruamel ``doc``; the names of
    the stages that changed."""
    from ruamel.yaml.comments import CommentedSeq

    changed = []
    for name, st in (doc.get("stages") or {}).items():
        want = _hybrid_want(root, st)
        if want is None:
            continue
        body = _body(st)
        if body.get("deps") is None:
            body["deps"] = CommentedSeq()
        if body.get("params") is None:
            body["params"] = CommentedSeq()
        a = _replace_run(body["deps"], lambda d: isinstance(d, str) and bool(_TUNED_ML.match(d)),
                         want["deps"])
        b = _replace_run(body["params"], _is_hybrid_param, want["params"])
        if a or b:
            changed.append(name)
    return changed


def _write_generated(doc, root: Path) -> bool:
    """Put :func:`generated` into the ruamel ``doc``; True when something changed."""
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    plots, arts = generated(root)
    if not plots and not arts:
        return False
    before = _plain({"plots": doc.get("plots"), "artifacts": doc.get("artifacts")})
    ids = {next(iter(p)) for p in plots}
    specs = tuple(pid.split("{")[0] for pid, *_ in PLOT_SPECS)
    kept = [p for p in (doc.get("plots") or []) if isinstance(p, dict)
            and next(iter(p)) not in ids and not str(next(iter(p))).startswith(specs)]
    seq = CommentedSeq()
    for p in plots:
        pid, body = next(iter(p.items()))
        m = CommentedMap()
        for k, v in body.items():
            if k == "y":
                y = CommentedMap()
                y.update(v)
                m[k] = y
            else:
                m[k] = v
        seq.append(CommentedMap({pid: m}))
    seq.extend(kept)
    doc["plots"] = seq
    old = doc.get("artifacts")
    new = CommentedMap()
    for k, v in (old or {}).items():
        if not str(k).startswith("code-"):
            new[k] = v
    for k, v in arts.items():
        m = CommentedMap(v)
        m["labels"] = CommentedSeq(v["labels"])
        m["labels"].fa.set_flow_style()
        new[k] = m
    if old is not None:
        old.clear()
        old.update(new)
    else:
        doc["artifacts"] = new
    return _plain({"plots": doc.get("plots"), "artifacts": doc.get("artifacts")}) != before


# ---------------------------------------------------------------------- dvc.yaml
def stage_scripts(cmd: str | list, root: Path) -> list[Path]:
    """Existing ``*.py`` files named in a stage command (``${...}`` tokens ignored)."""
    cmds = cmd if isinstance(cmd, list) else [cmd]
    out = []
    for c in cmds:
        for tok in shlex.split(str(c)):
            if tok.endswith(".py") and "${" not in tok and (root / tok).is_file():
                out.append(root / tok)
    return out


def load_stages(root: Path) -> dict:
    path = Path(root) / "dvc.yaml"
    doc = _yaml(path.read_text(encoding="utf-8")) or {}
    return doc.get("stages", {})


def _body(stage: dict) -> dict:
    return stage.get("do", stage) if "foreach" in stage else stage


def _dep_paths(body: dict) -> list[str]:
    out = []
    for d in body.get("deps", []) or []:
        out.append(next(iter(d)) if isinstance(d, dict) else str(d))
    return out


def covered(file: str, deps: list[str]) -> bool:
    """Is ``file`` one of ``deps`` or inside a folder dependency?"""
    for d in deps:
        d = d.rstrip("/")
        if file == d or file.startswith(d + "/"):
            return True
    return False


def required(root: Path, stages: dict | None = None) -> dict[str, list[str]]:
    """``stage name -> sorted code files it needs`` for every stage with a script."""
    return {k: v[0] for k, v in analyse(root, stages).items()}


def _params_doc(root: Path) -> dict:
    p = Path(root) / "params.yaml"
    return (_yaml(p.read_text(encoding="utf-8")) or {}) if p.is_file() else {}


def _resolve(expr: str, params: dict):
    node = params
    for part in expr[2:-1].split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def variant_key(stage: dict, params: dict) -> str | None:
    """``variants.<track>.<item>`` when ``stage`` runs over one track's variants (see
    :data:`VARIANT_AXES`), else None."""
    fe = stage.get("foreach")
    if isinstance(fe, str) and fe in VARIANT_AXES:
        item = "${key}" if isinstance(_resolve(fe, params), dict) else "${item}"
        return f"variants.{VARIANT_AXES[fe]}.{item}"
    for axis, expr in (stage.get("matrix") or {}).items():
        if isinstance(expr, str) and expr in VARIANT_AXES:
            return f"variants.{VARIANT_AXES[expr]}.${{item.{axis}}}"
    return None


def analyse(root: Path, stages: dict | None = None) -> dict[str, tuple[list[str], object]]:
    """``stage -> (code files, loss_code keys)`` for every stage with a script. The keys are
    ``False`` for the gate (it writes ``data/loss_code.yaml``), else a list of dotted keys,
    ``code.<stage>`` first (see the module docstring)."""
    root = Path(root).resolve()
    stages = load_stages(root) if stages is None else stages
    params = _params_doc(root)
    an = Analyzer(root)
    out = {}
    for name, st in stages.items():
        scripts = stage_scripts(_body(st).get("cmd", ""), root)
        if not scripts:
            continue
        c = an.closure(scripts, None if name == GATE_STAGE else declared_sections(_body(st)))
        # the stage's own scripts first, then the library
        files = sorted((p.as_posix() for p in c.files),
                       key=lambda f: (f.startswith("src/"), f))
        keys: object = False  # the gate writes data/loss_code.yaml
        vk = variant_key(st, params)
        if name != GATE_STAGE:
            keys = [f"{CODE_PREFIX}{name}"]
            if "*" in c.loss_needs:
                pass  # every loss file is in the closure, so in the digest
            elif an.table_readers(c):
                keys += TABLE_SECTIONS
            elif vk is not None and c.loss_needs:
                keys.append(vk)
            elif c.loss_needs:
                keys += [f"needs.{n}" for n in sorted(c.loss_needs)]
        out[name] = (files, keys)
    return out


def code_digest(root: Path, files: list[str]) -> str:
    """sha256 over ``files`` (repo-relative, in the given order; a folder, such as a module's
    ``DATA_DEPS``, stands for its files but byte-code): each path, then its bytes."""
    h = hashlib.sha256()
    for f in files:
        p = Path(root) / f
        for q in sorted(x for x in p.rglob("*") if x.is_file() and x.suffix != ".pyc"
                        and "__pycache__" not in x.parts) if p.is_dir() else [p]:
            h.update(q.relative_to(root).as_posix().encode() + b"\0" + q.read_bytes() + b"\0")
    return h.hexdigest()


def code_digests(root: Path, stages: dict | None = None) -> dict[str, str]:
    """``stage -> digest of its import closure`` (:func:`code_digest`) for every stage with a
    script but the gate: the ``code`` section the gate writes to ``data/loss_code.yaml``."""
    root = Path(root).resolve()
    return {name: code_digest(root, files) for name, (files, _) in analyse(root, stages).items()
            if name != GATE_STAGE}


def gate_code_deps(root: Path, stages: dict) -> list[str]:
    """The gate's code deps: the library folder, each folder holding a stage script, and this
    script (the gate imports it to compute the digests) when the project has it."""
    root = Path(root).resolve()
    dirs = {s.relative_to(root).parts[0] for st in stages.values()
            for s in stage_scripts(_body(st).get("cmd", ""), root) if s.parent != root}
    own = Path(__file__).resolve()
    mine = [own.relative_to(root).as_posix()] if own.is_relative_to(root) else []
    return [f"src/{PACKAGE}", *sorted(dirs), *[m for m in mine if m.split("/")[0] not in dirs]]


def declared_sections(body: dict) -> set[str]:
    """Top-level ``params.yaml`` sections named in a stage's ``params:`` (``code.model`` ->
    ``code``; a whole section ``- graph`` counts; entries of other files do not)."""
    out = set()
    for p in body.get("params", []) or []:
        if isinstance(p, str):
            out.add(p.split(".")[0])
        elif isinstance(p, dict):
            for f, keys in p.items():
                if f == "params.yaml":
                    out.update(str(k).split(".")[0] for k in keys or [])
    return out


def _loss_param(body: dict):
    """The stage's ``data/loss_code.yaml`` params entry: False (none), None (whole file) or
    its list of keys."""
    for p in body.get("params", []) or []:
        if isinstance(p, dict) and LOSS_CODE in p:
            v = p[LOSS_CODE]
            return None if not v else list(v)
        if p == LOSS_CODE:
            return None
    return False


def _by_hand(key) -> bool:
    """A key declared by hand: a role (``roles.<track>.<role>``), or a track's whole variant
    section (``variants.<track>``), for a stage that trains the row a role names (DVC
    cannot resolve the role to its row's key)."""
    k = str(key)
    return k.startswith(ROLE_PREFIX) or (k.startswith("variants.") and k.count(".") == 1)


def _split_by_hand(v):
    """``(the computed part, the keys declared by hand)`` of a :func:`_loss_param` value
    (:func:`_by_hand`); the rest is :func:`analyse`'s."""
    if not v:
        return v, []
    roles = [k for k in v if _by_hand(k)]
    rest = [k for k in v if not _by_hand(k)]
    return (rest if rest else False), roles


def known_by_hand(root: Path) -> set[str] | None:
    """``roles.<track>.<role>`` for every role of the variant table and ``variants.<track>``
    for each of its tracks (None: no table)."""

    f = Path(root) / VARIANT_TABLE
    if not f.is_file():
        return None
    doc = _yaml(f.read_text(encoding="utf-8")) or {}
    tracks = {t: sec for t, sec in doc.items() if isinstance(sec, dict)}
    return ({f"{ROLE_PREFIX}{t}.{r}" for t, sec in tracks.items() for r in (sec.get("roles") or {})}
            | {f"variants.{t}" for t in tracks})


def gate(stages: dict) -> str | None:
    """The output of the ``validate_params`` stage (every other stage depends on it, so a bad
    params.yaml stops ``dvc repro`` before any stage removes its outputs), or None."""
    st = stages.get(GATE_STAGE)
    if not st:
        return None
    outs = _body(st).get("outs") or []
    return (next(iter(outs[0])) if isinstance(outs[0], dict) else str(outs[0])) if outs else None


def missing(root: Path) -> dict[str, list[str]]:
    """``stage -> code files it imports that its deps do not cover``, plus the params gate
    (see :func:`gate`) for every stage but the gate's own, plus a wrong or missing
    ``data/loss_code.yaml`` params entry (empty dict: all good)."""
    stages = load_stages(root)
    info = analyse(root, stages)
    g = gate(stages)
    known = known_by_hand(root)
    every = sorted({f for files, _ in info.values() for f in files})
    gaps = {}
    for name, st in stages.items():
        files, keys = info.get(name, ([], False))
        deps = _dep_paths(_body(st))
        if name == GATE_STAGE:  # it hashes every stage's closure: it depends on all of them
            lack = [f for f in every if not covered(f, deps)]
        else:
            lack = [g] if g is not None and g not in deps else []
            dirs = {f.rpartition("/")[0] for f in files if not f.startswith("src/")}
            lack += [f"{d} listed (the digest {CODE_PREFIX}{name} covers the code)"
                     for d in deps if _is_code_dep(d, dirs)]
        declared, roles = _split_by_hand(_loss_param(_body(st)))
        if name in info and declared != keys:
            lack.append(f"params {LOSS_CODE}: {keys or 'none'}")
        lack += [f"params {LOSS_CODE}: {r} (no such role or track in {VARIANT_TABLE})" for r in roles
                 if known is not None and r not in known]
        if lack:
            gaps[name] = lack
    gen = stale_generated(root)
    if gen:
        gaps["(generated)"] = gen
    return gaps


def _is_code_dep(dep: str, script_dirs: set[str], gate_out: str | None = None) -> bool:
    if "${" in dep:
        return False
    if dep == gate_out:
        return True
    if dep.startswith("src/"):
        return True
    return dep.endswith(".py") and dep.rpartition("/")[0] in script_dirs


def write(root: Path) -> list[str]:
    """Rewrite the code deps of every stage in ``dvc.yaml``; returns the changed stage names."""
    from ruamel.yaml import YAML

    root = Path(root).resolve()
    path = root / "dvc.yaml"
    y = YAML()
    y.preserve_quotes = True
    y.width = 4096
    y.indent(mapping=2, sequence=4, offset=2)
    doc = y.load(path.read_text(encoding="utf-8"))
    plain = load_stages(root)
    info = analyse(root, plain)
    g = gate(plain)
    changed = []
    for name in plain:
        files = info[name][0] if name in info else []
        # the gate: every code folder; another stage: the gate's output (its code is a digest)
        head = gate_code_deps(root, plain) if name == GATE_STAGE else [g] if g is not None else []
        if name not in info and not head:
            continue
        body = _body(doc["stages"][name])
        deps = body.get("deps")
        if deps is None:
            from ruamel.yaml.comments import CommentedSeq

            deps = body["deps"] = CommentedSeq()
        script_dirs = {f.rpartition("/")[0] for f in files if not f.startswith("src/")}
        old = [next(iter(d)) if isinstance(d, dict) else str(d) for d in deps]
        keep_idx = [i for i, d in enumerate(old)
                    if not _is_code_dep(d, script_dirs, g) and d not in head]
        new_list = head + [old[i] for i in keep_idx]
        keys = info[name][1] if name in info else False
        declared, roles = _split_by_hand(_loss_param(body))
        if declared != keys:
            _set_loss_param(body, keys, roles)
            changed.append(name)
        if new_list == old:
            continue
        kept = [deps[i] for i in keep_idx]
        del deps[:]
        deps.extend(head)
        deps.extend(kept)
        if name not in changed:
            changed.append(name)
    changed += [n for n in _write_hybrid_inputs(doc, root) if n not in changed]
    if _write_generated(doc, root):
        changed.append("plots/artifacts")
    if changed:
        import io

        buf = io.StringIO()
        y.dump(doc, buf)
        tmp = path.with_suffix(".yaml.tmp")
        tmp.write_text(buf.getvalue(), encoding="utf-8")
        tmp.replace(path)
    return changed


def _set_loss_param(body, keys, roles=()) -> None:
    """Replace the stage's ``data/loss_code.yaml`` params entry by ``keys`` (see
    :func:`analyse`) and the declared role keys ``roles``, keeping its other params entries."""
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    params = body.get("params")
    if params is not None:
        for i in reversed(range(len(params))):
            p = params[i]
            if p == LOSS_CODE or (isinstance(p, dict) and LOSS_CODE in p):
                del params[i]
    if keys is False and roles:
        keys = []
    if keys is False:
        if params is not None and not len(params):
            del body["params"]
        return
    if params is None:
        params = body["params"] = CommentedSeq()
    params.append(CommentedMap({LOSS_CODE: CommentedSeq([*keys, *roles])}))


def _root(value: str) -> str:
    """argparse ``type=`` of ``--root``: a folder holding dvc.yaml."""
    if not (Path(value) / "dvc.yaml").is_file():
        raise argparse.ArgumentTypeError(f"{value}: not a repository folder with a dvc.yaml")
    return value


def main(argv: list[str] | None = None) -> int:
    class ArgParser(argparse.ArgumentParser):  # usage errors: one line, exit 2
        def error(self, message):
            print(f"error: stage_deps: {' '.join(message.split())}", file=sys.stderr)
            sys.exit(2)

    ap = ArgParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=str(Path(__file__).resolve().parents[1]), type=_root)
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--write", action="store_true", help="rewrite the code deps in dvc.yaml")
    g.add_argument("--show", metavar="STAGE", help="print one stage's code closure")
    args = ap.parse_args(argv)
    root = Path(args.root)
    try:
        if args.show:
            print("\n".join(required(root)[args.show]))
            return 0
        if args.write:
            changed = write(root)
            print(f"dvc.yaml: code deps rewritten for {len(changed)} stage(s)"
                  + (f": {', '.join(changed)}" if changed else ""))
            return 0
        gaps = missing(root)
    except (DepsError, SyntaxError, KeyError) as e:
        print(f"stage_deps: {e}", file=sys.stderr)
        return 2
    if gaps:
        for name, files in gaps.items():
            print(f"{name}: missing deps: {', '.join(files)}", file=sys.stderr)
        print("run `python scripts/stage_deps.py --write` to fix dvc.yaml", file=sys.stderr)
        return 1
    print("dvc.yaml: every stage depends on its code digest; the gate covers every closure")
    return 0


if __name__ == "__main__":
    sys.exit(main())
