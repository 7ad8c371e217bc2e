"""Supervised GCN / GAT references (Kipf & Welling 2017; Velickovic et al. 2018) and the
paired tests of the graph report (default vs tuned, loss vs reference)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from contrastlab.errors import InputError
from contrastlab.params import ParamsError, load_params
from contrastlab.training.graph_supervised import (FineTunedEncoder, SupervisedGNN, _dropout,
                                                   build_model, supervised_config,
                                                   train_supervised)

ROOT = Path(__file__).resolve().parents[2]


def _toy_graph(n_per: int = 20, seed: int = 0):
    """Two communities with class-informative sparse features; 10 train, 10 val, rest test."""
    from torch_geometric.data import Data

    g = torch.Generator().manual_seed(seed)
    n = 2 * n_per
    y = torch.arange(n) // n_per
    x = (torch.rand(n, 30, generator=g) < 0.1).float()
    x[torch.arange(n), 10 * y + torch.randint(0, 10, (n,), generator=g)] = 1.0
    src, dst = [], []
    for i in range(n):
        for j in range(i + 1, n):
            p = 0.3 if y[i] == y[j] else 0.02
            if torch.rand(1, generator=g).item() < p:
                src += [i, j]
                dst += [j, i]
    perm = torch.randperm(n, generator=g)
    masks = [torch.zeros(n, dtype=torch.bool) for _ in range(3)]
    masks[0][perm[:10]] = True
    masks[1][perm[10:20]] = True
    masks[2][perm[20:]] = True
    return Data(x=x, edge_index=torch.tensor([src, dst]), y=y, train_mask=masks[0],
                val_mask=masks[1], test_mask=masks[2])


_GCN = {"arch": "gcn", "hidden": 8, "heads": 1, "out_heads": 1, "dropout": 0.5, "lr": 0.05,
        "weight_decay": 5e-4, "weight_decay_layers": "first", "epochs": 30}
_GAT = {**_GCN, "arch": "gat", "heads": 2, "weight_decay_layers": "every"}


@pytest.mark.parametrize("cfg", [_GCN, _GAT])
def test_model_shapes_and_unknown_arch(cfg):
    data = _toy_graph()
    m = SupervisedGNN(cfg["arch"], 30, 2, hidden=4, heads=cfg["heads"])
    out = m(data.x.to_sparse_coo().coalesce(), data.edge_index)
    assert out.shape == (40, 2) and out.dtype == torch.float32
    with pytest.raises(InputError, match="unknown supervised architecture"):
        SupervisedGNN("mlp", 30, 2, hidden=4)


def test_sparse_dropout_keeps_zeros_scales_survivors_and_is_identity_in_eval():
    torch.manual_seed(0)
    x = torch.tensor([[0.0, 2.0, 0.0], [4.0, 0.0, 6.0]]).to_sparse_coo().coalesce()
    assert _dropout(x, 0.5, False) is x and _dropout(x, 0.0, True) is x
    out = _dropout(x, 0.5, True).to_dense()
    dense = x.to_dense()
    assert torch.all(out[dense == 0] == 0)  # zeros stay zero
    kept = out[dense != 0]
    assert torch.all((kept == 0) | torch.isclose(kept, 2 * dense[dense != 0]))
    # the keep rate over many draws is 1 - p (binomial, 6 sigma)
    big = torch.ones(200, 50).to_sparse_coo().coalesce()
    rate = float((_dropout(big, 0.3, True).to_dense() > 0).float().mean())
    assert abs(rate - 0.7) < 6 * np.sqrt(0.21 / 10_000)


@pytest.mark.parametrize("cfg", [_GCN, _GAT])
def test_training_is_deterministic_and_test_is_read_at_the_chosen_epoch(cfg):
    data = _toy_graph()
    torch.set_num_threads(1)
    r = train_supervised(data, cfg, 3, return_pred=True)
    again = train_supervised(data, cfg, 3, return_pred=True)
    assert np.array_equal(again.pop("test_pred"), r["test_pred"])
    assert again == {k: v for k, v in r.items() if k != "test_pred"}
    assert 1 <= r["epoch"] <= cfg["epochs"]
    # evaluation draws no random numbers, so the run cut at the chosen epoch is the same model
    # at that epoch: its best is that epoch, with the same validation and test accuracy
    cut = train_supervised(data, {**cfg, "epochs": r["epoch"]}, 3, return_pred=True)
    assert cut["epoch"] == r["epoch"] and cut["val_acc"] == r["val_acc"]
    assert cut["test_acc"] == r["test_acc"] and np.array_equal(cut["test_pred"], r["test_pred"])
    # the test accuracy is the share of correct predicted classes on the test nodes
    y = data.y[data.test_mask].numpy()
    assert r["test_acc"] == pytest.approx(float(np.mean(r["test_pred"] == y)))
    # the choice minimises the validation cross-entropy over epochs: no shorter run's is lower
    for e in (1, max(1, r["epoch"] // 2), cfg["epochs"]):
        assert train_supervised(data, {**cfg, "epochs": e}, 3)["val_loss"] >= r["val_loss"] - 1e-12
    assert r["test_acc"] > 0.6  # two separable communities (chance 0.5)


def test_the_supervised_epoch_pick_is_the_kept_epoch_with_its_margin():
    """The kept epoch has the lowest mean validation cross-entropy; its margin is the fewest
    validation nodes whose removal lets another epoch's mean reach it (recomputed here by
    brute force against the runner-up, from the per-node losses of a run cut at each epoch)."""
    import torch.nn.functional as F

    from contrastlab.evaluation.picks import FRAGILE_SHARE
    from contrastlab.training.graph_supervised import build_model

    data = _toy_graph()
    torch.set_num_threads(1)
    r = train_supervised(data, _GCN, 3)
    p = r["pick"]
    assert p["chosen"] == r["epoch"] and p["n_val"] == int(data.val_mask.sum())
    assert p["criterion"].startswith("validation cross-entropy")
    assert 0 <= p["margin"] <= p["n_val"] and p["fragile"] == (p["margin"] < FRAGILE_SHARE * p["n_val"])
    ru = p["runner_up"]
    assert ru is not None and ru != r["epoch"]

    def per_node(epochs):  # validation cross-entropy per node after ``epochs`` epochs
        from contrastlab.training.graph_supervised import _features

        x = _features(data, None)
        torch.manual_seed(3)
        m = build_model(_GCN, x.shape[1], int(data.y.max()) + 1, None)
        opt = torch.optim.Adam([{"params": list(m.conv1.parameters()), "weight_decay": _GCN["weight_decay"]},
                                {"params": list(m.conv2.parameters()), "weight_decay": 0.0}],
                               lr=_GCN["lr"]) if _GCN.get("weight_decay_layers") == "first" else \
            torch.optim.Adam(m.parameters(), lr=_GCN["lr"], weight_decay=_GCN["weight_decay"])
        for _ in range(epochs):
            m.train()
            opt.zero_grad(set_to_none=True)
            F.cross_entropy(m(x, data.edge_index)[data.train_mask], data.y[data.train_mask]).backward()
            opt.step()
        m.eval()
        with torch.no_grad():
            out = m(x, data.edge_index)
        return F.cross_entropy(out[data.val_mask], data.y[data.val_mask], reduction="none").double().numpy()

    a, b = per_node(r["epoch"]), per_node(ru)
    assert a.mean() == pytest.approx(r["val_loss"], abs=1e-6)  # the replay is the run
    # removing the nodes on which the pick leads most, one by one, lets the runner-up's mean
    # loss over the remaining nodes reach the pick's after exactly ``margin`` removals
    lead = np.sort(b - a)[::-1]                   # the pick's lead per node, largest first
    k = next(j for j in range(1, len(lead) + 1) if lead[j:].sum() <= 1e-9)
    assert p["margin"] == k and 0 < k < len(lead)


def test_bad_weight_decay_layers_and_nan_loss():
    data = _toy_graph()
    with pytest.raises(InputError, match="weight_decay_layers"):
        train_supervised(data, {**_GCN, "weight_decay_layers": "last"}, 0)
    with pytest.raises(FloatingPointError, match="epoch"):
        train_supervised(data, {**_GCN, "lr": float("inf")}, 0)


_FT = {"arch": "pretrained", "pretrain": "mixco", "dropout": 0.0, "lr": 0.0, "weight_decay": 0.0,
       "weight_decay_layers": "every", "epochs": 2}


def _encoder(seed: int = 0):
    from contrastlab.models.gcn import GCNEncoder

    torch.manual_seed(seed)
    return GCNEncoder(30, 8, 6, "prelu")


def test_fine_tuning_starts_from_the_pretrained_encoder_and_leaves_it_unchanged():
    data = _toy_graph()
    torch.set_num_threads(1)
    enc = _encoder()
    before = {k: v.clone() for k, v in enc.state_dict().items()}
    x = data.x.to_sparse_coo().coalesce()
    # lr 0, no dropout: the chosen predictions are those of the pre-trained encoder with the
    # seed's freshly drawn head (an encoder drawn anew would predict otherwise)
    r = train_supervised(data, _FT, 5, return_pred=True, encoder=enc)
    torch.manual_seed(5)
    m = FineTunedEncoder(enc, 2, dropout=0.0).eval()
    with torch.no_grad():
        out = m(x, data.edge_index)
    expect = out.argmax(1)[data.test_mask].numpy()
    val_loss = float(torch.nn.functional.cross_entropy(out[data.val_mask], data.y[data.val_mask]))
    assert np.array_equal(r["test_pred"], expect) and r["epoch"] == 1
    assert r["val_loss"] == pytest.approx(val_loss, rel=1e-6)
    other = train_supervised(data, _FT, 5, return_pred=True, encoder=_encoder(1))
    assert other["val_loss"] != pytest.approx(val_loss, rel=1e-3)
    # training changes the copy, never the caller's encoder
    trained = train_supervised(data, {**_FT, "lr": 0.05, "epochs": 30, "dropout": 0.3}, 5,
                               encoder=enc)
    assert all(torch.equal(before[k], v) for k, v in enc.state_dict().items())
    assert trained["test_acc"] > 0.6  # it learns the two communities
    assert torch.equal(m.encoder.conv1.lin.weight, enc.conv1.lin.weight)
    assert m.encoder.conv1.lin.weight is not enc.conv1.lin.weight
    with pytest.raises(InputError, match="pre-trained encoder"):
        build_model(_FT, 30, 2)
    with pytest.raises(InputError, match="sizes"):
        FineTunedEncoder(enc, 0)


def test_the_pretrained_encoder_is_the_variants_final_run_encoder():
    """Seed s fine-tunes exactly the encoder whose embeddings the variant's final run with
    seed s probes (fit_and_probe), pre-trained with the variant's tuned choices."""
    from contrastlab.data.cora import prepare_cora
    from contrastlab.data.planetoid import load_planetoid
    from contrastlab.models.graph_features import embed
    from contrastlab.training.graph import fit_and_probe, graph_run_config
    from contrastlab.training.graph_finetune import pretrained_encoder
    from contrastlab.tuning import read_tuned
    import tempfile

    g = load_params(ROOT / "params.yaml").graph
    g = g.model_copy(update={"train": g.train.model_copy(update={"epochs": 2})})
    ft = next(iter(g.finetune))
    cfg = supervised_config(g, ft)
    with tempfile.TemporaryDirectory() as d:
        prepare_cora(ROOT / "data" / "vendor" / "planetoid" / "Cora", Path(d) / "p")
        data, _ = load_planetoid(str(Path(d) / "p"), g.dataset)
    torch.set_num_threads(1)
    tuned = ROOT / "reports" / "tuned" / "graph"
    cache: dict = {}
    enc = pretrained_encoder(g, cfg, data, 3, str(tuned), cache)
    assert cache[3] is enc and pretrained_encoder(g, cfg, data, 3, str(tuned), cache) is enc
    run = graph_run_config(g, cfg["pretrain"]).with_choices(read_tuned(tuned / f"{cfg['pretrain']}.json"))
    final = fit_and_probe(data, run, 3, g.probe)
    assert np.array_equal(embed(enc, data), final["embeddings"])
    with pytest.raises(InputError, match="ssl-tuned"):
        pretrained_encoder(g, cfg, data, 4, None)


