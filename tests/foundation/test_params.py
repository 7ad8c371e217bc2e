"""params.yaml is validated on load: clear errors naming the file and the dotted key."""

from pathlib import Path

import pytest

from contrastlab.params import ParamsError, flatten, load_params, params_hash
from contrastlab.utils import repo_root

ROOT = repo_root(Path(__file__))


def test_repository_params_file_is_valid():
    p = load_params(ROOT / "params.yaml")
    assert p.report.digits >= 1


def _write(tmp_path: Path, text: str) -> Path:
    f = tmp_path / "params.yaml"
    f.write_text(text)
    return f


def test_unknown_key_is_named_with_file(tmp_path):
    f = _write(tmp_path, "report:\n  digitz: 3\n")
    with pytest.raises(ParamsError) as e:
        load_params(f)
    msg = str(e.value)
    assert str(f) in msg and "report.digitz" in msg and "unknown key" in msg


def test_unknown_top_level_section(tmp_path):
    f = _write(tmp_path, "graphs: {}\n")
    with pytest.raises(ParamsError, match=r"graphs: unknown key"):
        load_params(f)


def test_wrong_type_is_named(tmp_path):
    f = _write(tmp_path, "report:\n  digits: three\n")
    with pytest.raises(ParamsError, match=r"report\.digits: .*integer"):
        load_params(f)


def test_out_of_range_is_named(tmp_path):
    f = _write(tmp_path, "report:\n  digits: 0\n")
    with pytest.raises(ParamsError, match=r"report\.digits: .*greater than or equal to 1.*got 0"):
        load_params(f)


def test_malformed_yaml_and_missing_file(tmp_path):
    f = _write(tmp_path, "report: [unclosed\n")
    with pytest.raises(ParamsError, match="not valid YAML"):
        load_params(f)
    with pytest.raises(ParamsError, match="not found"):
        load_params(tmp_path / "nope.yaml")
    g = _write(tmp_path, "- a\n- b\n")
    with pytest.raises(ParamsError, match="must be a mapping"):
        load_params(g)


def test_flatten_and_hash():
    flat = flatten({"a": {"b": 1, "c": [1, 2]}, "d": [{"e": 3}]})
    assert flat == {"a.b": 1, "a.c": [1, 2], "d.0.e": 3}
    assert params_hash({"x": 1}) == params_hash({"x": 1})
    assert params_hash({"x": 1}) != params_hash({"x": 2})


def test_stage_with_bad_params_exits_with_clear_error(tmp_path):
    import subprocess
    import sys

    bad = tmp_path / "params.yaml"
    bad.write_text("report:\n  digits: 99\n")
    r = subprocess.run([sys.executable, str(ROOT / "stages" / "report.py"), "--params", str(bad),
                        "--out-dir", str(tmp_path / "reports")],
                       capture_output=True, text=True, cwd=tmp_path,
                       env={**__import__("os").environ, "CONTRASTLAB_MLFLOW": "0"})
    assert r.returncode == 2
    assert "report.digits" in r.stderr and str(bad) in r.stderr
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "reports" / "comparison.md").exists()


# ------------------------------------------------------------------ defaults, bounds, registry
def test_empty_params_file_is_rejected(tmp_path):
    """An empty params.yaml is an error naming the missing sections (it does not run with
    schema defaults)."""
    empty = tmp_path / "params.yaml"
    empty.write_text("")
    with pytest.raises(ParamsError, match="empty params file"):
        load_params(empty)


def _under(key: str, prefixes) -> bool:
    return any(key == p or key.startswith(p + ".") for p in prefixes)


