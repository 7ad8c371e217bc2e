"""The environment is pinned whole: the code-retrieval corpus is the source of installed
distributions, so every one of them must have an exact version in ``constraints.txt``
(applied by ``scripts/env.sh``), and the direct pins of ``requirements.txt`` must agree."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def _pins(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        m = re.match(r"^([A-Za-z0-9_.\-]+)==([^\s;#]+)", line.strip())
        if m:
            out[re.sub(r"[-_.]+", "-", m.group(1)).lower()] = m.group(2)
    return out


def test_every_corpus_distribution_is_pinned_in_constraints():
    pins = _pins(ROOT / "constraints.txt")
    dists = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))["code"]["repos"]["dists"]
    loose = [d for d in dists if re.sub(r"[-_.]+", "-", d).lower() not in pins
             and re.sub(r"[-_.]+", "-", d).lower() != "torch"]
    assert not loose, f"code.repos.dists without an exact pin in constraints.txt: {loose}"
    assert "pip" in pins and "setuptools" in pins  # both are in the corpus and not in requirements


def test_requirements_and_constraints_agree():
    req, con = _pins(ROOT / "requirements.txt"), _pins(ROOT / "constraints.txt")
    clash = {k: (v, con[k]) for k, v in req.items() if k in con and con[k] != v}
    assert not clash, f"requirements.txt vs constraints.txt: {clash}"
    assert "torch" in req and "torch" not in con  # torch's CPU build is pinned in requirements only
