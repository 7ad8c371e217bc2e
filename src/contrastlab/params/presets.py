"""Presets: override files of a few lines merged over ``params.yaml``.

A preset (``presets/<name>.yaml``) holds only the keys that differ from the defaults, under
their top-level sections (``code:``, ``finetune:``, ...). Mappings merge key by key; any other
value (a list, a scalar) replaces the default. A mapping listed under the preset's
``_replace:`` (dotted paths, e.g. ``[code.variants]``) replaces the default mapping whole
(variants the preset leaves out are gone).

Two ways to use one, both documented in docs/usage.md:

- ``python scripts/preset.py presets/code-seed-scale.yaml`` rewrites ``params.yaml`` in place:
  only the values the preset changes move; every other line, comment included, stays as it
  is (``git checkout params.yaml`` goes back);
- a stage that takes ``--override FILE`` (``finetune_encoder``) merges it in memory for
  one run (:func:`load_with_overrides`).
"""

from __future__ import annotations

import copy
import io
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from . import Params, ParamsError, _format_errors, load_params

__all__ = ["merge", "read_override", "apply_to_text", "load_with_overrides"]

REPLACE_KEY = "_replace"


def merge(base: Any, over: Any, replace: frozenset[str] | set[str] = frozenset(),
          path: str = "") -> Any:
    """``over`` deep-merged onto ``base`` (new objects; neither input is changed): mappings
    merge key by key, unless their dotted path is in ``replace``; other values replace."""
    if not (isinstance(base, dict) and isinstance(over, dict)) or path in replace:
        return copy.deepcopy(over)
    out = copy.deepcopy(base)
    for k, v in over.items():
        p = f"{path}.{k}" if path else str(k)
        out[k] = merge(out[k], v, replace, p) if k in out else copy.deepcopy(v)
    return out


def read_override(path: str | Path) -> tuple[dict, frozenset[str]]:
    """``(override, replace paths)`` of a preset file.

    Raises:
        contrastlab.params.ParamsError: the file is missing or does not parse, is not a
            mapping, names an unknown section, or ``_replace`` is not a list of dotted paths.
    """
    path = Path(path)
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as e:
        raise ParamsError(f"{path}: cannot read the preset ({e})") from None
    if not isinstance(doc, dict):
        raise ParamsError(f"{path}: a preset must be a mapping of params sections")
    replace = doc.pop(REPLACE_KEY, []) or []
    if not isinstance(replace, list) or not all(isinstance(r, str) for r in replace):
        raise ParamsError(f"{path}: {REPLACE_KEY} must be a list of dotted paths")
    unknown = sorted(set(doc) - set(Params.model_fields))
    if unknown:
        raise ParamsError(f"{path}: unknown section(s) {unknown}; known: "
                          f"{', '.join(Params.model_fields)}")
    return doc, frozenset(replace)


def load_with_overrides(params_path: str | Path, overrides: list[str | Path] = ()) -> Params:
    """``load_params(params_path)`` with preset files merged on top, in order.

    Raises:
        contrastlab.params.ParamsError: a file is unreadable or the merged params fail the
            schema (the message names the last preset).
    """
    base = load_params(params_path)  # the base file's own errors first
    if not overrides:
        return base
    raw = yaml.safe_load(Path(params_path).read_text(encoding="utf-8"))
    for f in overrides:
        raw = merge(raw, *read_override(f))
    try:
        return Params.model_validate(raw)
    except ValidationError as e:
        raise ParamsError(_format_errors(Path(overrides[-1]), e)) from None


# ------------------------------------------------------------------ in-place rewrite
def _yaml():
    from ruamel.yaml import YAML

    y = YAML()
    y.preserve_quotes = True
    y.width = 4096  # params.yaml keeps long flow lists on one line
    y.indent(mapping=2, sequence=4, offset=2)
    y.representer.add_representer(
        type(None), lambda r, _: r.represent_scalar("tag:yaml.org,2002:null", "null"))
    return y


def _section(text: str, name: str) -> tuple[int, int]:
    """Character span of the top-level ``name:`` block (comments just above the next
    top-level key belong to that key); ``ParamsError`` when not exactly one such key."""
    lines = text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if re.match(rf"^{re.escape(name)}:", line)]
    if len(starts) != 1:
        raise ParamsError(f"params.yaml: expected exactly one top-level {name!r} key")
    i = starts[0]
    j = i + 1
    while j < len(lines) and not re.match(r"^[A-Za-z_]", lines[j]):
        j += 1
    while j - 1 > i and lines[j - 1].startswith("#"):
        j -= 1
    return sum(len(x) for x in lines[:i]), sum(len(x) for x in lines[:j])


def _styled(v: Any):
    """Plain data as ruamel nodes in params.yaml's style: small mappings of scalars, and
    lists of scalars or of such mappings, in flow style; everything else in block style."""
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    def flat(x) -> bool:
        return isinstance(x, dict) and len(x) <= 4 and all(
            not isinstance(y, (dict, list)) for y in x.values())

    if isinstance(v, dict):
        m = CommentedMap((k, _styled(x)) for k, x in v.items())
        if flat(v):
            m.fa.set_flow_style()
        return m
    if isinstance(v, list):
        s = CommentedSeq(_styled(x) for x in v)
        if all(flat(x) or not isinstance(x, (dict, list)) for x in v):
            s.fa.set_flow_style()
        return s
    return v


def _merge_into(node, over: dict, replace: frozenset[str], path: str) -> None:
    """Merge ``over`` into the ruamel mapping ``node`` in place (untouched keys keep comments)."""
    for k, v in over.items():
        p = f"{path}.{k}"
        if isinstance(v, dict) and isinstance(node.get(k), dict) and p not in replace:
            _merge_into(node[k], v, replace, p)
        elif node.get(k) != v or k not in node:
            node[k] = _styled(v)


def apply_to_text(text: str, over: dict, replace: frozenset[str] = frozenset()) -> str:
    """``params.yaml`` text with ``over`` merged in: each section the preset names is
    rewritten, changing only the values the preset sets; the other sections stay
    byte-identical.

    Raises:
        ParamsError: a section is missing from ``text`` or the result fails the schema.
    """
    y = _yaml()
    for name, sec in over.items():
        a, b = _section(text, name)
        block = y.load(text[a:b])
        if not isinstance(sec, dict):
            raise ParamsError(f"preset section {name!r} must be a mapping")
        _merge_into(block[name], sec, replace, name)
        buf = io.StringIO()
        y.dump(block, buf)
        new = buf.getvalue()
        if b < len(text) and not new.endswith("\n\n"):
            new = new.rstrip("\n") + "\n\n"
        text = text[:a] + new + text[b:]
    return text
