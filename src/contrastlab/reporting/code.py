"""Code retrieval track section of the comparison report: one table per corpus (the default
``code``, the seed-corpus preset's and the GPU bi-encoder's :data:`GPU_TABLE`, when present),
default vs tuned, the compute curve and the figures. The rows live in :mod:`.code_rows`,
the statistics in :mod:`.code_stats`; this module assembles the section, its tables and figures.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np

from ..evaluation.stats import baseline_p
from ..models.grid_picks import FRAGILE_SHARE, PLATEAU_SHARE
from ..io import read_json
from . import Inputs, Plot, Section, Table, load_params_of
from .code_figures import _rank_curve_figure, _training_figure
from .code_headline import _ci, _headline
from .code_rows import (CONTROL_HYBRID, REFERENCE_BASELINE, REFERENCES, TITLES, _contrastive,
                        _is_baseline, _is_hybrid, _order, _short, _title)
from .code_stats import (_load_table, _resolution, control_at_same_weight, default_vs_tuned,
                         strongest_baseline, table_stats)
from .compute_curve import curve_finding, curve_plot, curve_table, gpu_points
from .figures import Comparison, Panel, rows_from_stats
from .picks import picks_table, runs_in, unrecorded_note

__all__ = ["build_section", "REFERENCES", "TITLES"]


def _comparison(stats: dict, metrics: dict, names: list[str], baseline: str | None):
    """The table's Rank@10 as the report's first figure and headline (:mod:`.figures`)."""
    rows = rows_from_stats(
        stats["rank_at_10"]["best"], names,
        kind=lambda n: "baseline" if _is_baseline(n) else "hybrid" if _is_hybrid(n) else "loss",
        short=lambda n: _short(n, metrics.get(n)), title=lambda n: _title(n, metrics.get(n)),
        baseline=baseline)
    return Comparison("test Rank@10", [Panel("", rows)],
                      title="Signature -> body retrieval: test Rank@10, 95 % CI")


#: The column of each score fusion beside the control at the same weight.
SAME_W_COLUMN = "Δ R@10 vs control at the same w (pp, Holm p)"

_PICK_NOTE = ("Fusion weights: the centre of the plateau of weights whose validation MRR is within "
              f"{100 * PLATEAU_SHARE:g} % of the validation queries of the best (the same rule for the "
              "control and every trained fusion); margin: the fewest validation items (criterion x "
              "queries) whose change would move the pick; ‡ a pick decided by under "
              f"{100 * FRAGILE_SHARE:g} % of the validation items. ")
_NOT_RERUN_NOTE = ("† the committed weight was picked by the former rule (validation Rank@10) and "
                   "the new rule picks another, not rerun (its pick is in the metrics file). ")
_SAME_W_NOTE = ("'vs control at the same w': each trained fusion against BM25 + the untrained "
                "sentence embedding fused at that fusion's own weight (the control evaluated on the "
                "test queries at every grid weight), paired bootstrap on the same draws, Holm over "
                "the trained fusions; no comparison depends on which weight a fragile pick chose. ")


def _weight_cell(m: dict) -> str:
    """A score fusion's weight, its pick margin and flags (‡ fragile, † rule not rerun)."""
    pick = m.get("pick") or {}
    cell = f"w={m.get('weight'):g} (val"
    if pick.get("margin_items") is not None:
        cell += f"; margin {pick['margin_items']:.1f} items" + ("‡" if pick.get("fragile") else "")
    return cell + ")" + (" †" if m.get("pick_rule_not_rerun") else "")


def _mark(e: dict) -> str:
    """``▲ `` / ``▼ `` of a row significantly above / below its baseline, else nothing."""
    return "▲ " if e.get("beats_baseline") else "▼ " if e.get("below_baseline") else ""


def _vs_control_cell(n: str, m: dict, vs_ctl: dict) -> str:
    """The trained fusion's Rank@10 difference to the control at its own weight."""
    if n == CONTROL_HYBRID:
        return "(the control)"
    if (e := vs_ctl.get(n)) is None:
        return "-"
    # no interval: the coverage of a difference's interval is not simulated (the ° rule)
    return (f"{_mark(e)}{100 * e['delta_vs_baseline']:+.1f} (control {100 * e['control_mean']:.1f} % at "
            f"w={m.get('weight'):g}; Holm {baseline_p(e)})")


