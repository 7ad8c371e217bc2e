"""One bi-encoder row end to end (stages ``tune_biencoder@<row>`` and ``train_biencoder@<row>``).

:func:`train_row` trains under ``torch.manual_seed(seed)`` on ``pair_batches(train,
batch_size, steps, seed)`` (the same pairs for every row at a seed); :func:`score_row` ranks
each signature's true body among all bodies (exact FAISS inner product; ties count against
it); :func:`run_tuning` is the row's study (:func:`contrastlab.tuning.run_study`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..errors import UnknownNameError
from ..finetune.train import embed_inputs, use_bf16
from .data import Pairs, make_encoder
from .train import BiEncoder, faiss_index, index_label, pair_batches, train_biencoder

__all__ = ["train_row", "embed_all", "score_row", "run_row", "run_tuning", "apply_choices", "row_of"]


def row_of(be, name: str):
    """The declared row ``name`` of ``code.biencoder.rows``.

    Raises:
        UnknownNameError: not declared.
    """
    if name not in be.rows:
        raise UnknownNameError(f"unknown bi-encoder row {name!r}; declared: {', '.join(be.rows)}")
    return be.rows[name]


def apply_choices(row, choices: dict[str, Any]):
    """``row`` with a study's choices applied (revalidated)."""
    from ..params.biencoder import BiencoderRow

    return BiencoderRow(**{**row.model_dump(), **{k: float(v) for k, v in choices.items()}})


def _device(be) -> str:
    from ..utils import pick_device

    return str(pick_device(be.device))


def train_row(be, row, pairs: Pairs, sig_inp, body_inp, seed: int, device: str | None = None):
    """Train one seed of ``row``.

    Returns:
        ``(sig encoder, body encoder, info)``: eval-mode
        :class:`~contrastlab.finetune.encoder.FinetuneEncoder` towers (the same object when
        shared) and ``{"tokens", "seconds", "curve", "temperature"}`` (``seconds`` is wall
        time, for benchmarks only).
    """
    dev = device or _device(be)
    tr = pairs.rows("train")
    torch.manual_seed(seed)
    if row.trainer == "sentence_transformers":
        from ..distributed import world_size
        from .st import train_st

        # not distributed: under torchrun every rank trains it alike on the global batch
        enc, info = train_st(be, row, pairs.signatures, pairs.bodies,
                             pair_batches(tr, be.batch_size * world_size(), be.steps, seed), device=dev)
        return enc, enc, {**info, "curve": None, "temperature": row.temperature}
    model = BiEncoder(make_encoder(be), be.towers, row.temperature, row.learn_temperature)
    r = train_biencoder(model, sig_inp, body_inp, tr, pairs.dup, be=be, row=row, seed=seed, device=dev)
    model.to("cpu")
    return model.sig, model.body, {"tokens": r.tokens, "seconds": r.seconds, "curve": r.curve,
                                   "temperature": model.loss.temperature}


def embed_all(be, sig_enc, body_enc, sig_inp, body_inp, q_rows, device: str | None = None):
    """``(queries [len(q_rows), D], corpus [N, D])`` float32 unit rows: the signatures of
    ``q_rows`` and every body."""
    dev = torch.device(device or _device(be))
    bf16 = use_bf16(be.bf16, dev)
    sig_enc.to(dev)
    body_enc.to(dev)
    q = embed_inputs(sig_enc, sig_inp, q_rows, be.batch_size_encode, bf16, be.sub_batch)
    c = embed_inputs(body_enc, body_inp, None, be.batch_size_encode, bf16, be.sub_batch)
    sig_enc.to("cpu")
    body_enc.to("cpu")
    return q, c


def score_row(q: torch.Tensor, corpus: torch.Tensor, true_rows, k_max: int = 100,
              device="cpu") -> np.ndarray:
    """1-based rank of each query's own body among all ``corpus`` rows (exact, ties against;
    the FAISS index on ``device``: :func:`contrastlab.biencoder.train.faiss_index`)."""
    from ..evaluation.retrieval import true_ranks

    return true_ranks(q, corpus, np.asarray(true_rows), k_max, index=faiss_index(corpus, device))