def test_params_declare_the_references_and_refuse_bad_searches(tmp_path):
    g = load_params(ROOT / "params.yaml").graph
    archs = {v.arch for v in g.supervised.values()}
    assert archs == {"gcn", "gat"}
    assert g.finetune and all(v.arch == "pretrained" and v.pretrain in g.variants
                              for v in g.finetune.values())
    for name, v in {**g.supervised, **g.finetune}.items():
        assert v.search and set(v.search) <= {"hidden", "heads", "dropout", "lr", "weight_decay"}
        cfg = supervised_config(g, name, {"lr": 0.02})
        assert cfg["lr"] == 0.02 and "search" not in cfg
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    gcn = next(n for n, v in g.supervised.items() if v.arch == "gcn")
    for bad, match in (({"search": {"heads": {"type": "categorical", "choices": [2, 4]}}},
                        "no attention heads"),
                       ({"search": {"epochs": {"type": "int", "low": 1, "high": 9}}},
                        "cannot be tuned"),
                       ({"dropout": 1.0}, "dropout"), ({"arch": "mlp"}, "arch")):
        r = json.loads(json.dumps(raw))
        r["graph"]["supervised"][gcn].update(bad)
        f = tmp_path / "p.yaml"
        f.write_text(yaml.safe_dump(r))
        with pytest.raises(ParamsError, match=match):
            load_params(f)
    ft = next(iter(g.finetune))
    for sec, who, bad, match in (
            ("supervised", gcn, {"pretrain": next(iter(g.variants))}, "only of it"),
            ("supervised", gcn, {"arch": "pretrained", "pretrain": next(iter(g.variants)),
                                 "search": {}}, "belongs under graph.finetune"),
            ("finetune", ft, {"arch": "gcn", "pretrain": None}, "arch must be pretrained"),
            ("finetune", ft, {"pretrain": None}, "only of it"),
            ("finetune", ft, {"pretrain": "no_such_variant"}, "not a graph variant"),
            ("finetune", ft, {"search": {"hidden": {"type": "categorical", "choices": [8]}}},
             "not searched")):
        r = json.loads(json.dumps(raw))
        r["graph"][sec][who].update(bad)
        f.write_text(yaml.safe_dump(r))
        with pytest.raises(ParamsError, match=match):
            load_params(f)
    r = json.loads(json.dumps(raw))
    r["graph"]["supervised"] = {next(iter(g.variants)): r["graph"]["supervised"][gcn]}
    f.write_text(yaml.safe_dump(r))
    with pytest.raises(ParamsError, match="both a variant and a supervised"):
        load_params(f)