def _hyperparameters(n: str, m: dict) -> tuple[str, str, str]:
    """``(seeds, kept epoch, hyperparameters)`` cells of a row."""
    if _is_baseline(n):
        return "-", "-", (f"λ={m['lambda']:g}" if "lambda" in m else
                          f"k1={m['k1']:g}, b={m['b']:g}" if "k1" in m else
                          f"{m['max_tokens']} tokens" if "max_tokens" in m else "-")
    seeds = str(m.get("n_seeds", "-"))
    if _is_hybrid(n):
        return seeds, "-", (f"k={m.get('rrf_k', 60):g}" if n.startswith("rrf_") else _weight_cell(m))
    hp = (f"lr={m.get('lr', float('nan')):.2g}"
          + (f", τ0={m['temperature']:.3g}" if _contrastive(m.get("loss")) else "")
          + (" (tuned)" if m.get("tuned") else ""))
    return seeds, (f"{m['steps']} steps" if "steps" in m else
                   f"{m.get('best_epoch', float('nan')):.1f}"), hp


def _row(n: str, m: dict, stats: dict, baseline: str | None, vs_ctl: dict, digits: int) -> list:
    """One row of a code table: the Rank@k and MRR cells with CIs, then the rest."""
    r10 = stats["rank_at_10"]["best"][n]
    vs_base = ("(strongest baseline)" if n == baseline else "-" if "delta_vs_baseline" not in r10
               else f"{_mark(r10)}{100 * r10['delta_vs_baseline']:+.1f} ({baseline_p(r10)})")
    return [_title(n, m), *(_ci(st["best"][n], k != "mrr", digits) for k, st in stats.items()),
            f"{m.get('median_rank', float('nan')):.0f}", *_hyperparameters(n, m),
            f"{r10.get('p_best', float('nan')):.2f}", "yes" if r10.get("in_mcs") else "no",
            vs_base] + ([_vs_control_cell(n, m, vs_ctl)] if vs_ctl else [])


def _note(metrics: dict, names: list[str], stats: dict, baseline: str | None, size: tuple,
          vs_ctl: dict, references: bool) -> str:
    """A code table's caption: the test set, the rows, the cells and the tests."""
    n_q, n_groups, corpus = size
    hybrids = ("Hybrids: BM25 fused with each trained predictor per seed, by reciprocal-rank "
               "fusion (Cormack et al. 2009, k=60) or by z-scored score fusion with its weight "
               "chosen on validation. Every grid (ridge λ, BM25 k1 and b, fusion weight) was "
               "searched on the validation repositories only. " + _PICK_NOTE
               + (_NOT_RERUN_NOTE if any(m.get("pick_rule_not_rerun") for m in metrics.values()) else "")
               + (_SAME_W_NOTE if vs_ctl else ""))
    return (f"{n_q:,} test signatures from {n_groups} held-out repository groups against all "
            f"{corpus:,} extracted bodies (chance Rank@10 = 10/{corpus:,} = {1000 / corpus:.2f} %). "
            + _CELLS_NOTE + (f" ({_title(baseline, metrics.get(baseline))})" if baseline else "")
            + ", Holm-corrected paired-bootstrap p; ▲/▼ significantly above/below ("
            + _resolution(stats) + "). Trained rows: "
            "mean over seeds; 'from the zero-shot map': the predictor adds a correction to the "
            "centred zero-shot map and epoch 0 (the map itself) may be kept by early stopping. "
            + (hybrids if any(_is_hybrid(n) for n in names) else
               "No BM25 hybrid rows here (not computed for this table). Every grid (ridge λ, "
               "BM25 k1 and b) was searched on the validation repositories only. ")
            + ("Hyperparameters marked (tuned) were chosen on the validation repositories "
               "with an equal budget per loss (tune_code)."
               if any(m.get("tuned") for m in metrics.values()) else
               "No trained row of this table is tuned: every loss uses the hyperparameters shown.")
            + (" Italic rows: the retrieval notes' (docs/sources.md) reported numbers "
               "(Qwen2.5-Coder-3B layer 18, corpus 49,631), comparable in corpus size only."
               if references else ""))


