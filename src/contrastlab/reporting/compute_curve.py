"""The code track's compute curve: the bi-encoder's test Rank@10 against its training compute
(``reports/metrics/code_compute_curve/curve.json``, written by ``scripts/compute_curve.py``),
with the strongest baseline's test Rank@10 and 95 % CI as a band and the GPU rows beside.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from ..evaluation.stats import format_p
from ..io import read_json
from ..models.grid_picks import FRAGILE_SHARE
from . import Plot, Table
from .coverage_rule import HI, LO
from .style import save, styled

__all__ = ["curve_points", "curve_plot", "curve_table", "curve_finding", "gpu_points",
           "PRESET_BEGIN", "PRESET_END", "render_cpu_preset"]


def curve_points(curve: Mapping[str, Any]) -> list[dict]:
    """The CPU points of ``curve.json``, cheapest (``total_cpu_min``) first; each with
    ``label`` (``"<layers> layer(s), <steps> steps, <max_length> tokens"``)."""
    pts = []
    for p in curve.get("points", []):
        lay = _layer_key(p)
        lay = lay if lay == "every layer" else lay + (" layers" if str(p["layers"]) != "1" else " layer")
        pts.append({**p, "label": f"{lay}, {p['steps']} steps, {p['max_length']} tokens"})
    return sorted(pts, key=lambda p: p["total_cpu_min"])


def gpu_points(device_runs: Mapping[str, Any] | None) -> list[dict]:
    """The GPU rows of ``reports/metrics/code_biencoder_gpu/logs/device_runs.json``: per row
    of each run, the mean test Rank@10 over its seeds and the mean training minutes
    (``gpu_min``: wall time on the one GPU, the run's ``device``)."""
    return [{"row": row, "device": run.get("device", "GPU"), "steps": run["choice"]["steps"],
             "max_length": run.get("max_length"), "batch_size": run.get("batch_size"),
             "layers": run.get("layers"),
             "rank_at_10": sum(s["test_rank_at_10"] for s in seeds) / len(seeds),
             "gpu_min": sum(s["seconds"] for s in seeds) / len(seeds) / 60, "n_seeds": len(seeds)}
            for run in (device_runs or {}).get("runs", [])
            for row, seeds in run.get("finals", {}).items() if seeds]


def _layer_key(p: dict) -> str:
    return "every layer" if p["layers"] == "all" else f"top {p['layers']}"  # not a loss name


def _caption(curve: Mapping[str, Any], name: str, gpu: Sequence[dict]) -> str:
    """The figure's caption, its numbers read from the curve's config and the GPU runs."""
    g0 = gpu[0] if gpu else {}
    return (f"Each CPU point is a budget (blocks trained x steps of "
            f"{curve.get('config', {}).get('batch_size', '?')} pairs x tokens), its learning "
            "rate chosen on validation MRR, its test Rank@10 from one seed; lines join a "
            "layer count's points in order of steps; x: CPU time of the process in minutes "
            "(log scale; measured on a shared 2-core machine, where waiting threads also "
            "count, so a point's minutes are noisy). Dashed line and grey band: "
            f"{name} and its 95 % CI."
            + (f" Right: the GPU rows (layers: {g0.get('layers')}, {g0.get('max_length')} tokens, "
               f"{g0.get('batch_size')} pairs a step, {g0.get('steps')} steps; mean of their "
               "seeds), training minutes a seed on one GPU (scripts/biencoder_gpu.sh, its "
               "rows sharing the GPU), not by this curve's script." if gpu else ""))


def curve_plot(curve: Mapping[str, Any], bm25: Mapping[str, float], gpu: Sequence[dict]):
    """A :class:`contrastlab.reporting.Plot` of the curve (nothing drawn without points);
    ``bm25``: ``{"value", "low", "high", "label"}``, the strongest baseline's test Rank@10
    and 95 % CI (fractions); ``gpu``: :func:`gpu_points`."""
    pts = curve_points(curve)
    name = bm25.get("label", "the strongest baseline")

    @styled
    def draw(path: Path):
        import matplotlib.pyplot as plt

        if not pts:
            return False
        fig, axes = plt.subplots(1, 2 if gpu else 1, figsize=(10.5, 4.2), squeeze=False,
                                 gridspec_kw={"width_ratios": [3, 1]} if gpu else None, sharey=True)
        ax = axes[0][0]
        for key in dict.fromkeys(_layer_key(p) for p in pts):
            for tokens, marker in ((64, "o"), (128, "s"), (256, "D")):
                s2 = sorted((p for p in pts if _layer_key(p) == key and p["max_length"] == tokens),
                            key=lambda p: p["steps"])
                if s2:
                    ax.plot([p["total_cpu_min"] for p in s2], [100 * p["test"]["rank_at_10"] for p in s2],
                            marker=marker, label=f"{key}, {tokens} tokens")
        from matplotlib.ticker import NullFormatter, ScalarFormatter

        ax.set_xscale("log")
        lo, hi = min(p["total_cpu_min"] for p in pts), max(p["total_cpu_min"] for p in pts)
        ax.set_xticks([t for t in (1, 2, 5, 10, 20, 50, 100, 200) if lo / 1.5 <= t <= hi * 1.5])
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("CPU-minutes (cache + training + selection), one seed")
        ax.set_ylabel("test Rank@10 (%)")
        for a in axes[0]:  # the band on every panel
            a.axhspan(100 * bm25["low"], 100 * bm25["high"], color="0.85", zorder=0)
            a.axhline(100 * bm25["value"], color="0.4", linestyle="--", zorder=1)
        ax.legend(loc="upper left", title="trained", ncols=2)
        if gpu:  # the GPU rows against their minutes of one GPU
            g = axes[0][1]
            for p in gpu:
                g.plot([p["gpu_min"]], [100 * p["rank_at_10"]], marker="D", linestyle="none", color="C3")
            g.set_xlabel(f"GPU-minutes ({gpu[0]['device'].replace('NVIDIA ', '')})")
            g.set_xlim(0, 1.3 * max(p["gpu_min"] for p in gpu))
        fig.suptitle(f"Bi-encoder ({curve.get('config', {}).get('loss')}): test Rank@10 against "
                     f"training compute; band: {name}")
        save(fig, path.with_suffix(".svg"), path)

    return Plot(f"How much compute it takes to beat {name}", "code_compute_curve.png",
                _caption(curve, name, gpu), draw)


def curve_table(curve: Mapping[str, Any]):
    """A :class:`contrastlab.reporting.Table` of the CPU points (cheapest first)."""
    cfg = curve.get("config", {})

    def margin(p: dict) -> str:
        m = p.get("margin_val_hits_at_10")
        if m is None:
            return "-"
        return f"{m:+d}" + (" (fragile)" if abs(m) < 0.01 * cfg.get("n_val", 0) else "")

    rows = [[p["label"], f"{p['lr']:.0e}", f"{100 * p['val']['rank_at_10']:.1f}", margin(p),
             f"{100 * p['test']['rank_at_10']:.1f}", f"{p['test']['mrr']:.3f}",
             f"{p['cache_cpu_min']:.1f}", f"{p['train_cpu_min']:.1f}", f"{p['total_cpu_min']:.1f}"]
            for p in curve_points(curve)]
    return Table("Compute curve of the bi-encoder on the CPU (one seed a point)",
                 ["budget", "lr (val. MRR)", "val R@10 %", "margin (val. hits)", "test R@10 %",
                  "test MRR", "cache CPU-min", "train CPU-min", "total CPU-min"], rows,
                 note=(f"{cfg.get('loss')} at temperature {cfg.get('temperature')}, "
                       f"{cfg.get('batch_size')} pairs a step, learning rate from "
                       f"{', '.join(f'{x:g}' for x in cfg.get('lrs', []))} by validation MRR "
                       f"(seed {cfg.get('val_seed')}); the margin is the Rank@10 hits of the "
                       f"pick minus the runner-up's on {cfg.get('n_val')} validation queries "
                       f"(fragile: under {100 * FRAGILE_SHARE:g} % of them; a negative margin: "
                       "the runner-up had more hits but a lower MRR); "
                       "total = cache + training + the other learning rates' runs; "
                       f"{cfg.get('threads')} threads. scripts/compute_curve.py."))


def curve_finding(curve: Mapping[str, Any], bm25: Mapping[str, float], aim_cpu_min: float = 60.0) -> str:
    """One sentence: the cheapest CPU point at or above the baseline (and whether within
    ``aim_cpu_min``; whether the baseline's CI, when ``bm25`` has ``low`` / ``high``, contains
    it), or that none is and the best point's shortfall."""
    pts = curve_points(curve)
    if not pts:
        return ""
    ref, name = 100 * bm25["value"], bm25.get("label", "the strongest baseline")
    hit = [p for p in pts if 100 * p["test"]["rank_at_10"] >= ref]
    if hit:
        p = hit[0]
        within = "within" if p["total_cpu_min"] <= aim_cpu_min else "beyond"
        ci = (f"; {name}'s 95 % CI [{100 * bm25['low']:.1f}, {100 * bm25['high']:.1f}] "
              f"{'contains' if bm25['low'] <= p['test']['rank_at_10'] <= bm25['high'] else 'excludes'} it"
              if bm25.get("low") is not None else "")
        return (f"The cheapest CPU budget at or above {name} ({ref:.1f} %) is {p['label']}: "
                f"{100 * p['test']['rank_at_10']:.1f} % in {p['total_cpu_min']:.0f} CPU-minutes, "
                f"{within} the {aim_cpu_min:.0f}-minute aim (one seed, a point estimate{ci}).")
    best = max(pts, key=lambda p: p["test"]["rank_at_10"])
    largest = max(x["total_cpu_min"] for x in pts)
    return (f"No CPU budget measured reaches {name} ({ref:.1f} %): the best, {best['label']}, "
            f"reaches {100 * best['test']['rank_at_10']:.1f} % in {best['total_cpu_min']:.0f} "
            f"CPU-minutes ({100 * best['test']['rank_at_10'] - ref:+.1f} points); the largest "
            f"budget measured is {largest:.0f} CPU-minutes.")


PRESET_BEGIN = "<!-- cpu preset: generated by `python -m contrastlab.reporting.readme` -->"
PRESET_END = "<!-- /cpu preset -->"
#: The folder of the CPU-budget preset's results (``scripts/biencoder_cpu.sh``).
CPU_PRESET = "code_biencoder_cpu"


def render_cpu_preset(root: Path, aim_cpu_min: float = 60.0) -> str:
    """docs/code.md's generated paragraph on the CPU-budget preset: its budget, test Rank@10
    against BM25 (the README answer's ``more`` entry of the code track: the difference, its
    interval where its simulated coverage is in the target, the verdict and Holm p), its CPU
    minutes a seed (``logs/timings.json``) against ``aim_cpu_min``, and its BM25 fusion."""
    root = Path(root)
    mdir = root / "reports" / "metrics" / CPU_PRESET
    summary = read_json(root / "reports" / "summary.json", optional=True) or {}
    more = summary.get("answer", {}).get("code", {}).get("more", [])
    rows = sorted(mdir.glob("biencoder_*.json"))
    if not more or not rows:
        return (f"{PRESET_BEGIN}\nNo results of the CPU-budget preset yet "
                f"(`bash scripts/biencoder_cpu.sh`).\n{PRESET_END}")
    a, m = more[0], read_json(rows[0])
    cov = read_json(root / "reports/metrics/coverage.json").get("delta", {}).get("code_more1")
    ci = (f" [{100 * a['delta_low']:+.1f}, {100 * a['delta_high']:+.1f}]"
          if cov is not None and LO <= cov <= HI else "°")
    verdict = {"above": "significantly above", "below": "significantly below"}.get(a["verdict"], "level with")
    text = (f"**CPU-budget preset, measured.** `bash scripts/biencoder_cpu.sh` "
            f"(presets/code-biencoder-cpu.yaml: the top {m['layers']} blocks, {m['steps']} steps of "
            f"{m['batch_size']} pairs, {m['max_length']} tokens, lr {m['lr']:g}) reaches "
            f"{100 * a['best_loss_value']:.1f} % test Rank@10 over {m['n_seeds']} seeds, "
            f"{100 * a['delta']:+.1f}{ci} points against {a['baseline_label']}'s "
            f"{100 * a['baseline_value']:.1f} %: {verdict} it "
            f"(Holm {format_p(a['p'], floor=a.get('p_floor'))})")
    if (t := read_json(mdir / "logs" / "timings.json", optional=True)) is not None:
        per_seed = t[f"train_{rows[0].stem}"]["cpu_s"] / 60 / m["n_seeds"]
        cache = t["cache"]["cpu_s"] / 60
        within = "within" if per_seed + cache <= aim_cpu_min else "beyond"
        text += (f". A seed costs {per_seed:.0f} CPU-minutes (training and scoring; the lower-layer "
                 f"cache, built once, {cache:.0f} more), {within} the {aim_cpu_min:.0f}-minute aim")
    if (h := read_json(mdir / "hybrids_biencoder.json", optional=True)) is not None:
        f = h["hybrids"].get(f"fusion_{rows[0].stem}")
        if f:
            pick = f.get("pick") or {}
            fragile = (f"; a fragile pick, margin {pick['margin_items']:.1f} validation items"
                       if pick.get("fragile") else "")
            text += (f". Its BM25 score fusion (w = {f['weight']:g}, picked on validation{fragile}) "
                     f"reaches {100 * f['rank_at_10']:.1f} %")
    return (f"{PRESET_BEGIN}\n{text}. ° as in the report: no interval where its coverage was not "
            f"simulated in [0.92, 0.98].\n{PRESET_END}")