def test_schema_defaults_equal_the_shipped_params_file():
    """One source of defaults: every leaf of the schema's defaults (``Params()``) equals the
    shipped params.yaml, in every section, except the variants (rows) of each track
    (:data:`~contrastlab.params.VARIANT_MAPPINGS`), which params.yaml alone writes; the
    message lists the leaves that differ."""
    from contrastlab.params import VARIANT_MAPPINGS, Params, flatten

    shipped = {k: v for k, v in flatten(load_params(ROOT / "params.yaml")).items()
               if not _under(k, VARIANT_MAPPINGS)}
    schema = {k: v for k, v in flatten(Params()).items() if not _under(k, VARIANT_MAPPINGS)}
    diff = sorted(k for k in set(shipped) | set(schema)
                  if shipped.get(k, "<absent>") != schema.get(k, "<absent>"))
    assert not diff, (f"{len(diff)} leaves differ between the schema defaults and params.yaml: "
                      + ", ".join(f"{k} (schema {schema.get(k, '<absent>')!r}, params.yaml "
                                  f"{shipped.get(k, '<absent>')!r})" for k in diff[:15]))
    # and the comparison is not vacuous: a changed leaf is seen
    assert flatten(Params.model_validate({"graph": {"train": {"epochs": 7}}}))["graph.train.epochs"] \
        != shipped["graph.train.epochs"]


def test_variants_are_written_in_params_yaml_only(tmp_path):
    """A variant's values and search space have one home, params.yaml: the schema holds no
    per-variant values (no copy to keep equal) and the variant table (``variants.yaml``)
    refuses a ``params`` block."""
    import yaml

    from contrastlab.errors import InputError
    from contrastlab.losses.registry import load_variant_table
    from contrastlab.params import VARIANT_MAPPINGS, Params
    from contrastlab.params.multilabel import MODEL_DEFAULTS, VariantParams, variant_loss

    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    defaults = Params()
    for key in VARIANT_MAPPINGS:
        node, schema = raw, defaults
        for part in key.split("."):
            node, schema = node[part], getattr(schema, part)
        assert isinstance(node, dict) and node, f"params.yaml must write {key}"
        if key == "multilabel.variants":  # field defaults only, nothing copied per variant:
            # plus what every variant inherits (the table's kwargs, the track's default search
            # for a contrastive one, the method's model defaults)
            ml = defaults.multilabel
            assert schema == {n: VariantParams(
                kwargs=dict(variant_loss(n)[1]), model=dict(MODEL_DEFAULTS.get(n, {})),
                search=dict(ml.tune.search) if variant_loss(n)[0] else {}) for n in schema}, key
        else:
            assert schema == {}, f"{key}: the schema has per-variant defaults {sorted(schema)}"
    # a file without the variants has none (nothing is filled in from a second table)
    f = _write(tmp_path, "graph:\n  train: {epochs: 3}\n")
    assert load_params(f).graph.variants == {}
    table = tmp_path / "variants.yaml"
    table.write_text("graph:\n  variants:\n    ntxent: {params: {loss: ntxent}}\n")
    with pytest.raises(InputError, match=r"params\.yaml only"):
        load_variant_table(table)


@pytest.mark.parametrize("section,key,value", [
    ("graph", ["train", "epochs"], 10**7),
    ("graph", ["final", "seeds"], [2**63]),
    ("graph", ["train", "lr"], 5.0),
    ("code", ["train", "nproc"], 10**6),
    ("code", ["train", "seed"], 2**63),
    ("code", ["train", "epochs"], 10**7),
    ("code", ["train", "init_temperature"], 1e3),
    ("code", ["split", "seed"], -1),
    ("multilabel", ["seeds"], [0, 2**63]),
    ("multilabel", ["train", "lr"], 2.0),
    ("multilabel", ["variants", "all", "temperature"], 100.0),
])
def test_upper_bounds(tmp_path, section, key, value):
    import yaml

    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    node = raw[section]
    for k in key[:-1]:
        node = node[k]
    node[key[-1]] = value
    p = tmp_path / "params.yaml"
    p.write_text(yaml.safe_dump(raw))
    with pytest.raises(ParamsError) as e:
        load_params(p)
    assert f"{section}.{'.'.join(key)}" in str(e.value)