_CELLS_NOTE = (
    "Target space centred on the training bodies' mean for every learned or zero-shot "
    "row except the raw zero-shot one; BM25 scores identifier sub-tokens (snake_case and "
    "camelCase split, lower-cased, the whole identifier kept too; ties count against the "
    "true body); the sentence-embedding row is the teacher as its authors use it (all "
    "layers, mean pooling, normalised, raw space). Cells: mean [95 % CI], bias-corrected "
    "(BC) percentile CI (Efron & Tibshirani 1993, Sec. 14.3) from the bootstrap over seeds "
    "and over test queries clustered by repository group (related distributions form one group; "
    "near-duplicate bodies never straddle the split). P(best): share of draws in which the row "
    "has the highest Rank@10; in MCS: member of the 95 % model confidence set (Hansen, Lunde & "
    "Nason 2011) over every row, baselines included. 'vs strongest baseline': Rank@10 "
    "difference in points to the baseline with the best validation Rank@10")
_COLUMNS = ["row", "R@1 % [CI]", "R@5 % [CI]", "R@10 % [CI]", "MRR [CI]", "median rank", "seeds",
            "kept epoch", "hyperparameters", "P(best)", "in MCS",
            "Δ R@10 vs strongest baseline (pp, Holm p)"]


def _table(loaded: dict, title: str, digits: int, references: bool) -> tuple[Table, str]:
    """A code table (its comparison attached) and its headline paragraph."""
    metrics, ranks, repo = loaded["metrics"], loaded["ranks"], loaded["repo"]
    names = _order(metrics)
    baseline = strongest_baseline(metrics)
    same_w = control_at_same_weight(metrics, loaded.get("controls", {}))
    stats = table_stats({n: ranks[n] for n in names}, repo, baseline=baseline, same_w=same_w)
    vs_ctl = stats["rank_at_10"].get("control_same_w", {})
    size = (int(ranks[names[0]].shape[1]), int(len(np.unique(repo))),
            int(max(m.get("corpus_size", 0) for m in metrics.values())))
    rows = [_row(n, metrics[n], stats, baseline, vs_ctl, digits) for n in names]
    if references:
        rows += [[f"*{rname}*", r1, "-", r10s, *["-"] * 8] + (["-"] if vs_ctl else [])
                 for rname, r1, r10s, rc, _ in REFERENCES]
    table = Table(title, _COLUMNS + ([SAME_W_COLUMN] if vs_ctl else []), rows,
                  note=_note(metrics, names, stats, baseline, size, vs_ctl, references))
    table.comparison = _comparison(stats, metrics, names, baseline)
    return table, _headline(stats, metrics, names, *size, ranks, baseline)


#: The folder of the bi-encoder trained with every layer on a GPU (scripts/biencoder_gpu.sh).
GPU_TABLE = "code_biencoder_gpu"


def _gpu_name(device: str) -> str:
    """``NVIDIA H100 80GB HBM3`` -> ``H100`` (the model number), else the name unchanged."""
    m = re.search(r"\b([A-Z]{1,2}\d{2,4}[A-Za-z]?)\b", device)
    return m.group(1) if m else device


def _gpu_table(inp: Inputs, digits: int):
    """``(table, headline, device)`` of the GPU bi-encoder folder, or ``None``."""
    loaded = _load_table(inp, GPU_TABLE)
    m = next((m for m in loaded["metrics"].values() if m.get("device")), None) if loaded else None
    if m is None:
        return None
    dev = m["device"]
    t, h = _table(loaded, f"Bi-encoder with every layer trained, one {dev} "
                  "(scripts/biencoder_gpu.sh; presets/code-biencoder-gpu.yaml)", digits, False)
    t.note += (f" Produced on one {dev} by the GPU route's stage scripts (`scripts/biencoder_gpu.sh`: "
               "train_biencoder through the launcher, then hybrid_biencoder) with "
               f"presets/code-biencoder-gpu.yaml over params.yaml (every layer and the embeddings "
               f"trained, {m['max_length']} tokens, batch {m['batch_size']} per GPU, bf16 autocast), "
               "not by `dvc repro` (the table above is the two-core pipeline). "
               f"{m.get('selection', '')}; the same for every row (equal budget). Search and "
               f"hard-negative mining: {m.get('index', 'faiss')}. {m.get('run_note', '')}"
               + unrecorded_note(inp.metrics, GPU_TABLE))
    return t, h, dev


#: Tables of the code track's presets, after the default one: (folder, preset, script,
#: title, reference rows of the retrieval notes, panel title in the first figure or None: a
#: panel only for a preset on the default corpus and split, whose BM25 is the default's).
PRESET_TABLES = (
    ("code_seed_corpus", "seed-corpus", "scripts/seed_corpus.sh",
     "Seed-corpus preset", True, None),
    ("code_biencoder_cpu", "biencoder-cpu", "scripts/biencoder_cpu.sh",
     "Bi-encoder at the compute curve's best CPU budget", False, "2 CPU cores, CPU-budget preset"),
)