def run_row(be, name: str, pairs: Pairs, sig_inp, body_inp, seeds=None, tuned: dict | None = None,
            k_max: int = 100, keep_models: int = 1) -> dict[str, Any]:
    """Train and score ``name`` on ``seeds`` (default ``be.seeds``) with its tuned ``choices``.

    Returns:
        ``{"ranks": {"val": [S, Qv], "test": [S, Qt]}, "sig_rows": [Qv + Qt] (validation then
        test rows), "emb": {"sig": [S, Qv + Qt, D] (those rows' signatures), "body": [S, N, D]},
        "info": [per seed], "models": [(sig, body) of the first keep_models seeds], "row": the
        row used, "index": the search that ranked them (:func:`contrastlab.biencoder.train.
        index_label`)}``.
    """
    row = row_of(be, name)
    if tuned:
        row = apply_choices(row, tuned)
    seeds = list(be.seeds if seeds is None else seeds)
    va, te = pairs.rows("val"), pairs.rows("test")
    dev = _device(be)
    out: dict[str, Any] = {"ranks": {"val": [], "test": []}, "emb": {"sig": [], "body": []},
                           "info": [], "models": [], "row": row, "index": index_label(dev)}
    q_rows = np.concatenate([va, te])
    out["sig_rows"] = q_rows
    for i, seed in enumerate(seeds):
        s_enc, b_enc, info = train_row(be, row, pairs, sig_inp, body_inp, seed)
        q, c = embed_all(be, s_enc, b_enc, sig_inp, body_inp, q_rows)
        out["ranks"]["val"].append(score_row(q[:len(va)], c, va, 10, dev))
        out["ranks"]["test"].append(score_row(q[len(va):], c, te, k_max, dev))
        out["emb"]["sig"].append(q)
        out["emb"]["body"].append(c)
        out["info"].append({**info, "seed": int(seed)})
        if i < keep_models:
            out["models"].append((s_enc, b_enc))
        print(f"biencoder {name} seed {seed}: val R@10 {np.mean(out['ranks']['val'][-1] <= 10):.2%} "
              f"test R@10 {np.mean(out['ranks']['test'][-1] <= 10):.2%} ({info['seconds']:.0f} s training, "
              f"{info['tokens'] / max(info['seconds'], 1e-9):.0f} tokens/s)", flush=True)
    out["ranks"] = {k: np.stack(v) for k, v in out["ranks"].items()}
    out["emb"] = {k: torch.stack(v) for k, v in out["emb"].items()}
    return out


def run_tuning(be, name: str, pairs: Pairs, sig_inp, body_inp, tuned_dir, history_dir, journal_dir):
    """The study of row ``name`` (``be.tune``): each trial trains the seeds ``be.tune.seeds``
    and scores the mean validation Rank@10 against the whole corpus (validation signatures
    only; the test repositories are never read). Writes ``<tuned_dir>/<name>.json``,
    ``<history_dir>/<name>.csv`` and the journal under ``<journal_dir>/<name>/``.

    Returns:
        The :class:`contrastlab.tuning.TuneResult`.
    """
    from ..io import write_csv
    from ..tracking import stage_run
    from ..tuning import run_study, seed_mean, study_history, tune_kwargs, write_tuned

    row = row_of(be, name)
    t = be.tune
    space = dict(row.search)
    va = pairs.rows("val")
    fixed = {"row": name, "tune_seeds": list(t.seeds),
             **{k: v for k, v in be.model_dump(mode="json").items()
                if k not in ("rows", "tune", "seeds", "device", "threads", "index_row")},
             **row.model_dump(mode="json", exclude={"search", *space})}
    default = {k: getattr(row, k) for k in space}

    def objective(choices: dict):
        cfg = apply_choices(row, choices)

        def score(seed: int) -> float:
            s_enc, b_enc, _ = train_row(be, cfg, pairs, sig_inp, body_inp, seed)
            q, c = embed_all(be, s_enc, b_enc, sig_inp, body_inp, va)
            r10 = float(np.mean(score_row(q, c, va, 10, _device(be)) <= 10))
            print(f"tune_biencoder {name} {choices}: val R@10 {r10:.2%}", flush=True)
            return r10
        return seed_mean(t.seeds, score)

    out_dir = Path(journal_dir) / name
    with stage_run("code", f"tune_biencoder@{name}", {"variant": name, **fixed}) as tracker:
        res = run_study(track="code", variant=name, space=space, objective=objective,
                        out_dir=out_dir, fixed=fixed, tracker=tracker, default=default,
                        **tune_kwargs(t))
    write_tuned(Path(tuned_dir) / f"{name}.json", res, track="code", variant=name,
                objective="val_rank_at_10", space=space, n_trials=t.trials)
    write_csv(Path(history_dir) / f"{name}.csv",
              study_history(track="code", variant=name, space=space, out_dir=out_dir,
                            storage=t.storage, fixed=fixed))
    return res