# ------------------------------------------------------------------ report: paired tests
def _pred_csv(path: Path, y: np.ndarray, correct: np.ndarray, seeds) -> None:
    """A predictions file whose seed_k column is right where ``correct[k]`` is 1."""
    path.parent.mkdir(parents=True, exist_ok=True)
    cols = {f"seed_{s}": np.where(c > 0, y, (y + 1) % 7) for s, c in zip(seeds, correct)}
    pd.DataFrame({"node": np.arange(len(y)), "y": y, **cols}).to_csv(path, index=False)


def test_paired_tests_against_a_per_seed_reference(tmp_path):
    from contrastlab.reporting.graph import default_vs_tuned
    from contrastlab.reporting.graph_stats import _paired_tests

    rng = np.random.default_rng(0)
    y = rng.integers(0, 7, 300)
    base = (rng.random((4, 300)) < 0.7).astype(float)
    better = np.maximum(base, (rng.random((4, 300)) < 0.5))  # strictly more correct nodes
    out = _paired_tests({"same": (base, base), "better": (better, base)}, n_resamples=2000)
    assert out["same"]["delta"] == 0 and out["same"]["p"] == 1.0
    assert out["better"]["delta"] == pytest.approx(better.mean() - base.mean())
    assert out["better"]["p"] == pytest.approx(2 / 2001)  # every draw is above zero: the floor
    assert out["better"]["p_holm"] == pytest.approx(min(1.0, 2 * out["better"]["p"]))
    # default vs tuned pairs the seeds both ran (default 0-2, tuned 0-4): 3 seeds
    data = tmp_path / "reports" / "data" / "graph"
    tuned = np.vstack([better[:3], base[:2]])
    _pred_csv(data / "x_test_pred.csv", y, tuned, range(5))
    _pred_csv(data / "default" / "x_test_pred.csv", y, base[:3], range(3))
    t = default_vs_tuned(tmp_path, ["x", "missing"])
    assert set(t) == {"x"} and t["x"]["n_seeds"] == 3
    assert t["x"]["delta"] == pytest.approx(better[:3].mean() - base[:3].mean())


