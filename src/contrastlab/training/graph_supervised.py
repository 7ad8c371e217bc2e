"""Supervised reference rows of the graph track: GCN (Kipf & Welling, ICLR 2017) and GAT
(Velickovic et al., ICLR 2018) trained end to end on the public split's 140 training labels,
the labels the linear probe of the self-supervised encoders sees (issue 37).

Protocol as ``tune_graph`` (:mod:`contrastlab.training.graph_tune`): one Optuna study per
reference with ``graph.tune``'s budget, sampler, pruner and tuning seeds; trial 0 is the
declared configuration; objective: validation accuracy (500 nodes) at the chosen epoch, mean
over seeds. The choice is trained on ``graph.final.seeds`` and tested once on the 1000 test
nodes (:func:`run_supervised_final`).

Training (both papers, Sec. 5.2 / 3.3): row-normalised features, full-batch Adam on the
training nodes' cross-entropy, dropout on each layer's input (GAT: also on the attention);
weight decay on the first layer (``first``) or every layer (``every``). The epoch with the
lowest validation cross-entropy is kept (ties: the earlier epoch): the papers' early-stopping
criterion (validation loss), without their stopping, over the whole run. Unlike validation
accuracy, a count of nodes, the mean cross-entropy moves with every node's probability, and
the pick records how many validation nodes decide it (a jackknife removal count,
:func:`contrastlab.evaluation.probe.mean_loss_pick`). Fine-tuning rows (``arch: pretrained``) use an
``encoder_for`` hook (:mod:`contrastlab.training.graph_finetune`; :class:`FineTunedEncoder`).
"""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import torch
from torch import nn
from torch.nn import functional as F

from ..data.planetoid import load_planetoid
from ..errors import InputError, UnknownNameError
from ..evaluation.picks import seed_summary
from ..evaluation.probe import mean_loss_pick, row_normalize
from ..evaluation.stats import accuracy_summary
from ..io import write_csv, write_json
from ..tracking import stage_run
from ..tuning import (apply_choices, read_tuned, run_study, seed_mean, study_history, tune_kwargs,
                      write_tuned)

__all__ = ["SupervisedGNN", "FineTunedEncoder", "build_model", "train_supervised",
           "run_supervised_tuning", "supervised_config", "run_supervised_final", "ARCHS"]

#: Architectures a ``graph.supervised`` entry may name (its ``arch`` field) besides
#: ``pretrained`` (:class:`FineTunedEncoder`, built from a pre-trained encoder).
ARCHS = ("gcn", "gat")  # not a row name: architectures, named by params.yaml's arch


class SupervisedGNN(nn.Module):
    """Two message-passing layers ``in -> hidden x heads -> classes``.

    ``arch="gcn"``: ``GCNConv -> ReLU -> dropout -> GCNConv`` (Kipf & Welling 2017, Eq. 9).
    ``arch="gat"``: ``GATConv`` with ``heads`` heads of ``hidden`` features concatenated ->
    ELU -> dropout -> ``GATConv`` with ``out_heads`` heads averaged (Velickovic et al. 2018,
    Eq. 5-6; attention dropout ``dropout`` on both layers).
    ``forward(x [N, F] float, edge_index [2, E] long) -> logits [N, classes]``.

    Raises:
        InputError: an unknown ``arch`` or a size below 1.
    """

    def __init__(self, arch: str, in_dim: int, n_classes: int, *, hidden: int, heads: int = 1,
                 out_heads: int = 1, dropout: float = 0.5):
        super().__init__()
        from torch_geometric.nn import GATConv, GCNConv

        if arch not in ARCHS:
            raise InputError(f"unknown supervised architecture {arch!r}; use {', '.join(ARCHS)}")
        if min(in_dim, n_classes, hidden, heads, out_heads) < 1:
            raise InputError("supervised GNN sizes must be >= 1")
        self.arch, self.dropout = arch, float(dropout)
        if arch == "gcn":  # not a row name; one fixed graph (transductive): the normalisation is cached
            self.conv1 = GCNConv(in_dim, hidden, cached=True)
            self.conv2 = GCNConv(hidden, n_classes, cached=True)
        else:
            self.conv1 = GATConv(in_dim, hidden, heads=heads, dropout=dropout)
            self.conv2 = GATConv(hidden * heads, n_classes, heads=out_heads, concat=False,
                                 dropout=dropout)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        x = _dropout(x, self.dropout, self.training)
        h = self.conv1(x, edge_index)
        h = F.relu(h) if self.arch == "gcn" else F.elu(h)  # not a row name
        h = F.dropout(h, self.dropout, self.training)
        return self.conv2(h, edge_index)


