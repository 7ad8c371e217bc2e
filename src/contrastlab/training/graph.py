"""Full-graph self-supervised training of a GCN encoder on two stochastic views.

Each epoch draws two views of the whole graph (GRACE-style augmentations, Zhu et al.
2020, Sec. 3.2: feature masking and edge dropout with a rate per view), encodes both with
the shared encoder, projects them, applies a two-view loss (``ntxent``, ``mixco``,
``mochi`` from :mod:`contrastlab.losses.selfsup`) and takes one Adam step. All randomness
comes from one ``torch.Generator`` seeded from the run's seed, so a CPU rerun is bitwise
identical.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Sequence

import torch

from ..errors import InputError, UnknownNameError
from ..models.gcn import GCNEncoder, ProjectionHead
# re-exported: the propagation and the frozen-encoder output live in their own module so the
# probe-only baselines (stage baselines_graph) do not depend on the training code (issue 39)
from ..models.graph_features import embed, propagate_features, sgc_operator
from ..tuning import apply_choices

__all__ = ["mask_features", "drop_edges", "augment", "make_graph_loss", "GraphSSLResult",
           "GraphRunConfig", "graph_run_config", "fit_and_probe", "default_choices",
           "sgc_operator", "propagate_features",
           "train_graph_ssl", "embed"]
#: ``needs`` of the registry losses this module loads (read by scripts/stage_deps.py).
LOSS_NEEDS = ("views",)


def mask_features(x: torch.Tensor, p: float, generator: torch.Generator | None = None,
                  mode: str = "column") -> torch.Tensor:
    """Zero features with probability ``p``.

    ``mode="column"``: one mask over the F feature dimensions shared by all nodes (GRACE);
    ``mode="element"``: an independent mask per entry (a reference notebook implementation; for a sparse
    ``x`` only the stored non-zeros are drawn, which has the same distribution).
    ``x``: ``[N, F]`` float, dense or sparse COO (coalesced). Returns a new tensor of the
    same layout.
    """
    if mode not in ("column", "element"):
        raise InputError(f"unknown feature mask mode {mode!r}; use column or element")
    if p <= 0:
        return x
    if x.is_sparse:
        idx, vals = x.indices(), x.values()
        if mode == "column":
            keep = (torch.rand(x.shape[1], generator=generator, device=x.device) >= p)[idx[1]]
        else:
            keep = torch.rand(vals.shape[0], generator=generator, device=x.device) >= p
        return torch.sparse_coo_tensor(idx, vals * keep, x.shape, is_coalesced=True,
                                       check_invariants=False)
    shape = (1, x.shape[1]) if mode == "column" else x.shape
    keep = torch.rand(shape, generator=generator, device=x.device) >= p
    return x * keep


def drop_edges(edge_index: torch.Tensor, p: float,
               generator: torch.Generator | None = None) -> torch.Tensor:
    """Drop each directed edge of ``edge_index`` ``[2, E]`` with probability ``p``
    (like ``torch_geometric.utils.dropout_edge``, but drawn from ``generator``)."""
    if p <= 0:
        return edge_index
    keep = torch.rand(edge_index.shape[1], generator=generator, device=edge_index.device) >= p
    return edge_index[:, keep]


def augment(x, edge_index, feature_p: float, edge_p: float, generator=None,
            mode: str = "column"):
    """One stochastic view: ``(masked x, kept edge_index)``."""
    return mask_features(x, feature_p, generator, mode), drop_edges(edge_index, edge_p, generator)


def make_graph_loss(loss: str, **kwargs) -> Callable[..., torch.Tensor]:
    """The two-view loss ``f(z1, z2, generator) -> scalar`` for registry name ``loss``
    with its keyword parameters (e.g. ``temperature``, ``alpha``, ``n_hard``)."""
    from ..losses import get_loss, get_spec

    spec = get_spec(loss)
    if spec.needs not in LOSS_NEEDS:
        raise InputError(f"loss {loss!r} is not a two-view self-supervised loss "
                         f"(needs={spec.needs!r})")
    fn = get_loss(loss)
    stochastic = spec.stochastic

    def f(z1, z2, generator=None):
        if stochastic:
            return fn(z1, z2, generator=generator, **kwargs)
        return fn(z1, z2, **kwargs)

    return f


@dataclass
class GraphSSLResult:
    """Outcome of :func:`train_graph_ssl`."""

    encoder: GCNEncoder
    projector: ProjectionHead
    losses: list[float] = field(default_factory=list)  # per epoch


def train_graph_ssl(data, loss_fn: Callable[..., torch.Tensor], *, epochs: int, lr: float,
                    weight_decay: float, seed: int,
                    feature_mask: Sequence[float] = (0.3, 0.4),
                    edge_drop: Sequence[float] = (0.2, 0.4), feature_mask_mode: str = "column",
                    hidden_dim: int = 128, out_dim: int = 128, proj_dim: int = 128,
                    activation: str = "prelu", batch_nodes: int | None = None,
                    progress: bool = True,
                    on_epoch: Callable[[int, float], None] | None = None,
                    desc: str = "train") -> GraphSSLResult:
    """Train encoder + projection head on the full graph for ``epochs`` Adam steps.

    Args:
        data: ``torch_geometric`` ``Data`` with ``x`` [N, F] and ``edge_index`` [2, E].
        loss_fn: ``f(z1, z2, generator) -> scalar`` (see :func:`make_graph_loss`).
        epochs, lr, weight_decay: optimisation (one step per epoch).
        seed: seeds the model initialisation and every random draw.
        feature_mask, edge_drop: ``(view 1, view 2)`` rates in [0, 1).
        batch_nodes: if set, each step's loss uses a random subset of this many nodes as
            the batch (anchors and negatives; both views are still encoded on the full
            graph), the usual SimCLR mini-batch: ``(2B)^2`` instead of ``(2N)^2`` logits.
        on_epoch: called as ``on_epoch(epoch, loss)`` (1-based), e.g. to log to MLflow.

    Returns:
        :class:`GraphSSLResult` with the trained modules and the per-epoch losses.

    Raises:
        FloatingPointError: the loss became NaN/inf (names the epoch).
    """
    from ..progress import tqdm

    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    encoder = GCNEncoder(data.num_features, hidden_dim, out_dim, activation)
    projector = ProjectionHead(out_dim, proj_dim)
    params = list(encoder.parameters()) + list(projector.parameters())
    opt = torch.optim.Adam(params, lr=lr, weight_decay=weight_decay)
    encoder.train()
    projector.train()
    # Bag-of-words features are ~1% non-zero: a sparse first layer is several times cheaper.
    x, ei = data.x.to_sparse_coo().coalesce(), data.edge_index
    losses: list[float] = []
    bar = tqdm(range(1, epochs + 1), desc=desc, disable=not progress, leave=False)
    for epoch in bar:
        x1, e1 = augment(x, ei, feature_mask[0], edge_drop[0], g, feature_mask_mode)
        x2, e2 = augment(x, ei, feature_mask[1], edge_drop[1], g, feature_mask_mode)
        h1, h2 = encoder(x1, e1), encoder(x2, e2)
        if batch_nodes is not None and batch_nodes < h1.shape[0]:
            idx = torch.randperm(h1.shape[0], generator=g)[:batch_nodes]
            h1, h2 = h1[idx], h2[idx]
        z1, z2 = projector(h1), projector(h2)
        loss = loss_fn(z1, z2, g)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        val = float(loss.detach())
        if not math.isfinite(val):
            raise FloatingPointError(f"loss became {val} at epoch {epoch} (lower the lr?)")
        losses.append(val)
        if on_epoch is not None:
            on_epoch(epoch, val)
        if epoch % 10 == 0:
            bar.set_postfix(loss=f"{val:.4f}")
    encoder.eval()
    projector.eval()
    return GraphSSLResult(encoder, projector, losses)


# ----------------------------------------------------------------- protocol (tune / final)
@dataclass
class GraphRunConfig:
    """Everything one training run of a variant needs: the loss with its keywords and the
    keyword arguments of :func:`train_graph_ssl` (optimiser, augmentations, model sizes)."""

    loss: str
    loss_kwargs: dict
    train: dict

    def with_choices(self, choices: dict) -> "GraphRunConfig":
        """A copy with tuned ``choices`` applied: a name that is a loss keyword goes to the
        loss, anything else (``lr``, ``feature_mask.0``...) to the training keywords.

        Raises:
            KeyError: a name that is neither.
        """
        loss_c = {k: v for k, v in choices.items() if k in self.loss_kwargs}
        train_c = {k: v for k, v in choices.items() if k not in self.loss_kwargs}
        return GraphRunConfig(self.loss, apply_choices(self.loss_kwargs, loss_c),
                              apply_choices(self.train, train_c))

    def flat(self) -> dict:
        """``{"loss": ..., <loss keywords>, <training keywords>}`` for logs and tables."""
        return {"loss": self.loss, **self.loss_kwargs, **self.train}


def graph_run_config(g, variant: str) -> GraphRunConfig:
    """The untuned configuration of ``graph.variants.<variant>`` (a ``GraphParams``).

    Raises:
        UnknownNameError: no such variant (a ``KeyError``).
    """
    if variant not in g.variants:
        raise UnknownNameError(f"graph.variants has no {variant!r} (known: {', '.join(g.variants)})")
    v = g.variants[variant]
    train = dict(epochs=g.train.epochs, batch_nodes=g.train.batch_nodes,
                 lr=v.lr if v.lr is not None else g.train.lr,
                 weight_decay=v.weight_decay if v.weight_decay is not None else g.train.weight_decay,
                 feature_mask=list(g.train.feature_mask), edge_drop=list(g.train.edge_drop),
                 feature_mask_mode=g.train.feature_mask_mode, **g.model.model_dump())
    return GraphRunConfig(v.loss, v.loss_kwargs(), train)


def default_choices(cfg: GraphRunConfig, space) -> dict:
    """The declared (untuned) value of every searched name of ``space`` in ``cfg``: the
    study's trial 0 (``run_study(default=...)``). ``feature_mask.0`` reads element 0 of
    ``feature_mask``.

    Raises:
        KeyError: a searched name that is neither a loss keyword nor a training keyword.
    """
    out = {}
    for name in space:
        if name in cfg.loss_kwargs:
            out[name] = cfg.loss_kwargs[name]
            continue
        key, _, idx = name.partition(".")
        if key not in cfg.train:
            raise KeyError(f"searched {name!r} is neither a loss nor a training keyword")
        out[name] = cfg.train[key][int(idx)] if idx else cfg.train[key]
    return out


def fit_and_probe(data, cfg: GraphRunConfig, seed: int, probe, *, return_pred: bool = False,
                  notebook: bool = False, on_epoch=None, progress: bool = False,
                  desc: str = "train") -> dict:
    """Train one seed of ``cfg`` and evaluate the frozen encoder with the linear probe.

    Args:
        data: the Planetoid ``Data`` (public split masks).
        cfg: :class:`GraphRunConfig`.
        seed: training seed.
        probe: ``graph.probe`` params (``c_grid``, ``normalize``, ``criterion``, notebook probe
            settings).
        return_pred: include the test nodes' predicted classes (``test_pred`` [n_test]).
        notebook: also run the notebook-style probe (``notebook_acc``).

    Returns:
        ``{"val_acc", "test_acc", "C", "losses": [epochs], "embeddings": [N, out_dim]}`` and
        ``test_pred`` / ``notebook_acc`` when asked.

    Raises:
        FloatingPointError: the loss diverged.
    """
    from ..evaluation.probe import logreg_probe, notebook_probe

    res = train_graph_ssl(data, make_graph_loss(cfg.loss, **cfg.loss_kwargs), seed=seed,
                          progress=progress, on_epoch=on_epoch, desc=desc, **cfg.train)
    emb = embed(res.encoder, data)
    out = logreg_probe(emb, data.y, data.train_mask, data.val_mask, data.test_mask,
                       c_grid=probe.c_grid, normalize=probe.normalize, return_pred=return_pred,
                       edge=probe.edge, max_extend=probe.max_extend, criterion=probe.criterion)
    if notebook:
        out["notebook_acc"] = notebook_probe(emb, data.y, data.train_mask, data.test_mask,
                                             steps=probe.notebook_steps, lr=probe.notebook_lr,
                                             seed=seed)["test_acc"]
    out["losses"] = res.losses
    out["embeddings"] = emb
    return out
