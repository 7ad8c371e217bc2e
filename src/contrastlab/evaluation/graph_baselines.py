"""The baselines every self-supervised graph encoder must beat (stage ``baselines_graph``):
:func:`run_baselines`, through the same linear probe as the trained variants (``C`` from
``graph.probe.c_grid`` chosen on the 500 validation nodes by ``graph.probe.criterion``,
accuracy on the 1000 test nodes).

- ``raw_features``: row-normalised bag-of-words features (Kipf & Welling, ICLR 2017, Sec.
  5.1), the probe's normalisation chosen with ``C``; deterministic, one run.
- ``sgc``: ``S^K X`` with ``S = D~^{-1/2}(A+I)D~^{-1/2}`` (Wu et al., ICML 2019, Eq. 5-8),
  ``K`` from ``graph.baselines.sgc_k`` chosen on validation; deterministic, one run.
- ``random_gcn``: the untrained GCN encoder for every seed of ``graph.final.seeds``
  (Velickovic et al., "Deep Graph Infomax", ICLR 2019, Sec. 4.3).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from ..data.planetoid import load_planetoid
from ..models.gcn import GCNEncoder
from ..models.graph_features import embed, propagate_features
from ..tracking import stage_run
from .picks import seed_summary
from .probe import logreg_probe, probe_pick, row_normalize
from .stats import accuracy_summary

__all__ = ["run_baselines", "select_on_validation", "PROBE_METHODS", "probe_rows"]

#: The ``method`` of a feature baseline of the variant table, in the order they run.
PROBE_METHODS = ("features", "propagated", "untrained_encoder")


def probe_rows() -> dict[str, str]:
    """``{method: row name}`` of the graph track's feature baselines (variants.yaml)."""
    from ..losses.registry import method_row

    return {m: method_row("graph", m) for m in PROBE_METHODS}


def select_on_validation(feats: dict, masks, probe: dict, normalizes) -> tuple[dict, tuple, dict]:
    """Probe every ``(key, normalize)`` pair and keep the best on the probe's validation
    criterion (``probe["criterion"]``: the lowest mean cross-entropy, or the most nodes right;
    ties: the first key, then the first normalisation, as listed). ``feats``: ``{key: [N, F]}``.

    Returns:
        ``(probe result, (key, normalize), pick)``: ``pick`` is the choice among every
        ``[key, normalize, C]`` probed, with its margin in validation nodes
        (:func:`contrastlab.evaluation.probe.probe_pick`).
    """
    best, cands, counts, losses = None, [], [], []
    for key, x in feats.items():
        for norm in normalizes:
            r = logreg_probe(x, *masks, normalize=norm, **probe)
            i = r["c_grid"].index(r["C"])
            if best is None or r["val_score"][i] > best[0]["val_score"][best[2]]:
                best = (r, (key, norm), i, len(cands) + i)
            cands += [[key, norm, c] for c in r["c_grid"]]
            counts += r["val_correct"]
            losses.append(r["val_nll"])
    r, choice, _, i = best
    return r, choice, probe_pick(probe["criterion"], cands, counts, np.concatenate(losses), i,
                                 r["pick"]["n_val"])


def run_baselines(g, data_dir: str) -> tuple[dict, pd.DataFrame]:
    """Every baseline of the ``graph`` params section ``g`` on its Planetoid data set.

    Returns:
        ``(metrics, predictions)``: per baseline the test accuracy's mean and 95 % CI
        (``logreg_acc_mean``, ``logreg_acc_ci_low``, ``logreg_acc_ci_high``; fractions),
        ``n_seeds``, the validation choices with their margins (``picks``) and ``val_acc``;
        and the predicted class per test node (columns ``node``, ``y``, ``raw_features``,
        ``sgc``, ``random_gcn_seed_<k>``: the rows of :func:`probe_rows`).

    Raises:
        FileNotFoundError: the data set is not fetched (run ``fetch_graph``).
    """
    torch.set_num_threads(g.threads)
    data, _ = load_planetoid(data_dir, g.dataset)
    probe = dict(c_grid=g.probe.c_grid, edge=g.probe.edge, max_extend=g.probe.max_extend,
                 criterion=g.probe.criterion, return_pred=True)
    masks = (data.y, data.train_mask, data.val_mask, data.test_mask)
    y_test = data.y[data.test_mask].numpy()
    cols: dict[str, np.ndarray] = {}
    out: dict[str, dict] = {}
    bl = g.baselines
    raw_n, sgc_n, rnd_n = probe_rows().values()
    with stage_run("graph", "baselines_graph", {"probe": g.probe, "seeds": g.final.seeds,
                                                 "model": g.model,
                                                 "baselines": bl.model_dump()}) as tracker:
        x = torch.from_numpy(row_normalize(data.x))
        raw, (_, raw_norm), raw_pick = select_on_validation({0: x}, masks, probe, bl.normalize)
        cols[raw_n] = raw["test_pred"]
        feats = {k: propagate_features(x, data.edge_index, k) for k in bl.sgc_k}
        sgc, (sgc_k, sgc_norm), sgc_pick = select_on_validation(feats, masks, probe, bl.normalize)
        cols[sgc_n] = sgc["test_pred"]
        rnd, rnd_val, rnd_picks = [], [], []
        for seed in g.final.seeds:
            torch.manual_seed(seed)
            enc = GCNEncoder(data.num_features, g.model.hidden_dim, g.model.out_dim,
                             g.model.activation)
            r = logreg_probe(embed(enc, data), *masks, normalize=g.probe.normalize, **probe)
            cols[f"{rnd_n}_seed_{seed}"] = r["test_pred"]
            rnd.append(r["test_acc"])
            rnd_val.append(r["val_acc"])
            rnd_picks.append(r["pick"])
        per_item = {n: (cols[n] == y_test)[None].astype(float) for n in (raw_n, sgc_n)}
        per_item[rnd_n] = np.stack([cols[f"{rnd_n}_seed_{s}"] == y_test
                                    for s in g.final.seeds]).astype(float)
        for name, arr in per_item.items():
            out[name] = {**{k: round(v, 6) for k, v in accuracy_summary(arr).items()},
                         "n_seeds": int(arr.shape[0])}
        out[raw_n].update(C=raw["C"], normalize=raw_norm, val_acc=round(raw["val_acc"], 6),
                          picks={"configuration": seed_summary([raw_pick])})
        out[sgc_n].update(K=int(sgc_k), C=sgc["C"], normalize=sgc_norm, val_acc=round(sgc["val_acc"], 6),
                          picks={"configuration": seed_summary([sgc_pick])})
        out[rnd_n]["picks"] = {"C": seed_summary(rnd_picks)}
        out[rnd_n].update({f"logreg_acc_seed{s}": round(a, 6) for s, a in zip(g.final.seeds, rnd)})
        out[rnd_n]["val_acc"] = round(float(np.mean(rnd_val)), 6)
        tracker.log_metrics({f"{k}.logreg_acc_mean": v["logreg_acc_mean"] for k, v in out.items()})
    pred = pd.DataFrame({"node": torch.nonzero(data.test_mask).flatten().numpy(), "y": y_test, **cols})
    return out, pred
