"""Presets are override files of a few lines, merged over params.yaml (scripts/preset.py,
contrastlab.params.presets)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import yaml

from contrastlab.params import ParamsError, load_params
from contrastlab.params.presets import apply_to_text, load_with_overrides, merge, read_override

ROOT = Path(__file__).resolve().parents[2]
PRESETS = sorted((ROOT / "presets").glob("*.yaml"))


def test_merge_rules():
    base = {"a": {"x": 1, "y": [1, 2]}, "v": {"p": {"loss": "a"}, "q": {"loss": "b"}}, "s": 1}
    over = {"a": {"y": [3]}, "v": {"r": {"loss": "c"}}}
    out = merge(base, over)
    assert out == {"a": {"x": 1, "y": [3]}, "v": {"p": {"loss": "a"}, "q": {"loss": "b"},
                                                   "r": {"loss": "c"}}, "s": 1}
    assert merge(base, over, frozenset({"v"}))["v"] == {"r": {"loss": "c"}}
    assert base["a"]["y"] == [1, 2]  # inputs untouched


@pytest.mark.parametrize("preset", PRESETS, ids=lambda p: p.name)
def test_every_preset_is_a_short_valid_override(preset):
    over, _ = read_override(preset)
    p = load_with_overrides(ROOT / "params.yaml", [preset])
    base = load_params(ROOT / "params.yaml")
    for section in over:
        assert getattr(p, section) != getattr(base, section), section
    # an override, not a copy of params.yaml: most keys come from the defaults
    leaves = sum(1 for line in preset.read_text().splitlines()
                 if line.strip() and not line.lstrip().startswith(("#", "{dist", "- ")))
    assert leaves < 60, f"{preset.name}: {leaves} lines of keys"


def test_applying_a_preset_rewrites_only_its_values(tmp_path):
    text = (ROOT / "params.yaml").read_text()
    preset = ROOT / "presets" / "code-seed-corpus.yaml"
    over, replace = read_override(preset)
    new = apply_to_text(text, over, replace)
    path = tmp_path / "params.yaml"
    path.write_text(new)
    got = load_params(path)
    assert got.code == load_with_overrides(ROOT / "params.yaml", [preset]).code
    assert got.code.extract.max_functions_per_repo == 1000
    assert set(got.code.variants) == {"infonce", "smoothl1_scratch", "infonce_scratch"}
    # other sections byte-identical, comments of untouched code keys kept
    for sec in ("graph", "multilabel", "finetune"):
        a = text[text.index(f"\n{sec}:"):].split("\n\n", 1)[0]
        assert a in new, sec
    assert "# MinHash LSH on token 3-shingles" in new or "shingle" not in text
    assert "repositories parsed at once" in new
    assert apply_to_text(new, over, replace) == new  # idempotent


def test_bad_presets_name_the_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("code: [1, 2\n")
    with pytest.raises(ParamsError, match="bad.yaml"):
        read_override(bad)
    bad.write_text("codes: {train: {lr: 0.1}}\n")
    with pytest.raises(ParamsError, match="unknown section"):
        read_override(bad)
    bad.write_text("_replace: code.variants\ncode: {}\n")
    with pytest.raises(ParamsError, match="_replace"):
        read_override(bad)
    bad.write_text("code: {train: {lr: -1}}\n")
    with pytest.raises(ParamsError, match="bad.yaml"):
        load_with_overrides(ROOT / "params.yaml", [bad])


def test_preset_command_validates_before_replacing(tmp_path):
    spec = importlib.util.spec_from_file_location("preset_cli", ROOT / "scripts" / "preset.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    params = tmp_path / "params.yaml"
    params.write_text((ROOT / "params.yaml").read_text())
    assert mod.main([str(ROOT / "presets/code-seed-scale.yaml"), "--params", str(params)]) == 0
    assert load_params(params).code.teacher.layer == 18
    before = params.read_text()
    bad = tmp_path / "bad.yaml"
    bad.write_text("code: {train: {lr: -1}}\n")
    with pytest.raises(ParamsError):
        mod.main([str(bad), "--params", str(params)])
    assert params.read_text() == before  # nothing lost
    assert yaml.safe_load(before)["graph"] == yaml.safe_load((ROOT / "params.yaml").read_text())["graph"]