class FineTunedEncoder(nn.Module):
    """A pre-trained encoder with a linear classifier: ``dropout -> encoder -> dropout ->
    Linear(out_dim, classes)``, every weight trained (fine-tuning after contrastive
    pre-training; e.g. You et al., NeurIPS 2020, Sec. 4.2; Zhu et al. 2020, GRACE, whose
    encoder is the two-layer GCN of :class:`contrastlab.models.gcn.GCNEncoder`).
    ``forward(x [N, F] float (dense or sparse COO), edge_index [2, E] long) -> logits [N, classes]``.

    Args:
        encoder: a trained :class:`~contrastlab.models.gcn.GCNEncoder`; it is deep-copied, so
            the caller's encoder is never changed.
        n_classes: number of classes (>= 1); dropout: rate on the input and on the
            encoder output, in [0, 1).

    Raises:
        InputError: ``n_classes`` below 1.
    """

    def __init__(self, encoder: nn.Module, n_classes: int, *, dropout: float = 0.5):
        super().__init__()
        if n_classes < 1:
            raise InputError("supervised GNN sizes must be >= 1")
        self.encoder = copy.deepcopy(encoder)
        self.head = nn.Linear(self.encoder.conv2.out_channels, n_classes)
        self.dropout = float(dropout)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        h = self.encoder(_dropout(x, self.dropout, self.training), edge_index)
        return self.head(F.dropout(h, self.dropout, self.training))


def _dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """Inverted dropout (Srivastava et al., JMLR 2014) of a dense or sparse COO (coalesced)
    ``x``; for a sparse ``x`` only the stored non-zeros are drawn (the zeros stay zero under
    any mask, so the distribution is the same)."""
    if not training or p <= 0:
        return x
    if not x.is_sparse:
        return F.dropout(x, p, True)
    vals = x.values()
    keep = (torch.rand(vals.shape[0], device=vals.device) >= p).to(vals.dtype) / (1.0 - p)
    return torch.sparse_coo_tensor(x.indices(), vals * keep, x.shape, is_coalesced=True,
                                   check_invariants=False)


def build_model(cfg: dict, in_dim: int, n_classes: int, encoder: nn.Module | None = None) -> nn.Module:
    """:class:`SupervisedGNN` from a configuration dict (``arch``, ``hidden``, ``heads``,
    ``out_heads``, ``dropout``), or for ``arch: pretrained`` a :class:`FineTunedEncoder` of
    ``encoder`` (required then).

    Raises:
        InputError: ``arch: pretrained`` without an encoder.
    """
    if cfg["arch"] == "pretrained":  # not a row name: params.yaml's architecture
        if encoder is None:
            raise InputError("arch pretrained needs the pre-trained encoder")
        return FineTunedEncoder(encoder, n_classes, dropout=float(cfg["dropout"]))
    return SupervisedGNN(cfg["arch"], in_dim, n_classes, hidden=int(cfg["hidden"]),
                         heads=int(cfg.get("heads", 1)), out_heads=int(cfg.get("out_heads", 1)),
                         dropout=float(cfg["dropout"]))


def _features(data, cfg: dict | None = None) -> torch.Tensor:
    """The input features, sparse COO: row-normalised bag-of-words for a GCN / GAT (both
    papers), the raw features a pre-trained encoder saw for ``arch: pretrained``
    (:func:`contrastlab.training.graph.train_graph_ssl`)."""
    if cfg is not None and cfg["arch"] == "pretrained":  # not a row name
        return data.x.to_sparse_coo().coalesce()
    return torch.from_numpy(row_normalize(data.x)).float().to_sparse_coo().coalesce()


