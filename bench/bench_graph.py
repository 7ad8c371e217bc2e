"""Graph-track benchmarks (forward + backward), printed as ratios measured in one run.

1. MoCHi (Kalantidis et al. 2020) with the pipeline's settings (``n_hard``, ``s``, ``s'``
   from params.yaml, 256 / 128 / 64) on 2 x 2708 views: its forward + backward cost as a
   ratio to ``ntxent_loss`` on the same views (median of per-round ratios, interleaved),
   and the per-anchor Python loop of a reference notebook implementation (same
   hard-negative ranking and mixing choices, one anchor at a time) timed once, as written,
   on the full batch (all 5416 anchors; minutes on 2 cores), as a ratio to the vectorised loss.
2. NT-Xent: ``ntxent_loss`` against the SupContrast reference algorithm (Khosla et al.,
   github.com/HobbitLong/SupContrast ``SupConLoss`` with ``labels=None``, i.e. SimCLR,
   ``n_views=2``, ``contrast_mode="all"``), re-implemented below, on the same batch.
3. One training epoch of the project (default params: sparse features, the preset's
   loss batch) against a reference notebook's epoch (dense features, element-wise masking,
   ``dropout_edge``, full-graph NT-Xent with the positive twice), re-implemented below;
   also the project's epoch on the full graph (no loss batch) for a like-for-like ratio.

Each timing is the median of ``--repeats`` runs, alternating the contenders so that load
from other processes hits both alike; only ratios are printed. Run:
``python bench/bench_graph.py [--threads 2] [--parts 1 2 3]``; ``--smoke``: 96 nodes in parts 1-2,
the first 300 of Cora's nodes in part 3, one repeat (a check that it runs, not a measurement).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _peers import supcontrast_reference  # noqa: E402

from contrastlab.losses.selfsup import mochi_loss, ntxent_loss, sample_mochi_mixing


def timed(fn, repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def compare(name: str, fast, slow, repeats: int, slow_repeats: int | None = None) -> float:
    fast()
    slow()  # warm-up
    tf, ts = [], []
    for _ in range(repeats):
        tf += timed(fast, 1)
        if len(ts) < (slow_repeats or repeats):
            ts += timed(slow, 1)
    ratio = statistics.median(ts) / statistics.median(tf)
    print(f"{name}: {ratio:8.1f}x faster (median of {len(tf)} / {len(ts)} runs)", flush=True)
    return ratio


# ----------------------------------------------------------------------- 1. MoCHi loop
def mochi_loop(z1, z2, temperature, n_hard, mixing):
    """Per-anchor MoCHi, one anchor at a time as a reference notebook writes it (with the
    paper's N, s, s' and the same mixing choices as the vectorised loss)."""
    n = z1.shape[0]
    z = F.normalize(torch.cat([z1, z2]), dim=1)
    zd = z.detach()
    total = 0.0
    for a in range(2 * n):
        p = (a + n) % (2 * n)
        sims = z[a] @ z.T
        score = sims.detach().clone()
        score[a] = float("-inf")
        score[p] = float("-inf")
        hard = zd[score.topk(n_hard).indices]
        al = mixing.alpha[a].unsqueeze(1)
        h = F.normalize(al * hard[mixing.pair[a, :, 0]] + (1 - al) * hard[mixing.pair[a, :, 1]], dim=1)
        be = mixing.beta[a].unsqueeze(1)
        hp = F.normalize(be * zd[a] + (1 - be) * hard[mixing.prime[a]], dim=1)
        logits = torch.cat([torch.cat([sims[:a], sims[a + 1:]]), h @ z[a], hp @ z[a]]) / temperature
        target = p - (p > a)
        total = total - torch.log_softmax(logits, 0)[target]
    return total / (2 * n)


# ----------------------------------------------------------------------- 2. SupContrast


# ----------------------------------------------------------------------- 3. notebook epoch
def notebook_epoch_fn(data, temperature=0.5):
    """A reference notebook's training step: GCN(ReLU) + projection, its NT-Xent (positive
    twice in the denominator), Adam."""
    from torch import nn
    from torch_geometric.nn import GCNConv
    from torch_geometric.utils import dropout_edge

    class Enc(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1, self.conv2 = GCNConv(data.num_features, 128), GCNConv(128, 128)

        def forward(self, x, ei):
            return self.conv2(F.relu(self.conv1(x, ei)), ei)

    enc = Enc()
    proj = nn.Sequential(nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 128))
    opt = torch.optim.Adam(list(enc.parameters()) + list(proj.parameters()), lr=1e-3,
                           weight_decay=1e-4)

    def nt_xent(z1, z2):
        z1, z2 = F.normalize(z1, dim=1), F.normalize(z2, dim=1)
        n = z1.size(0)
        z = torch.cat([z1, z2])
        sim = z @ z.T
        pos = torch.cat([torch.diag(sim, n), torch.diag(sim, -n)])
        neg = sim[~torch.eye(2 * n, dtype=torch.bool)].view(2 * n, -1)
        logits = torch.cat([pos.unsqueeze(1), neg], dim=1) / temperature
        return F.cross_entropy(logits, torch.zeros(2 * n, dtype=torch.long))

    def aug():
        x = data.x * (torch.rand_like(data.x) > 0.2)
        return x, dropout_edge(data.edge_index, p=0.2)[0]

    def epoch():
        x1, e1 = aug()
        x2, e2 = aug()
        loss = nt_xent(proj(enc(x1, e1)), proj(enc(x2, e2)))
        opt.zero_grad()
        loss.backward()
        opt.step()

    return epoch


def project_epoch_fn(data, g, batch_nodes):
    from contrastlab.training.graph import make_graph_loss, train_graph_ssl

    v = g.variants["ntxent"]
    loss_fn = make_graph_loss(v.loss, **v.loss_kwargs())

    def epoch():
        train_graph_ssl(data, loss_fn, epochs=1, lr=g.train.lr, weight_decay=g.train.weight_decay,
                        seed=0, feature_mask=g.train.feature_mask, edge_drop=g.train.edge_drop,
                        feature_mask_mode=g.train.feature_mask_mode, batch_nodes=batch_nodes,
                        progress=False, **g.model.model_dump())

    return epoch


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--parts", type=int, nargs="*", default=[1, 2, 3], help="which benchmarks to run")
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--cora", default="data/graph/planetoid",
                    help="prepared Cora root (made here from data/vendor if missing)")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, one repeat: a quick check that the benchmark runs (tests/foundation/test_bench_smoke.py)")
    args = ap.parse_args(argv)
    if args.smoke:
        args.repeats = 1
    torch.set_num_threads(args.threads)
    from contrastlab.params import load_params

    g = load_params(args.params).graph
    n, d, tau = (96, 16, 0.5) if args.smoke else (2708, 128, 0.5)
    gen = torch.Generator().manual_seed(0)
    z1 = torch.randn(n, d, generator=gen, requires_grad=True)
    z2 = torch.randn(n, d, generator=gen, requires_grad=True)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, N = {n}, D = {d}")

    # 1. MoCHi
    mv = g.variants.get("mochi")
    n_hard, s, sp = (mv.n_hard, mv.s, mv.s_prime) if mv is not None else (256, 128, 64)
    if args.smoke:
        n_hard, s, sp = 16, 8, 4
    mix = sample_mochi_mixing(2 * n, n_hard, s, sp, gen)

    def vec():
        z1.grad = z2.grad = None
        mochi_loss(z1, z2, temperature=tau, n_hard=n_hard, s=s, s_prime=sp, mixing=mix).backward()

    def nt():
        z1.grad = z2.grad = None
        ntxent_loss(z1, z2, temperature=tau).backward()

    def loop():
        z1.grad = z2.grad = None
        mochi_loop(z1, z2, tau, n_hard, mix).backward()

    if 1 in args.parts:
        with torch.no_grad():
            a = mochi_loss(z1, z2, temperature=tau, n_hard=n_hard, s=s, s_prime=sp, mixing=mix)
            b = mochi_loop(z1, z2, tau, n_hard, mix)
        print(f"MoCHi (N={n_hard}, s={s}, s'={sp}) vectorised vs per-anchor loop value difference: "
              f"{abs(float(a - b)):.2e}")
        vec()
        nt()
        ratios = []
        for _ in range(args.repeats):  # interleaved rounds: load hits both alike
            t = timed(vec, 1)[0]
            ratios.append(t / timed(nt, 1)[0])
        print(f"1a. MoCHi cost / NT-Xent cost (2 x {n} views, fwd+bwd): {statistics.median(ratios):.2f}x "
              f"(median of {len(ratios)} interleaved rounds)", flush=True)
        t_vec = timed(vec, 1)[0]
        t_loop = timed(loop, 1)[0]  # the whole loop, once
        t_vec = min(t_vec, timed(vec, 1)[0])
        print(f"1b. MoCHi vectorised vs per-anchor loop on all {2 * n} anchors (fwd+bwd, loop timed "
              f"once as written): {t_loop / t_vec:.1f}x faster", flush=True)
    if 2 not in args.parts and 3 not in args.parts:
        return 0

    # 2. NT-Xent vs SupContrast
    feats = torch.stack([F.normalize(z1.detach(), dim=1), F.normalize(z2.detach(), dim=1)], 1)
    f1 = feats[:, 0].clone().requires_grad_(True)
    f2 = feats[:, 1].clone().requires_grad_(True)
    fs = feats.clone().requires_grad_(True)
    diff = abs(float(ntxent_loss(f1, f2, temperature=tau) - supcontrast_reference(fs, None, tau, tau)))
    print(f"NT-Xent vs SupContrast value difference: {diff:.2e}")

    def ours():
        f1.grad = f2.grad = None
        ntxent_loss(f1, f2, temperature=tau).backward()

    def ref():
        fs.grad = None
        supcontrast_reference(fs, None, tau, tau).backward()

    compare(f"2. NT-Xent vs SupContrast SupConLoss(n_views=2) (2 x {n}, fwd+bwd)", ours, ref,
            args.repeats)

    if 3 not in args.parts:
        return 0
    # 3. training epoch
    root = Path(args.cora)
    if not (root / "Cora" / "processed").is_dir():
        from contrastlab.data.cora import prepare_cora

        root = Path("bench/results/planetoid")
        prepare_cora("data/vendor/planetoid/Cora", root)
    from contrastlab.data.cora import load_cora

    data, _ = load_cora(root)
    if args.smoke:  # the subgraph induced by the first 300 nodes: a check that it runs
        data = data.subgraph(torch.arange(300))
    nb = notebook_epoch_fn(data)
    bn = g.train.batch_nodes
    compare(f"3a. training epoch, project default (loss batch {bn}) vs notebook epoch",
            project_epoch_fn(data, g, bn), nb, args.repeats)
    compare("3b. training epoch, project on the full graph (no loss batch) vs notebook epoch",
            project_epoch_fn(data, g, None), nb, args.repeats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
