"""Fine-tuning rows of the graph track (``graph.finetune``): contrastive pre-training, then
supervised fine-tuning on the 140 training labels (issue 37).

Seed ``s`` pre-trains exactly as the tuned final run of variant ``pretrain`` with seed ``s``
(:func:`pretrained_encoder`), then :class:`~contrastlab.training.graph_supervised.FineTunedEncoder`
trains every weight with a linear head, the epoch chosen on validation (You et al., NeurIPS
2020, Sec. 4.2). Study, budget, seeds and outputs are the supervised references'; each tuning
seed's encoder is pre-trained once per study.
"""

from __future__ import annotations

from torch import nn

from ..errors import InputError, UnknownNameError
from ..tuning import read_tuned
from .graph import graph_run_config, make_graph_loss, train_graph_ssl
from .graph_supervised import run_supervised_final, run_supervised_tuning, supervised_config

__all__ = ["pretrained_encoder", "pretrain_choices", "run_finetune_tuning", "run_finetune_final"]


def pretrain_choices(cfg: dict, ssl_tuned_dir: str | None) -> dict:
    """The tuned choices of the pre-training variant ``cfg["pretrain"]``
    (``<ssl_tuned_dir>/<pretrain>.json``, written by ``tune_graph``).

    Raises:
        InputError: no ``ssl_tuned_dir``. FileNotFoundError: the choices are missing.
    """
    if not ssl_tuned_dir:
        raise InputError(f"a fine-tuning row ({cfg['pretrain']}) needs the variants' tuned choices "
                         "(--ssl-tuned reports/tuned/graph)")
    return read_tuned(f"{ssl_tuned_dir}/{cfg['pretrain']}.json")


def pretrained_encoder(g, cfg: dict, data, seed: int, ssl_tuned_dir: str | None,
                       cache: dict | None = None) -> nn.Module:
    """The encoder of variant ``cfg["pretrain"]`` trained with its tuned choices and ``seed``:
    the encoder of that variant's final run with the same seed
    (:func:`contrastlab.training.graph.train_graph_ssl`).

    Args:
        g: ``GraphParams``; cfg: a ``graph.finetune`` configuration (``pretrain``);
        data: the Planetoid ``Data``; seed: the pre-training seed;
        ssl_tuned_dir: the folder of ``tune_graph``'s choices;
        cache: optional ``{seed: encoder}``, filled and reused (callers copy, never train, it).

    Returns:
        A :class:`~contrastlab.models.gcn.GCNEncoder` in eval mode.

    Raises:
        InputError: no ``ssl_tuned_dir``. FileNotFoundError: the variant's tuned choices are
            missing (run tune_graph first).
    """
    if cache is not None and seed in cache:
        return cache[seed]
    run = graph_run_config(g, cfg["pretrain"]).with_choices(pretrain_choices(cfg, ssl_tuned_dir))
    enc = train_graph_ssl(data, make_graph_loss(run.loss, **run.loss_kwargs), seed=seed,
                          progress=False, **run.train).encoder
    if cache is not None:
        cache[seed] = enc
    return enc


def _hook(g, name: str, ssl_tuned_dir: str | None, cache: dict | None):
    if name not in g.finetune:
        raise UnknownNameError(f"graph.finetune has no {name!r} (known: {', '.join(g.finetune)})")
    cfg = supervised_config(g, name)
    identity = {"pretrain_choices": pretrain_choices(cfg, ssl_tuned_dir)}
    return (lambda data, seed: pretrained_encoder(g, cfg, data, seed, ssl_tuned_dir, cache)), identity


def run_finetune_tuning(g, name: str, data_path: str, study_dir: str, tuned_dir: str,
                        plots_dir: str, ssl_tuned_dir: str | None):
    """Tune fine-tuning row ``name`` of ``graph.finetune`` under ``graph.tune`` (the
    references' protocol; the study's name also covers the pre-training choices). Writes what
    :func:`~contrastlab.training.graph_supervised.run_supervised_tuning` writes.

    Raises:
        UnknownNameError: no such row. InputError / FileNotFoundError: see :func:`pretrain_choices`.
    """
    hook, identity = _hook(g, name, ssl_tuned_dir, {})
    return run_supervised_tuning(g, name, data_path, study_dir, tuned_dir, plots_dir,
                                 encoder_for=hook, identity=identity, stage="tune_graph_finetune")


def run_finetune_final(g, name: str, *, data_path: str, tuned_dir: str, metrics_dir: str,
                       report_data_dir: str, ssl_tuned_dir: str | None) -> dict:
    """The tuned choice of fine-tuning row ``name`` on every seed of ``graph.final.seeds``
    (seed ``s`` fine-tunes the encoder pre-trained with seed ``s``); the metrics also record
    the pre-training choices. Writes what
    :func:`~contrastlab.training.graph_supervised.run_supervised_final` writes.

    Raises:
        UnknownNameError: no such row. InputError / FileNotFoundError: see :func:`pretrain_choices`.
    """
    hook, identity = _hook(g, name, ssl_tuned_dir, None)
    return run_supervised_final(g, name, data_path=data_path, tuned_dir=tuned_dir,
                                metrics_dir=metrics_dir, report_data_dir=report_data_dir,
                                encoder_for=hook, identity=identity, stage="train_graph_finetune")