def test_fine_tuning_rows_are_told_apart_by_the_name_table_and_paired_with_the_references(tmp_path):
    """The name table's method says which graph.supervised entries are references and which
    fine-tune a contrastive encoder; each fine-tuning row is paired with every reference on
    the common seeds (its own Holm family) and the sentence says above / below / level."""
    from contrastlab.losses.registry import track_variants
    from contrastlab.reporting.graph import loss_vs_supervised, supervised_rows
    from contrastlab.reporting.graph_text import _finetune_sentence

    p = load_params(ROOT / "params.yaml")
    table = track_variants("graph")
    rows = [*p.graph.supervised, *p.graph.finetune]
    refs_n = [n for n in rows if table[n].method == "supervised"]
    ft_n = [n for n in rows if table[n].method == "finetune"]
    assert refs_n and ft_n and table[ft_n[0]].kind == "hybrid"
    rng = np.random.default_rng(1)
    y = rng.integers(0, 7, 300)
    base = (rng.random((3, 300)) < 0.7).astype(float)
    better = np.maximum(base, rng.random((3, 300)) < 0.5)
    m = tmp_path / "reports" / "metrics" / "graph" / "supervised"
    m.mkdir(parents=True)
    for n, c in ((refs_n[0], base), (ft_n[0], better)):
        (m / f"{n}.json").write_text(json.dumps({"logreg_acc_mean": float(c.mean()), "logreg_acc_ci_low": 0.0,
                                                 "logreg_acc_ci_high": 1.0, "n_seeds": 3}))
        _pred_csv(tmp_path / "reports" / "data" / "graph" / "supervised" / f"{n}_test_pred.csv", y, c, range(3))
    refs, fts = supervised_rows(tmp_path, p), supervised_rows(tmp_path, p, method="finetune")
    assert list(refs) == [refs_n[0]] and list(fts) == [ft_n[0]]
    t = loss_vs_supervised(tmp_path, list(fts), list(refs), sub="supervised")
    assert set(t) == {(ft_n[0], refs_n[0])}
    assert t[(ft_n[0], refs_n[0])]["delta"] == pytest.approx(better.mean() - base.mean())
    assert loss_vs_supervised(tmp_path, list(fts), list(refs)) == {}  # not a probe row's file
    txt = _finetune_sentence(fts, refs, t, 3)
    assert "significantly above" in txt and f"{better.mean():.3f}" in txt
    level = {k: {**v, "p_holm": 0.5} for k, v in t.items()}
    assert "not significantly different" in _finetune_sentence(fts, refs, level, 3)
    assert _finetune_sentence(fts, refs, {}, 3) == ""