def _preset_table(inp: Inputs, spec: tuple, digits: int) -> tuple[Table, str] | None:
    """A preset's table (``PRESET_TABLES`` entry) and headline, or ``None`` without results;
    the note names the hash of ``presets/code-<preset>.yaml``'s ``code`` section."""
    from ..params import params_hash
    from ..params.code import CodeParams

    folder, preset, script, title, references, _ = spec
    loaded = _load_table(inp, folder)
    if loaded is None:
        return None
    t, h = _table(loaded, f"{title} (bash {script}; presets/code-{preset}.yaml)", digits,
                  references)
    path = Path(inp.root) / "presets" / f"code-{preset}.yaml"
    try:
        import yaml

        ph = params_hash(CodeParams(**yaml.safe_load(path.read_text(encoding="utf-8"))["code"]))
    except Exception:  # noqa: BLE001 - a missing or edited preset: say so, do not fail
        ph = "unavailable"
    t.note += (f" Produced by `bash {script}` with `presets/code-{preset}.yaml` "
               f"(params `code` hash `{ph}`), not by params.yaml's `code` section."
               + unrecorded_note(inp.metrics, folder))
    return t, h


def _with_panels(c, presets: list, gpu: tuple | None):
    """The comparison with the preset tables' panels (``PRESET_TABLES``' panel title) and the
    GPU table's: the GPU panel is the secondary (the headline states it), the presets' follow
    in the summary and the README (``more``)."""
    extra = [(t[0].comparison.panels[0], spec[5]) for spec, t in presets if spec[5]]
    more = tuple(range(1, 1 + len(extra)))
    if gpu is not None:
        extra.append((gpu[0].comparison.panels[0], f"one {_gpu_name(gpu[2])}, every layer trained"))
    if not extra:
        return c
    for p, title in [(c.panels[0], "2 CPU cores"), *extra]:
        p.title = title
    return dataclasses.replace(c, panels=[c.panels[0], *(p for p, _ in extra)], more=more,
                               secondary=None if gpu is None else len(extra))


def _trained(loaded: dict) -> tuple[list[str], dict[str, str]]:
    """The trained rows of a table (no baseline, no hybrid) and their titles."""
    names = [n for n in _order(loaded["metrics"]) if not _is_baseline(n) and not _is_hybrid(n)]
    return names, {n: _title(n, loaded["metrics"][n]) for n in names}


def _picks_table(inp: Inputs, loaded: dict) -> Table | None:
    """The early-stopping epochs of the trained rows (final and default runs, the seed-corpus
    preset's) and their margins, with how many runs the other rule would have stopped
    elsewhere (records from before ``code.train.early_stopping`` kept the Rank@10 argmax and
    name the MRR rule's epochs ``mrr_plateau_seed``)."""
    runs = {"default corpus, final runs": {n: loaded["metrics"][n] for n in _trained(loaded)[0]},
            "default corpus, declared configuration": runs_in(inp.metrics / "code/default"),
            "seed-corpus preset, final runs": runs_in(inp.metrics / "code_seed_corpus")}
    recs = [r["picks"]["early_stopping"] for by in runs.values() for r in by.values()
            if "early_stopping" in (r.get("picks") or {})]
    rules = {}  # rule -> [runs, runs the other rule would stop elsewhere, fragile runs]
    for r in recs:
        alt = r.get("other_rule_seed", r.get("mrr_plateau_seed", []))
        c = rules.setdefault(r.get("rule", "rank_at_10"), [0, 0, 0])
        c[0] += len(r["chosen_seed"])
        c[1] += sum(a != b for a, b in zip(r["chosen_seed"], alt))
        c[2] += r["fragile_seeds"]
    said = {"mrr_plateau": (f"keep the centre of the plateau of epochs within {100 * PLATEAU_SHARE:g} % "
                            "of the validation queries of the best validation MRR (patience on MRR; "
                            "margin: the smallest change of one epoch's MRR, in queries, that "
                            "moves the pick)", "the Rank@10 rule"),
            "rank_at_10": ("keep the first epoch with the highest validation Rank@10 (a count "
                           "of queries; margin: the gap to the runner-up epoch, 0 when a tie "
                           "kept the earlier epoch)", "the MRR rule")}
    return picks_table(
        runs, titles={"early_stopping": "early-stopping epoch"}, items="queries",
        group="Corpus and runs",
        note=" ".join(f"{n} runs {said[rule][0]}; {said[rule][1]} would have kept another epoch "
                      f"in {moved}, and {fragile} are fragile." for rule, (n, moved, fragile) in rules.items())
        + " Neighbouring epochs score almost alike, so a small change moves most picks to a "
          "neighbouring epoch under either rule (under the MRR rule, to one within "
          f"{100 * PLATEAU_SHARE:g} % of the queries of the best MRR). " + _tuning_rule(inp)
        + "The seed-corpus preset's runs predate the MRR rule (code.train.early_stopping).")