def train_supervised(data, cfg: dict, seed: int, *, x: torch.Tensor | None = None,
                     return_pred: bool = False, encoder: nn.Module | None = None) -> dict:
    """Train one seed of a supervised reference and keep the epoch of lowest validation
    cross-entropy (module docstring).

    Args:
        data: the Planetoid ``Data`` (``x`` [N, F], ``edge_index``, ``y`` [N] long and the
            public-split boolean masks).
        cfg: ``arch``, ``hidden``, ``heads``, ``out_heads``, ``dropout``, ``lr``,
            ``weight_decay``, ``weight_decay_layers`` (``first`` | ``every``), ``epochs``.
        seed: seeds the initialisation and the dropout masks (``torch.manual_seed``).
        x: the row-normalised features, sparse COO (computed when ``None``; bag-of-words
            rows are about 1 % non-zero, so the first layer is several times cheaper).
        return_pred: include ``test_pred`` (``[n_test]`` int64 predicted classes).
        encoder: ``arch: pretrained``: the pre-trained encoder (copied, not changed); its
            first layer is the "first" layer of ``weight_decay_layers``.

    Returns:
        ``{"val_acc", "test_acc", "epoch", "val_loss", "pick"}`` (fractions, the mean
        validation cross-entropy in nats; ``epoch`` 1-based) at the chosen epoch, ``pick``
        the epoch's margin in validation nodes (:func:`contrastlab.evaluation.probe.mean_loss_pick`
        of the mean cross-entropy; a node's leave-one-out value is exact for a mean),
        and ``test_pred`` when asked.

    Raises:
        FloatingPointError: the training loss became NaN or infinite.
        InputError: ``weight_decay_layers`` not ``first`` or ``every``; ``arch: pretrained``
            without ``encoder``.
    """
    layers = cfg.get("weight_decay_layers", "every")
    if layers not in ("first", "every"):
        raise InputError(f"weight_decay_layers must be first or every, got {layers!r}")
    x = _features(data, cfg) if x is None else x
    torch.manual_seed(seed)
    n_classes = int(data.y.max()) + 1
    model = build_model(cfg, x.shape[1], n_classes, encoder)
    wd = float(cfg["weight_decay"])
    if layers == "first":
        first = model.encoder.conv1 if isinstance(model, FineTunedEncoder) else model.conv1
        ids = {id(p) for p in first.parameters()}
        groups = [{"params": list(first.parameters()), "weight_decay": wd},
                  {"params": [p for p in model.parameters() if id(p) not in ids], "weight_decay": 0.0}]
    else:
        groups = [{"params": model.parameters(), "weight_decay": wd}]
    opt = torch.optim.Adam(groups, lr=float(cfg["lr"]))
    ei, y = data.edge_index, data.y
    tr, va, te = data.train_mask, data.val_mask, data.test_mask
    best = None  # (val_loss, epoch, val_acc, test predictions) of the lowest loss so far
    node_loss = []  # [epochs][n_va] validation cross-entropy per node (the pick's margin)
    for epoch in range(1, int(cfg["epochs"]) + 1):
        model.train()
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x, ei)[tr], y[tr])
        if not torch.isfinite(loss):
            raise FloatingPointError(f"loss became {float(loss.detach())} at epoch {epoch} (lower the lr?)")
        loss.backward()
        opt.step()
        model.eval()
        with torch.no_grad():
            out = model(x, ei)
            ce = F.cross_entropy(out[va], y[va], reduction="none").double()
            node_loss.append(ce.numpy())
            val_loss = float(ce.mean())
        if best is None or val_loss < best[0]:
            pred = out.argmax(1)
            best = (val_loss, epoch, float((pred[va] == y[va]).double().mean()), pred[te].clone())
    val_loss, epoch, val_acc, test_pred = best
    res = {"val_acc": val_acc, "test_acc": float((test_pred == y[te]).float().mean()),
           "epoch": epoch, "val_loss": val_loss,
           "pick": mean_loss_pick("validation cross-entropy (lowest)", list(range(1, len(node_loss) + 1)),
                                  np.stack(node_loss), epoch - 1)}
    if return_pred:
        res["test_pred"] = test_pred.numpy()
    return res


def supervised_config(g, name: str, choices: dict | None = None) -> dict:
    """The configuration of ``graph.supervised.<name>`` or ``graph.finetune.<name>`` (``g``:
    a ``GraphParams``) with tuned ``choices`` applied (names as in its ``search``).

    Raises:
        UnknownNameError: no such reference (a ``KeyError``).
    """
    rows = {**g.supervised, **g.finetune}
    if name not in rows:
        raise UnknownNameError(f"graph.supervised / graph.finetune have no {name!r} "
                               f"(known: {', '.join(rows)})")
    cfg = rows[name].model_dump(exclude={"search"})
    if cfg.get("pretrain") is None:  # a GCN / GAT: its configuration (and study name) as before
        cfg.pop("pretrain", None)
    return apply_choices(cfg, choices or {})