def test_allowed_losses_come_from_the_registry(tmp_path, monkeypatch):
    """A loss registered with the right ``needs`` is accepted by the track's validator."""
    import yaml

    from contrastlab.losses import registry
    from contrastlab.losses.registry import LossSpec

    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    raw["graph"]["variants"]["mine"] = {"loss": "mine_views", "temperature": 0.3}
    raw["code"]["variants"]["mine"] = {"loss": "mine_targets"}
    raw["multilabel"]["losses"].append("mine_ml")
    p = tmp_path / "params.yaml"
    p.write_text(yaml.safe_dump(raw))
    with pytest.raises(ParamsError) as e:
        load_params(p)
    for k in ("graph.variants.mine.loss", "code.variants.mine.loss", "multilabel.losses"):
        assert k in str(e.value)
    monkeypatch.setitem(registry.LOSSES, "mine_views", LossSpec("x:y", "views", "selfsup", "Mine"))
    monkeypatch.setitem(registry.LOSSES, "mine_targets", LossSpec("x:y", "targets", "retrieval", "M"))
    monkeypatch.setitem(registry.LOSSES, "mine_ml", LossSpec("x:y", "multilabels", "multilabel", "M"))
    got = load_params(p)
    assert got.graph.variants["mine"].loss == "mine_views"
    assert "mine_ml" in got.multilabel.variants  # a default variant block for the new loss
    # a loss of another track is refused
    raw["code"]["variants"]["mine"] = {"loss": "mine_views"}
    p.write_text(yaml.safe_dump(raw))
    with pytest.raises(ParamsError, match="code.variants.mine.loss"):
        load_params(p)


def test_registry_attributes_match_the_loss_functions():
    """``stochastic`` is set exactly for the losses taking a generator; kwargs are introspected."""
    import inspect

    from contrastlab.losses import LOSSES

    for name, spec in LOSSES.items():
        params = inspect.signature(spec.function()).parameters
        assert spec.stochastic == ("generator" in params), name
        assert spec.title
    assert set(LOSSES["mochi"].kwargs) == {"temperature", "n_hard", "s", "s_prime"}
    assert "mode" not in LOSSES["sim_only"].kwargs  # bound by the registry entry
    assert "reduction" not in LOSSES["all"].kwargs and "temperature" in LOSSES["all"].kwargs