def _tuning_rule(inp: Inputs) -> str:
    """What the committed studies of the searched code variants scored their trials by, read
    from their choices (``reports/tuned/code/<variant>.json``)."""
    code = load_params_of(inp.root).code
    files = [inp.tuned / "code" / f"{v}.json" for v, var in code.variants.items() if var.search]
    objs = sorted({read_json(f).get("objective") for f in files if f.is_file()} - {None})
    said = {"val_mrr": "validation MRR (the MRR rule)",
            "val_rank_at_10": "validation Rank@10 (the Rank@10 rule)"}
    return ("The tuning studies scored each trial by the kept epochs' "
            + " or ".join(said.get(o, o) for o in objs) + " (code.tune.early_stopping). "
            if objs else "")


def _plots(inp: Inputs, loaded: dict) -> list[Plot]:
    """The figures after the tables, of the default corpus's trained rows."""
    names, titles = _trained(loaded)
    corpus = max(int(m.get("corpus_size", 0)) for m in loaded["metrics"].values())
    return [Plot("Test Rank@k against k", "code_rank_at_k.png",
                 "Share of test signatures whose body is in the top k (mean over seeds); dotted: chance.",
                 lambda p: _rank_curve_figure(inp.data / "code", names, p, corpus, titles,
                                              loaded["ranks"].get(REFERENCE_BASELINE))),
            Plot("Training curves (seed 0)", "code_training_curves.png",
                 "Left: training loss per epoch; right: validation Rank@10 against the full "
                 "corpus (early-stopping criterion).",
                 lambda p: _training_figure(inp.plots / "code", names, p, titles))]


def build_section(root: Inputs | Path, figures_dir: Path, digits: int = 3) -> Section | None:
    """The code track's report section, or ``None`` when no code metrics exist yet."""
    inp = Inputs.of(root)
    loaded = _load_table(inp, "code")
    if loaded is None:
        return None
    layer = load_params_of(inp.root).code.teacher.layer
    table, headline = _table(loaded, "Signature -> body retrieval, default corpus "
                             f"(installed distributions, MiniLM layer {layer})", digits, False)
    presets = [(spec, t) for spec in PRESET_TABLES if (t := _preset_table(inp, spec, digits)) is not None]
    gpu = _gpu_table(inp, digits)
    curve = _compute_curve(inp, table.comparison.panels[0].baseline())
    return Section(
        "code", "Code retrieval: signature -> body embedding", headline=headline,
        comparison=_with_panels(table.comparison, presets, gpu),
        tables=[table, default_vs_tuned(inp, loaded), _picks_table(inp, loaded),
                *(t[0] for _, t in presets), gpu and gpu[0], curve and curve[1]],
        notes=[*(f"{spec[3]}: {t[1]}" for spec, t in presets), gpu and "GPU bi-encoder table: " + gpu[1],
               curve and "Compute curve: " + curve[2]],
        figures=[*_plots(inp, loaded), curve and curve[0]]).build(figures_dir)


def _compute_curve(inp: Inputs, bm25) -> tuple | None:
    """``(Plot, Table, finding)`` of the bi-encoder's compute curve (:mod:`.compute_curve`)
    against the strongest baseline's test Rank@10 and CI, or ``None``."""
    curve = read_json(inp.metrics / "code_compute_curve" / "curve.json", optional=True)
    if bm25 is None or bm25.low is None or curve is None:
        return None
    runs = read_json(inp.metrics / GPU_TABLE / "logs" / "device_runs.json", optional=True)
    band = {"value": bm25.estimate, "low": bm25.low, "high": bm25.high, "label": bm25.short}
    return curve_plot(curve, band, gpu_points(runs)), curve_table(curve), curve_finding(curve, band)
