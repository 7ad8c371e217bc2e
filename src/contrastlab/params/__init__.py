"""``params.yaml`` schema and loader (pydantic).

Every knob of the pipeline lives in ``params.yaml`` under one top-level section per track
(``graph``, ``code``, ``multilabel``) plus ``report``. Each section's schema is in its own
module here. Loading validates the whole file: an unknown key, a wrong type or an
out-of-range value raises :class:`ParamsError` naming the file and the dotted key.

Variants are written once, in ``params.yaml``: the variants (rows) of each track
(``graph.variants``, ``code.variants``, ``code.biencoder.rows``, ``multilabel.variants``),
their values and their search spaces have no schema-side defaults and no copy anywhere else
(``losses/variants.yaml`` holds their loss, its ``kwargs`` and their labels, see
:data:`VARIANT_MAPPINGS`); the schema validates them and resolves, once, what a variant
inherits, so that a variant writes only what differs: its ``search`` is merged per key over
the track's default space ``<track>.tune.search`` (``code.biencoder.tune.search`` for the
bi-encoder rows; a key set to null drops a dimension, ``search: null`` searches nothing), its
``loss`` defaults to the table's (the variant's name unless the table says otherwise) and its
``kwargs`` are the table's. A ``loss`` or ``kwargs`` set in both ``params.yaml`` and
``losses/variants.yaml`` is an error naming the key's path
(:func:`contrastlab.losses.registry.table_conflict`): neither file silently wins.

A track's roles (the variants with a special job: ``multilabel.hybrid_base``, the contrastive
variant whose encoder the hybrids use; ``finetune.index_variant``, the variant of the FAISS
index; ``finetune.head_loss``; ``code.reference_baseline``) are written once, in
``losses/variants.yaml`` (``roles:``), not in ``params.yaml``: the schemas read them as
read-only properties (``MultilabelParams.hybrid_base``, ``FinetuneParams.index_variant``;
computed fields, so ``model_dump`` and the params hashes still hold them), and a params file
that sets one is an error naming its dotted key
(:func:`contrastlab.losses.registry.role_conflict`). DVC, which reads ``params.yaml`` only,
sees them as ``roles.<track>.<role>`` of ``data/loss_code.yaml`` (the ``validate_params``
stage writes it).

Every other leaf has a schema default equal to the shipped ``params.yaml``
(``tests/foundation/test_params.py`` checks it), so a section or key left out of a params
file means the same as the shipped value. Change such a default in both places, or the test
names the leaf that differs.

Example::

    from contrastlab.params import load_params
    p = load_params("params.yaml")
    p.graph.epochs
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from ..errors import InputError
from ..tuning.space import Strict

from .code import CodeParams
from .finetune import FinetuneParams
from .graph import GraphParams
from .multilabel import MultilabelParams
from .report import ReportParams

__all__ = ["Params", "ParamsError", "load_params", "flatten", "params_hash", "VARIANT_MAPPINGS"]

#: The dotted keys of the mappings of variants (rows) whose entries are written in
#: ``params.yaml`` only: the schema has no per-variant values for them (graph, code and
#: bi-encoder rows and the graph's supervised references and fine-tuning rows default to none;
#: a multi-label variant a file leaves out gets the field defaults of
#: :class:`~contrastlab.params.multilabel.VariantParams`).
VARIANT_MAPPINGS = ("graph.variants", "graph.supervised", "graph.finetune", "code.variants",
                    "code.biencoder.rows", "multilabel.variants")


class ParamsError(InputError):
    """A params file that cannot be read or does not match the schema (an :class:`~contrastlab.errors.InputError`)."""


class Params(Strict):
    """Root of ``params.yaml``."""

    graph: GraphParams = GraphParams()
    code: CodeParams = CodeParams()
    multilabel: MultilabelParams = MultilabelParams()
    finetune: FinetuneParams = FinetuneParams()
    report: ReportParams = ReportParams()


def _format_errors(path: Path, err: ValidationError) -> str:
    lines = [f"{path}: invalid parameters ({err.error_count()} problem(s)):"]
    for e in err.errors():
        key = ".".join(str(x) for x in e["loc"]) or "<root>"
        msg = e["msg"]
        if e["type"] == "extra_forbidden":
            msg = "unknown key (not in the schema; check the spelling)"
        text = str((e.get("ctx") or {}).get("error", "")) if e["type"] == "value_error" else ""
        got = e.get("input")
        got_s = "" if isinstance(got, (dict, list)) or got is None else f" (got {got!r})"
        if text.startswith(key + "."):
            lines.append(f"  - {text}")  # the message names the key's full path itself
        elif re.match(r"[A-Za-z_][\w-]*(\.[\w-]+)+: ", text):
            lines.append(f"  - {key}.{text}")  # a path below the key (an inherited search space)
        else:
            lines.append(f"  - {key}: {msg}{got_s}")
    return "\n".join(lines)


def load_params(path: str | Path = "params.yaml") -> Params:
    """Read and validate a params file.

    Args:
        path: YAML file with the sections of :class:`Params`.

    Returns:
        The validated :class:`Params`.

    Raises:
        ParamsError: the file is missing, empty, not valid YAML, not a mapping, or fails the
            schema; the message names the file and every offending dotted key.
    """
    path = Path(path)
    if not path.exists():
        raise ParamsError(f"{path}: params file not found")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        raise ParamsError(f"{path}: not valid YAML: {e}") from None
    if not raw:
        raise ParamsError(f"{path}: empty params file; it must hold at least one of the sections "
                          "graph, code, multilabel, report (sections left out take the schema's "
                          "defaults)")
    if not isinstance(raw, dict):
        raise ParamsError(f"{path}: top level must be a mapping, got {type(raw).__name__}")
    try:
        return Params.model_validate(raw)
    except ValidationError as e:
        raise ParamsError(_format_errors(path, e)) from None


def flatten(obj: Any, prefix: str = "", sep: str = ".") -> dict[str, Any]:
    """Flatten nested dicts/lists/pydantic models to ``{"a.b.c": value}`` (for MLflow params)."""
    if isinstance(obj, BaseModel):
        obj = obj.model_dump(mode="json")
    if isinstance(obj, list) and any(isinstance(v, (dict, list)) for v in obj):
        obj = dict(enumerate(obj))  # keyed by index
    if not isinstance(obj, dict):
        return {prefix: obj}
    out: dict[str, Any] = {}
    for k, v in obj.items():
        out.update(flatten(v, f"{prefix}{sep}{k}" if prefix else str(k), sep))
    return out


def params_hash(obj: Any) -> str:
    """Short stable hash (12 hex digits) of a params section, for tags and report captions."""
    if isinstance(obj, BaseModel):
        obj = obj.model_dump(mode="json")
    blob = json.dumps(obj, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:12]