def test_headline_sentences_say_helped_or_not():
    from contrastlab.reporting.graph_text import _tuning_sentence

    ns = {"a": {"delta": 0.01, "p": 0.2, "p_holm": 0.4, "n_seeds": 10}}
    assert "Tuning did not help" in _tuning_sentence(ns, 3) and "10 seeds" in _tuning_sentence(ns, 3)
    sig = {"a": {"delta": 0.02, "p": 0.001, "p_holm": 0.002, "n_seeds": 10},
           "b": {"delta": -0.02, "p": 0.001, "p_holm": 0.002, "n_seeds": 10}}
    s = _tuning_sentence(sig, 3)
    assert "Tuning helped" in s and "significantly worse after tuning" in s
    assert _tuning_sentence({}, 3) == ""


# ------------------------------------------------------------------ stages on real Cora
def _stage(name):
    from _stagerun import stage_main

    return stage_main(ROOT / "stages" / f"{name}.py")


def test_supervised_stages_on_real_cora(tmp_path):
    """tune (trial 0 = the declared setting) -> final runs on the final seeds, every
    reference and each fine-tuning row (pre-trained with the committed tuned choices), with a
    tiny budget; a fine-tuning row's metrics record its pre-training choices."""
    from contrastlab.data.cora import prepare_cora

    cora = tmp_path / "planetoid"
    prepare_cora(ROOT / "data" / "vendor" / "planetoid" / "Cora", cora)
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    g = raw["graph"]
    g["tune"].update(trials=2, startup_trials=1, seeds=[100], max_resource=1)
    g["final"]["seeds"] = [0, 1]
    for v in [*g["supervised"].values(), *g["finetune"].values()]:
        v["epochs"] = 3
    g["train"]["epochs"] = 2  # the fine-tuning row's pre-training
    ssl = ["--ssl-tuned", str(ROOT / "reports" / "tuned" / "graph")]
    stages = {n: ("supervised", []) for n in g["supervised"]}
    stages.update({n: ("finetune", ssl) for n in g["finetune"]})
    p = tmp_path / "params.yaml"
    p.write_text(yaml.safe_dump(raw))
    out = tmp_path / "o"
    for name, v in [*g["supervised"].items(), *g["finetune"].items()]:
        kind, extra = stages[name]
        assert _stage(f"tune_graph_{kind}")([
            "--name", name, "--params", str(p), "--data", str(cora), "--study-dir",
            str(out / "tune"), "--tuned", str(out / "tuned"), "--plots", str(out / "tp"), *extra]) == 0
        chosen = json.loads((out / "tuned" / f"{name}.json").read_text())
        assert chosen["budget_trials"] == 2 and set(chosen["params"]) == set(v["search"])
        hist = pd.read_csv(out / "tp" / f"{name}.csv")
        assert len(hist) == 2 and (out / "tune" / name / "journal.log").exists()
        assert _stage(f"train_graph_{kind}")([
            "--name", name, "--params", str(p), "--data", str(cora), "--tuned",
            str(out / "tuned"), "--metrics", str(out / "m"), "--report-data", str(out / "d"), *extra]) == 0
        m = json.loads((out / "m" / f"{name}.json").read_text())
        assert m["n_seeds"] == 2 and m["arch"] == v["arch"] and m["epochs"] == 3
        assert m["logreg_acc_ci_low"] <= m["logreg_acc_mean"] <= m["logreg_acc_ci_high"]
        assert all(1 <= e <= 3 for e in m["chosen_epoch"])
        for k, val in chosen["params"].items():
            assert m["config"][k] == pytest.approx(val)
        pred = pd.read_csv(out / "d" / f"{name}_test_pred.csv")
        assert list(pred.columns) == ["node", "y", "seed_0", "seed_1"] and len(pred) == 1000
        acc = [float((pred[f"seed_{s}"] == pred["y"]).mean()) for s in (0, 1)]
        assert m["logreg_acc_mean"] == pytest.approx(np.mean(acc), abs=1e-6)
        assert "time" not in json.dumps(m)
        assert ("pretrain_choices" in m) == (kind == "finetune")