def run_supervised_tuning(g, name: str, data_path: str, study_dir: str, tuned_dir: str,
                          plots_dir: str, encoder_for=None, identity: dict | None = None,
                          stage: str = "tune_graph_supervised"):
    """Tune reference ``name`` of ``graph.supervised`` (or fine-tuning row of
    ``graph.finetune``) under ``graph.tune`` (module docstring). ``encoder_for(data, seed)``
    (fine-tuning rows): the pre-trained encoder of a tuning seed, which every trial copies;
    ``identity``: what else the study depends on (the pre-training choices), part of its name.

    Writes ``<study_dir>/<name>/journal.log``, ``<tuned_dir>/<name>.json`` and
    ``<plots_dir>/<name>.csv`` (trial history). Returns the
    :class:`contrastlab.tuning.TuneResult`.
    """
    base = supervised_config(g, name)
    space = {**g.supervised, **g.finetune}[name].search
    torch.set_num_threads(g.threads)
    data, _ = load_planetoid(data_path, g.dataset)
    x = _features(data, base)
    tune = g.tune
    fixed = {"config": base, "seeds": tune.seeds, "objective": "val_acc", "kind": "supervised",
             **(identity or {})}

    def objective(choices: dict, report=None):
        cfg = supervised_config(g, name, choices)

        def score(s: int) -> float:
            enc = encoder_for(data, s) if encoder_for is not None else None
            return train_supervised(data, cfg, s, x=x, encoder=enc)["val_acc"]
        return seed_mean(tune.seeds, score, report)

    default = {k: base[k.partition(".")[0]] for k in space}
    with stage_run("graph", f"{stage}@{name}",
                   {"reference": name, "tune": tune.model_dump(), "base": base}) as tracker:
        res = run_study(track="graph", variant=f"supervised-{name}", space=space,
                        objective=objective, out_dir=f"{study_dir}/{name}", fixed=fixed,
                        tracker=tracker, default=default, **tune_kwargs(tune))
        tracker.log_metrics({"best_val_acc": res.best_value, "n_complete": res.n_complete,
                             "n_failed": res.n_failed})
    write_tuned(f"{tuned_dir}/{name}.json", res, track="graph", variant=name,
                objective="accuracy on the 500 validation nodes (chosen epoch)", space=space,
                n_trials=tune.trials)
    write_csv(f"{plots_dir}/{name}.csv",
              study_history(track="graph", variant=f"supervised-{name}", space=space,
                            out_dir=f"{study_dir}/{name}", storage=tune.storage, fixed=fixed))
    return res


def run_supervised_final(g, name: str, *, data_path: str, tuned_dir: str, metrics_dir: str,
                         report_data_dir: str, encoder_for=None, identity: dict | None = None,
                         stage: str = "train_graph_supervised") -> dict:
    """Train the tuned choice of reference (or fine-tuning row) ``name`` on every seed of
    ``graph.final.seeds`` and score it once on the test nodes (``encoder_for(data, s)``: the
    encoder seed ``s`` fine-tunes; ``identity``: recorded in the metrics).

    Writes ``<metrics_dir>/<name>.json`` (``logreg_acc_*`` keys as a variant's metrics, so
    the report reads both alike: mean, bias-corrected bootstrap 95 % CI over seeds and test
    nodes, per-seed accuracies, validation accuracy and chosen epoch per seed, the choice and
    the whole configuration) and ``<report_data_dir>/<name>_test_pred.csv`` (``node``, ``y``,
    ``seed_<k>``). Returns the metrics.
    """
    chosen = read_tuned(f"{tuned_dir}/{name}.json")
    cfg = supervised_config(g, name, chosen)
    seeds = list(g.final.seeds)
    torch.set_num_threads(g.threads)
    data, _ = load_planetoid(data_path, g.dataset)
    x = _features(data, cfg)
    y_test = data.y[data.test_mask].numpy()
    preds, runs = {}, []
    with stage_run("graph", f"{stage}@{name}",
                   {"reference": name, "seeds": seeds, **cfg}) as tracker:
        for s in seeds:
            enc = encoder_for(data, s) if encoder_for is not None else None
            r = train_supervised(data, cfg, s, x=x, return_pred=True, encoder=enc)
            preds[f"seed_{s}"] = r.pop("test_pred")
            runs.append(r)
            print(f"{stage}@{name} seed {s}: val {r['val_acc']:.4f} "
                  f"test {r['test_acc']:.4f} (epoch {r['epoch']})", flush=True)
        correct = np.stack([preds[f"seed_{s}"] == y_test for s in seeds]).astype(float)
        test = [r["test_acc"] for r in runs]
        m = {"reference": name, "arch": cfg["arch"], "n_seeds": len(seeds), "seeds": seeds,
             "n_test": int(len(y_test)), "epochs": cfg["epochs"],
             **accuracy_summary(correct),
             "logreg_acc_std": float(np.std(test, ddof=1)) if len(test) > 1 else 0.0,
             "logreg_val_acc_mean": float(np.mean([r["val_acc"] for r in runs])),
             "logreg_val_acc": [r["val_acc"] for r in runs],
             "chosen_epoch": [r["epoch"] for r in runs],
             "picks": {"early_stopping": seed_summary([r["pick"] for r in runs])},
             **{f"logreg_acc_seed{s}": a for s, a in zip(seeds, test)},
             "tuned": chosen, "config": cfg, **(identity or {})}
        tracker.log_metrics({k: v for k, v in m.items() if isinstance(v, float)})
    m = {k: round(v, 6) if isinstance(v, float) else v for k, v in m.items()}
    write_json(f"{metrics_dir}/{name}.json", m)
    write_csv(f"{report_data_dir}/{name}_test_pred.csv",
              pd.DataFrame({"node": torch.nonzero(data.test_mask).flatten().numpy(),
                            "y": y_test, **preds}))
    return m
