"""Every DVC stage depends on the digest of its script's import closure, and the params gate
(which writes the digests) on every file of every closure (scripts/stage_deps.py)."""

from __future__ import annotations

import importlib.util
import shutil
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


def _tool():
    spec = importlib.util.spec_from_file_location("stage_deps", ROOT / "scripts" / "stage_deps.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["stage_deps"] = mod
    spec.loader.exec_module(mod)
    return mod


sd = _tool()


def _copy_project(tmp: Path) -> Path:
    for d in ("src", "stages"):
        shutil.copytree(ROOT / d, tmp / d, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copy2(ROOT / "dvc.yaml", tmp / "dvc.yaml")
    return tmp


def test_every_stage_covers_its_import_closure():
    gaps = sd.missing(ROOT)
    assert gaps == {}, "dvc.yaml misses imports (run python scripts/stage_deps.py --write):\n" + \
        "\n".join(f"{k}: {v}" for k, v in gaps.items())


def test_removing_a_dependency_is_detected(tmp_path):
    """A stage without its digest key, a stage listing code files (the digest covers them) and
    a gate that misses a folder of code are reported; --write restores all three and keeps the
    data deps."""
    root = _copy_project(tmp_path)
    shutil.copy2(ROOT / "params.yaml", root / "params.yaml")
    doc = yaml.safe_load((root / "dvc.yaml").read_text())
    st = doc["stages"]["train_multilabel"]
    st["params"] = [p for p in st["params"] if not (isinstance(p, dict) and sd.LOSS_CODE in p)]
    st["deps"].append("src/contrastlab/training/multilabel.py")
    gate = doc["stages"][sd.GATE_STAGE]
    gate["deps"] = [d for d in gate["deps"] if d != "stages"]
    (root / "dvc.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    gaps = sd.missing(root)
    assert gaps["train_multilabel"] == [
        "src/contrastlab/training/multilabel.py listed (the digest code.train_multilabel covers "
        "the code)",
        "params data/loss_code.yaml: ['code.train_multilabel', 'variants.multilabel.${item.loss}']"]
    assert "stages/train_multilabel.py" in gaps[sd.GATE_STAGE] and len(gaps) == 2, gaps
    assert sd.main(["--root", str(root)]) == 1
    sd.write(root)
    assert sd.missing(root) == {}
    doc = yaml.safe_load((root / "dvc.yaml").read_text())
    st = doc["stages"]["train_multilabel"]
    assert "data/multilabel/${item.dataset}" in st["deps"]
    assert not [d for d in st["deps"] if d.startswith(("src/", "stages/"))]
    assert {sd.LOSS_CODE: ["code.train_multilabel", "variants.multilabel.${item.loss}"]} \
        in st["params"]
    assert doc["stages"][sd.GATE_STAGE]["deps"][:3] == [
        "src/contrastlab", "stages", "scripts/stage_deps.py"]


def test_a_stage_digest_moves_with_its_closure_only(tmp_path):
    """Editing a file changes the digest of exactly the stages whose closure holds it: the
    GCN module moves graph stages only, a loss file no stage's digest (its variants'
    loss_code keys follow it)."""
    root = _copy_project(tmp_path)
    shutil.copy2(ROOT / "params.yaml", root / "params.yaml")
    before = sd.code_digests(root)
    assert before == sd.code_digests(ROOT)  # a copy of the same code
    with open(root / "src/contrastlab/models/gcn.py", "a") as f:
        f.write("\n# an edit\n")
    moved = {k for k, v in sd.code_digests(root).items() if v != before[k]}
    assert moved == {k for k, (files, _) in sd.analyse(root).items()
                     if "src/contrastlab/models/gcn.py" in files and k != sd.GATE_STAGE}
    assert {"tune_graph", "train_graph", "baselines_graph"} <= moved
    assert not moved & {"train_code", "train_multilabel", "finetune_encoder"}
    before = sd.code_digests(root)
    with open(root / "src/contrastlab/losses/selfsup.py", "a") as f:
        f.write("\n# an edit\n")
    assert sd.code_digests(root) == before


def test_loss_code_reaches_stages_through_their_own_keys():
    """Loss files are in the params gate's closure only; besides its code digest, a per-variant
    stage depends on its variant's digest, a stage that may load any loss of a kind on that
    kind's digests, the report on all of them, and a stage that loads no loss on none."""
    info = sd.analyse(ROOT)
    sel = "src/contrastlab/losses/selfsup.py"
    assert {s for s, (files, _) in info.items() if sel in files} == {sd.GATE_STAGE}
    assert sd.REGISTRY_TABLE in info[sd.GATE_STAGE][0] and info[sd.GATE_STAGE][1] is False
    assert info["train_graph"][1] == ["code.train_graph", "variants.graph.${key}"]
    assert info["tune_code"][1] == ["code.tune_code", "variants.code.${key}"]
    assert info["tune_multilabel"][1] == ["code.tune_multilabel", "variants.multilabel.${item}"]
    assert info["train_multilabel"][1] == ["code.train_multilabel",
                                           "variants.multilabel.${item.loss}"]
    assert info["baselines_code"][1] == ["code.baselines_code", "needs.regression", "needs.targets"]
    assert info["report"][1] == ["code.report", "needs", "roles", "variants"]
    assert info["fetch_repos"][1] == ["code.fetch_repos"]


def test_params_schema_deps_follow_the_declared_sections():
    """A stage depends on the schema module of each params section it declares and on no
    other section's (the gate validates the whole file and depends on all of them), so
    editing the graph schema leaves every code and multi-label stage up to date."""
    info = sd.analyse(ROOT)
    stages = sd.load_stages(ROOT)
    schema = {f"src/contrastlab/params/{s}.py": s for s in sd.PARAMS_SECTIONS}
    assert set(schema) <= set(info[sd.GATE_STAGE][0])
    for name, (files, _) in info.items():
        if name == sd.GATE_STAGE:
            continue
        declared = sd.declared_sections(sd._body(stages[name]))
        used = {schema[f] for f in files if f in schema}
        if "src/contrastlab/params/__init__.py" in files:
            assert declared <= used, (name, declared, used)
    graph_schema = "src/contrastlab/params/graph.py"
    assert not {s for s, (files, _) in info.items() if graph_schema in files
                and not s.startswith(("train_graph", "tune_graph", "default_graph",
                                      "ablate_graph", "baselines_graph", "fetch_graph",
                                      "report", sd.GATE_STAGE))}
    assert graph_schema in info["train_graph"][0] and graph_schema not in info["train_code"][0]
    assert "src/contrastlab/params/code.py" not in info["train_multilabel"][0]
    # a section module that the stage's own code imports is still a dependency
    # (fine-tuning reuses training.multilabel, which imports params.multilabel)
    assert sd.declared_sections(sd._body(stages["finetune_cache"])) == {"finetune"}
    assert "src/contrastlab/params/multilabel.py" in info["finetune_cache"][0]


def _write(root: Path, rel: str, text: str) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(textwrap.dedent(text))


def test_closure_rules_on_a_synthetic_project(tmp_path):
    r = tmp_path
    _write(r, "src/contrastlab/__init__.py", "")
    _write(r, "src/contrastlab/a/__init__.py", "from .b import f\n")
    _write(r, "src/contrastlab/a/b.py", "from ..c import g\n")
    _write(r, "src/contrastlab/c.py", "def g():\n    from .d import h\n")
    _write(r, "src/contrastlab/d.py", "")
    _write(r, "src/contrastlab/unused.py", "")
    _write(r, "src/contrastlab/losses/__init__.py", "from .registry import get_loss\n")
    _write(r, "src/contrastlab/losses/registry.py", "")
    _write(r, "src/contrastlab/losses/registry.yaml", """
        x: {target: "contrastlab.losses.xmod:x_loss", needs: views, family: s, title: X}
        y: {target: "contrastlab.losses.ymod:y_loss", needs: labels, family: s, title: Y}
        """)
    _write(r, "src/contrastlab/losses/xmod.py", "")
    _write(r, "src/contrastlab/losses/ymod.py", "")
    _write(r, "src/contrastlab/train.py", """
        from .losses import get_loss
        LOSS_NEEDS = ("labels",)
        def run():
            return get_loss("y")
        """)
    _write(r, "src/contrastlab/bad.py", "from .losses import get_loss\nget_loss('x')\n")
    _write(r, "src/contrastlab/check.py", "from .losses import get_loss\nLOSS_NEEDS = '*'\n")
    _write(r, "src/contrastlab/show.py", "from .losses.registry import LOSSES\n")
    _write(r, "stages/helper.py", "import contrastlab.d\n")
    _write(r, "stages/one.py", "from contrastlab.a import b\nfrom helper import x\n")
    _write(r, "stages/two.py", "from contrastlab import train\n")
    _write(r, "stages/three.py", "import contrastlab.bad\n")
    an = sd.Analyzer(r)
    one = {p.as_posix() for p in an.closure([r / "stages/one.py"]).files}
    assert one == {"stages/one.py", "stages/helper.py", "src/contrastlab/__init__.py",
                   "src/contrastlab/a/__init__.py", "src/contrastlab/a/b.py",
                   "src/contrastlab/c.py", "src/contrastlab/d.py"}
    c2 = an.closure([r / "stages/two.py"])
    two = {p.as_posix() for p in c2.files}
    # loss modules reach a stage through data/loss_code.yaml (its needs), not as files ...
    assert c2.loss_needs == {"labels"} and not {"src/contrastlab/losses/ymod.py",
                                                "src/contrastlab/losses/xmod.py"} & two
    # ... except for the gate (LOSS_NEEDS = "*"): every loss file and the table
    _write(r, "stages/gate.py", "import contrastlab.check\n")
    gate = {p.as_posix() for p in an.closure([r / "stages/gate.py"]).files}
    assert {"src/contrastlab/losses/ymod.py", "src/contrastlab/losses/xmod.py",
            sd.REGISTRY_TABLE} <= gate
    _write(r, "stages/show.py", "import contrastlab.show\n")
    assert an.table_readers(an.closure([r / "stages/show.py"])) == {
        (r / "src/contrastlab/show.py").resolve()}
    with pytest.raises(sd.DepsError, match="LOSS_NEEDS"):
        an.closure([r / "stages/three.py"])
    # stages are found from their cmd, templated or not
    _write(r, "dvc.yaml", """
        stages:
          validate_params:
            cmd: python stages/gate.py
            deps: [src/contrastlab]
            outs: [data/ok.json]
          s1:
            cmd: python -m torch.distributed.run --nproc_per_node=${n} stages/one.py --v ${key}
            deps: [data/ok.json, stages/one.py, stages/helper.py, src/contrastlab]
            params: [{data/loss_code.yaml: [code.s1]}]
          s2:
            foreach: [a, b]
            do:
              cmd: python stages/two.py
              deps: [stages/two.py, data/x]
        """)
    gaps = sd.missing(r)
    assert set(gaps) == {"validate_params", "s1", "s2"}
    assert gaps["validate_params"] == ["stages/gate.py", "stages/helper.py", "stages/one.py",
                                       "stages/two.py"]
    assert [g.split(" ")[0] for g in gaps["s1"]] == ["stages/one.py", "stages/helper.py",
                                                     "src/contrastlab"]
    assert gaps["s2"] == ["data/ok.json", "stages/two.py listed (the digest code.s2 covers the code)",
                          "params data/loss_code.yaml: ['code.s2', 'needs.labels']"]
    sd.write(r)
    assert sd.missing(r) == {}
    doc = yaml.safe_load((r / "dvc.yaml").read_text())["stages"]
    assert doc["s2"]["do"]["deps"] == ["data/ok.json", "data/x"]
    assert doc["s2"]["do"]["params"] == [{sd.LOSS_CODE: ["code.s2", "needs.labels"]}]
    assert doc["validate_params"]["deps"] == ["src/contrastlab", "stages"]
    # the digests: one per stage but the gate; a helper module moves its importer's only
    d = sd.code_digests(r)
    assert set(d) == {"s1", "s2"} and d["s1"] != d["s2"]
    _write(r, "stages/helper.py", "import contrastlab.d  # edited\n")
    d2 = sd.code_digests(r)
    assert d2["s1"] != d["s1"] and d2["s2"] == d["s2"]


def test_lazy_package_attributes_count_only_when_used(tmp_path):
    """Imports inside a package ``__init__``'s ``__getattr__`` count for a file importing a
    name the package does not define, not for every importer of the package."""
    r = tmp_path
    _write(r, "src/contrastlab/__init__.py", "")
    _write(r, "src/contrastlab/p/__init__.py", """
        from .reg import get
        def __getattr__(name):
            from . import heavy
            return getattr(heavy, name)
        """)
    _write(r, "src/contrastlab/p/reg.py", "")
    _write(r, "src/contrastlab/p/heavy.py", "")
    _write(r, "stages/a.py", "from contrastlab.p import get\n")
    _write(r, "stages/b.py", "from contrastlab.p import big_thing\n")
    an = sd.Analyzer(r)
    a = {p.as_posix() for p in an.closure([r / "stages/a.py"]).files}
    b = {p.as_posix() for p in an.closure([r / "stages/b.py"]).files}
    assert "src/contrastlab/p/heavy.py" not in a and "src/contrastlab/p/reg.py" in a
    assert "src/contrastlab/p/heavy.py" in b


def test_every_stage_depends_on_the_params_gate():
    stages = sd.load_stages(ROOT)
    gate = sd.gate(stages)
    assert gate == "data/params_ok.json"
    for name, st in stages.items():
        if name != sd.GATE_STAGE:
            assert sd.covered(gate, sd._dep_paths(sd._body(st))), name


def test_per_variant_plots_and_artifacts_are_generated(tmp_path):
    """dvc.yaml's per-variant plots and code artifacts follow params.yaml: a new variant is
    reported as missing by the check and added by --write; other plots are kept."""
    root = _copy_project(tmp_path)
    assert sd.stale_generated(ROOT) == []
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    raw["graph"]["variants"]["dcl"] = {"loss": "ntxent"}
    raw["code"]["variants"]["cos_scratch"] = {"loss": "cosine"}
    raw["multilabel"]["losses"].remove("dis_only")
    (root / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    doc = yaml.safe_load((root / "dvc.yaml").read_text())
    doc["plots"].append({"mine": {"y": {"x.csv": "a"}}})
    (root / "dvc.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    stale = sd.stale_generated(root)
    assert {"plots: graph_loss", "plots: tune_graph", "plots: code_rank_at_k",
            "plots: multilabel_yeast_val_map", "artifacts: code-cos-scratch"} <= set(stale)
    sd.write(root)
    assert sd.stale_generated(root) == []
    doc = yaml.safe_load((root / "dvc.yaml").read_text())
    plots = {next(iter(p)): next(iter(p.values())) for p in doc["plots"]}
    assert plots["graph_loss"]["y"]["reports/plots/graph/dcl.csv"] == "loss"
    assert "reports/plots/multilabel/yeast_dis_only.csv" not in plots["multilabel_yeast_val_map"]["y"]
    assert plots["mine"] == {"y": {"x.csv": "a"}}
    art = doc["artifacts"]["code-cos-scratch"]
    assert art["path"] == "data/code/models/cos_scratch" and art["labels"] == ["code", "cosine"]
    assert "from scratch" in art["desc"]


def test_data_a_module_reads_is_a_dependency(tmp_path):
    """``DATA_DEPS`` (the report's Jinja2 templates) joins the closure of every importer;
    naming a path that does not exist is an error."""
    r = tmp_path
    _write(r, "src/contrastlab/__init__.py", "")
    _write(r, "src/contrastlab/rep.py", "DATA_DEPS = ('templates',)\n")
    _write(r, "src/contrastlab/templates/page.j2", "{{ x }}\n")
    _write(r, "stages/s.py", "import contrastlab.rep\n")
    files = {p.as_posix() for p in sd.Analyzer(r).closure([r / "stages/s.py"]).files}
    assert "src/contrastlab/templates" in files
    _write(r, "src/contrastlab/rep.py", "DATA_DEPS = ('gone',)\n")
    with pytest.raises(sd.DepsError, match="gone"):
        sd.Analyzer(r).closure([r / "stages/s.py"])
    assert "src/contrastlab/reporting/templates" in sd.required(ROOT)["report"]


def test_the_hybrid_stage_names_the_role_hybrid_base_as_a_literal(tmp_path):
    """DVC reads params.yaml only, so the hybrid stage's deps and params name the role
    ``multilabel.hybrid_base`` of the variant table (then the hybrids' ``model_of``) as
    literals, written by --write: the check reports a literal that differs from the table
    (the table's role changed, or dvc.yaml edited by hand), and --write restores it."""
    root = _copy_project(tmp_path)
    shutil.copy2(ROOT / "params.yaml", root / "params.yaml")
    st = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]["train_multilabel_hybrid"]
    base = sd.hybrid_inputs(ROOT)[0]
    assert f"reports/tuned/multilabel/{base}.json" in st["deps"]
    assert f"multilabel.variants.{base}" in st["params"]
    assert {sd.LOSS_CODE: ["code.train_multilabel_hybrid", "variants.multilabel.${item.loss}",
                           "roles.multilabel.hybrid_base"]} in st["params"]
    assert not [x for x in st["deps"] + st["params"] if "hybrid_base}" in str(x)]
    # the role changes in the variant table: dvc.yaml is stale until --write
    table = root / sd.VARIANT_TABLE
    text = table.read_text()
    assert text.count(f"    hybrid_base: {base} ") == 1
    table.write_text(text.replace(f"    hybrid_base: {base} ", "    hybrid_base: simdis "))
    stale = [s for s in sd.stale_generated(root) if s.startswith("stages: train_multilabel_hybrid")]
    assert len(stale) == 1 and "reports/tuned/multilabel/simdis.json" in stale[0], stale
    sd.write(root)
    assert sd.stale_generated(root) == []
    st = yaml.safe_load((root / "dvc.yaml").read_text())["stages"]["train_multilabel_hybrid"]
    assert [d for d in st["deps"] if d.startswith("reports/tuned/")] == [
        "reports/tuned/multilabel/simdis.json", "reports/tuned/multilabel/extratrees.json",
        "reports/tuned/multilabel/bce.json"]
    assert "multilabel.variants.simdis" in st["params"] and f"multilabel.variants.{base}" not in st["params"]
    # --write kept the hand-declared role key
    assert {sd.LOSS_CODE: ["code.train_multilabel_hybrid", "variants.multilabel.${item.loss}",
                           "roles.multilabel.hybrid_base"]} in st["params"]
    # a hand edit of the literal is reported too
    doc = yaml.safe_load((root / "dvc.yaml").read_text())
    deps = doc["stages"]["train_multilabel_hybrid"]["deps"]
    deps[deps.index("reports/tuned/multilabel/simdis.json")] = "reports/tuned/multilabel/any.json"
    (root / "dvc.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    stale = sd.stale_generated(root)
    assert len(stale) == 1 and "lacks ['reports/tuned/multilabel/simdis.json']" in stale[0] \
        and "has ['reports/tuned/multilabel/any.json']" in stale[0], stale


def test_role_keys_of_loss_code_are_kept_and_checked(tmp_path):
    """A stage that reads a role depends on its ``roles.<track>.<role>`` key of
    data/loss_code.yaml (declared by hand): --write keeps it, and the check reports a key that
    names no role of the variant table."""
    stages = sd.load_stages(ROOT)

    def role_keys(name):
        return sd._split_by_hand(sd._loss_param(sd._body(stages[name])))[1]
    assert role_keys("train_multilabel_hybrid") == ["roles.multilabel.hybrid_base"]
    # the index stage trains the row the role names: every fine-tuning row's key, by hand
    assert role_keys("finetune_index") == ["roles.finetune.index_variant", "variants.finetune"]
    assert role_keys("finetune_encoder") == role_keys("finetune_evaluate") == []
    assert role_keys("finetune_baseline") == role_keys("tune_finetune_baseline") == [
        "roles.finetune.head_loss"]
    assert role_keys("train_multilabel") == []  # its rows read no role
    assert set(role_keys("finetune_index")) <= sd.known_by_hand(ROOT)
    root = _copy_project(tmp_path)
    shutil.copy2(ROOT / "params.yaml", root / "params.yaml")
    doc = yaml.safe_load((root / "dvc.yaml").read_text())
    entry = next(p for p in doc["stages"]["finetune_index"]["params"]
                 if isinstance(p, dict) and sd.LOSS_CODE in p)
    entry[sd.LOSS_CODE] = ["code.finetune_index", "needs.multilabels",
                           "roles.finetune.index_varaint", "variants.finetunes"]
    (root / "dvc.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    assert sd.missing(root) == {"finetune_index": [
        f"params {sd.LOSS_CODE}: {k} (no such role or track in {sd.VARIANT_TABLE})"
        for k in ("roles.finetune.index_varaint", "variants.finetunes")]}