def test_validate_params_stage_rejects_before_writing(tmp_path):
    import importlib.util

    import yaml

    spec = importlib.util.spec_from_file_location("validate_params", ROOT / "stages" / "validate_params.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = tmp_path / "ok.json"
    codes = ["--loss-code", str(tmp_path / "loss_code.yaml")]
    assert mod.main(["--out", str(out), *codes]) == 0 and out.exists()
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    # (simdis's kwargs are the variant table's; mulsupcon binds none there, so params.yaml may)
    raw["multilabel"]["variants"]["mulsupcon"]["kwargs"] = {"weightin": "log_prob"}
    bad = tmp_path / "params.yaml"
    bad.write_text(yaml.safe_dump(raw))
    out2 = tmp_path / "ok2.json"
    with pytest.raises(ParamsError, match=r"multilabel\.variants\.mulsupcon\.kwargs\.weightin"):
        mod.main(["--params", str(bad), "--out", str(out2), *codes])
    assert not out2.exists()


# ------------------------------------------------ every value written once (issue 57)
def _shipped_with(tmp_path, edit):
    import yaml

    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    edit(raw)
    return _write(tmp_path, yaml.safe_dump(raw, sort_keys=False))


@pytest.mark.parametrize("track,variant,key,value", [
    ("multilabel", "simdis", "kwargs", {"weighting": "log_prob"}),
    ("code", "smoothl1_scratch", "loss", "smoothl1"),
])
def test_a_key_in_both_params_and_the_variant_table_is_an_error_naming_its_path(
        tmp_path, track, variant, key, value):
    """A variant's loss / kwargs written in params.yaml and in losses/variants.yaml: an error
    naming the key's path and both files, not a silent winner (even with equal values)."""
    f = _shipped_with(tmp_path, lambda r: r[track]["variants"][variant].update({key: value}))
    with pytest.raises(ParamsError) as e:
        load_params(f)
    assert (f"{track}.variants.{variant}.{key}: set in both params.yaml and "
            "src/contrastlab/losses/variants.yaml") in str(e.value)


def test_the_variant_tables_kwargs_reach_a_variant_params_yaml_writes(tmp_path):
    """simdis's weighting is written once, in the variant table: the params block (written,
    without kwargs) gets it; a variant whose row binds none may set kwargs in params.yaml."""
    p = load_params(ROOT / "params.yaml").multilabel
    assert "kwargs" not in yaml_block("multilabel", "simdis")
    for v, w in (("simdis", "log_prob"), ("simdis_sum", "log_prob_sum"), ("simdis_eq13", "numerator"),
                 ("sim_only", "log_prob"), ("dis_only", "log_prob")):
        assert p.variants[v].kwargs == {"weighting": w}, v
    f = _shipped_with(tmp_path, lambda r: r["multilabel"]["variants"]["mulsupcon"].update(
        kwargs={"x": 1}))
    assert load_params(f).multilabel.variants["mulsupcon"].kwargs == {"x": 1}


def yaml_block(track, variant):
    import yaml

    return yaml.safe_load((ROOT / "params.yaml").read_text())[track]["variants"][variant]


def test_a_variant_inherits_the_tracks_search_space_and_merges_its_own_per_key(tmp_path):
    """<track>.tune.search is every (contrastive) variant's space: a variant without search
    gets it; a partial search replaces only its keys (in place), adds new ones after, and
    `key: null` drops one; `search: null` searches nothing; a baseline inherits nothing."""
    def edit(r):
        ml = r["multilabel"]["variants"]
        ml["all"].pop("search", None)
        ml["any"]["search"] = {"lr": {"type": "float", "low": 0.001, "high": 0.002},
                               "queue": None, "extra_knob": {"type": "int", "low": 1, "high": 4}}
        ml["mulsupcon"]["search"] = None
        g = r["graph"]["variants"]
        g["ntxent"]["search"] = {"temperature": {"type": "float", "low": 0.1, "high": 0.5}}
    p = load_params(_shipped_with(tmp_path, edit))
    ml, default = p.multilabel, p.multilabel.tune.search
    assert list(default) == ["temperature", "lr", "mask_rate", "queue"]
    assert ml.variants["all"].search == default
    assert ml.variants["simdis"].search == default          # not written in params.yaml at all
    anys = ml.variants["any"].search
    assert list(anys) == ["temperature", "lr", "mask_rate", "extra_knob"]
    assert anys["lr"] == {"type": "float", "low": 0.001, "high": 0.002}
    assert anys["temperature"] == default["temperature"] and anys["mask_rate"] == default["mask_rate"]
    assert ml.variants["mulsupcon"].search == {}
    assert list(ml.variants["bce"].search) == ["lr", "mask_rate"]  # a baseline: its own only
    assert ml.variants["logreg"].search == {}
    g = p.graph
    assert g.variants["mixco"].search == {**g.tune.search, **{k: g.variants["mixco"].search[k]
                                                               for k in ("alpha", "weight")}}
    assert list(g.variants["mochi"].search)[-3:] == ["n_hard", "s", "s_prime"]
    assert g.variants["ntxent"].search["temperature"].high == 0.5
    assert list(g.variants["ntxent"].search) == list(g.tune.search)
    # code: infonce adds temperature to code.tune.search's lr; the scratch rows are not tuned
    c = load_params(ROOT / "params.yaml").code
    assert list(c.variants["infonce"].search) == ["lr", "temperature"]
    assert c.variants["cosine"].search == c.tune.search
    assert c.variants["smoothl1_scratch"].search == {}
    assert all(r.search == c.biencoder.tune.search for r in c.biencoder.rows.values())


def test_a_variants_loss_defaults_to_the_variant_tables(tmp_path):
    """loss: written nowhere for most variants (the variant's name), in variants.yaml for the
    from-scratch code ablations; a loss that differs from the table's is refused, and a name
    that is neither a table row nor a registry loss needs one."""
    p = load_params(ROOT / "params.yaml")
    assert {n: v.loss for n, v in p.graph.variants.items()} == {n: n for n in p.graph.variants}
    assert p.code.variants["smoothl1_scratch"].loss == "smoothl1"
    assert p.code.variants["infonce_hardneg"].loss == "infonce_hardneg"
    for track, v in (("graph", "ntxent"), ("code", "cosine")):
        assert "loss" not in yaml_block(track, v)
    f = _shipped_with(tmp_path, lambda r: r["graph"]["variants"]["ntxent"].update(loss="mixco"))
    with pytest.raises(ParamsError, match=r"graph\.variants\.ntxent\.loss: 'mixco' differs"):
        load_params(f)
    f = _shipped_with(tmp_path, lambda r: r["graph"]["variants"].update(ntxent_t2={"temperature": 0.2}))
    with pytest.raises(ParamsError, match=r"graph\.variants\.ntxent_t2\.loss: required"):
        load_params(f)
    f = _shipped_with(tmp_path, lambda r: r["graph"]["variants"].update(
        ntxent_t2={"loss": "ntxent", "temperature": 0.2}))
    assert load_params(f).graph.variants["ntxent_t2"].loss == "ntxent"


# ------------------------------------------------ roles: written once, in variants.yaml roles:
@pytest.mark.parametrize("track,key", [("multilabel", "hybrid_base"), ("finetune", "index_variant")])
def test_a_role_is_set_in_the_variant_table_not_in_params_yaml(tmp_path, track, key):
    """A track's role (``variants.yaml`` ``roles:``) is written once: the schema reads it from
    the variant table (and keeps it in ``model_dump``, so the params hashes hold it), and a
    params file that sets it, even to the same value, fails naming the dotted key and where
    the role is set."""
    import yaml

    from contrastlab.losses.registry import role

    assert key not in yaml.safe_load((ROOT / "params.yaml").read_text())[track]
    p = load_params(ROOT / "params.yaml")
    assert getattr(getattr(p, track), key) == role(track, key)
    assert flatten(p)[f"{track}.{key}"] == role(track, key)
    f = _shipped_with(tmp_path, lambda r: r[track].update({key: role(track, key)}))
    with pytest.raises(ParamsError) as e:
        load_params(f)
    msg = str(e.value)
    assert str(f) in msg
    assert (f"{track}.{key}: a role, set in src/contrastlab/losses/variants.yaml (roles: "
            f"{track}.roles.{key} = {role(track, key)!r}), not in params.yaml") in msg


def test_the_roles_are_still_validated(tmp_path, monkeypatch):
    """hybrid_base must be a contrastive multi-label variant and index_variant one of
    finetune.variants: the schemas check the roles the variant table sets."""
    from contrastlab.losses import registry

    f = _shipped_with(tmp_path, lambda r: r["finetune"].update(variants=["all", "bce"]))
    with pytest.raises(ParamsError, match=r"index_variant 'mulsupcon' \(the role of "
                                          r"src/contrastlab/losses/variants\.yaml, roles:\) is not in"):
        load_params(f)
    monkeypatch.setitem(registry.VARIANTS["multilabel"]["roles"], "hybrid_base", "logreg")
    with pytest.raises(ParamsError, match=r"hybrid_base 'logreg' .*must be a contrastive variant"):
        load_params(ROOT / "params.yaml")


def test_the_params_gate_writes_the_roles_to_loss_code(tmp_path):
    """DVC reads params files only: the validate_params stage copies the variant table's roles
    to ``data/loss_code.yaml`` (``roles.<track>.<role>``), the keys that the stages reading a
    role depend on, and writes each stage's code digest (``code.<stage>``)."""
    import importlib.util

    import yaml

    from contrastlab.losses.registry import VARIANTS, role

    spec = importlib.util.spec_from_file_location("validate_params", ROOT / "stages" / "validate_params.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = tmp_path / "loss_code.yaml"
    assert mod.main(["--out", str(tmp_path / "ok.json"), "--loss-code", str(out)]) == 0
    roles = yaml.safe_load(out.read_text())["roles"]
    assert roles["multilabel"] == {"hybrid_base": role("multilabel", "hybrid_base")}
    assert roles["finetune"] == {"index_variant": role("finetune", "index_variant"),
                                 "head_loss": role("finetune", "head_loss")}
    assert roles == {t: sec["roles"] for t, sec in VARIANTS.items() if sec["roles"]}
    # and the digest of every stage's code, the key each stage depends on (the gate put
    # scripts/ on sys.path to compute them)
    from stage_deps import code_digests

    assert yaml.safe_load(out.read_text())["code"] == code_digests(ROOT)
