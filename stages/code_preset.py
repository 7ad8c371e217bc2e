"""Switch the ``code:`` section of params.yaml to a preset (not a DVC stage; one command).

    python stages/code_preset.py seed-scale   # Qwen2.5-Coder-3B L18, ~150 repos, 8 GPUs, 100 epochs
    python stages/code_preset.py seed-corpus  # MiniLM on the CPU, corpus >= 49,631 bodies from 174 distributions
    python stages/code_preset.py default      # back to the offline CPU default

Only the ``code:`` block of params.yaml is replaced (the other sections and their comments
stay byte-identical); the result is validated before params.yaml is atomically replaced.
Presets live in ``presets/code-<name>.yaml``.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import yaml

from contrastlab.cli import run_stage
from contrastlab.errors import InputError
from contrastlab.io import atomic_path
from contrastlab.params import load_params


def _code_block(text: str) -> tuple[int, int]:
    lines = text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.startswith("code:")]
    if len(starts) != 1:
        raise InputError("params.yaml: expected exactly one top-level 'code:' key")
    i = starts[0]
    j = i + 1
    while j < len(lines) and not re.match(r"^[A-Za-z_]", lines[j]):
        j += 1
    # comments directly above the next top-level key belong to it
    while j - 1 > i and lines[j - 1].startswith("#"):
        j -= 1
    a = sum(len(x) for x in lines[:i])
    b = sum(len(x) for x in lines[:j])
    return a, b


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("preset", help="name of presets/code-<name>.yaml (seed-scale, default)")
    ap.add_argument("--params", default="params.yaml")
    args = ap.parse_args(argv)
    src = Path(__file__).resolve().parents[1] / "presets" / f"code-{args.preset}.yaml"
    if not src.exists():
        known = sorted(p.stem[5:] for p in src.parent.glob("code-*.yaml"))
        raise FileNotFoundError(f"{src}: no such preset (known: {', '.join(known)})")
    preset_text = src.read_text(encoding="utf-8")
    preset = yaml.safe_load(preset_text)
    if set(preset) != {"code"}:
        raise InputError(f"{src}: must hold exactly the top-level key 'code'")
    params = Path(args.params)
    text = params.read_text(encoding="utf-8")
    a, b = _code_block(text)
    block = preset_text[preset_text.index("code:"):].rstrip() + "\n"
    new = text[:a] + block + ("\n" if not text[b:].startswith("\n") and b < len(text) else "") + text[b:]
    with atomic_path(params, suffix=".yaml") as tmp:
        tmp.write_text(new, encoding="utf-8")
        load_params(tmp)  # validate before replacing params.yaml
    print(f"{params}: code section set to preset {args.preset!r} ({src.name})")
    return 0


if __name__ == "__main__":
    sys.exit(run_stage(main))
