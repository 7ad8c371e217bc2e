"""The multi-label presets' results in the report: one table per folder
``reports/metrics/multilabel_<preset>/`` holding a ``combined_table.json`` (written by
``scripts/multilabel_table.py --json`` from runs made under ``presets/multilabel-<preset>.yaml``,
e.g. bibtex, tmc2007-500 on all training rows), with the preset named in its title.

Intervals follow the report's coverage rule (:mod:`.coverage_rule`): an interval is printed
where the preset folder's own ``coverage.json`` (``bench/bench_coverage.py`` at that set's
shape and operating point) covers in [0.92, 0.98]; elsewhere (or with no such file) the
estimate alone, marked °.
"""

from __future__ import annotations

from pathlib import Path

from ..evaluation.stats import format_p
from ..io import read_json
from . import Cell, Table, short_label
from . import coverage_rule as rule
from .picks import unrecorded_note

__all__ = ["read_presets", "preset_tables", "preset_runs", "COLUMNS"]

#: table column -> the metric key of ``combined_table.json`` rows
COLUMNS = {"mAP": "map", "macro-F1 @val-t": "macro_f1_val_t", "micro-F1 @0.5": "micro_f1",
           "macro-F1 @0.5": "macro_f1"}


def _dataset(folder: Path, table: dict) -> str:
    """A preset table's data set: the prefix of ``<source>/<dataset>_<baseline>.json``."""
    src = Path(table["source"][table["baseline"]])
    hits = sorted(src.glob(f"*_{table['baseline']}.json"))
    if not hits:
        raise FileNotFoundError(f"{folder}: no run file of {table['baseline']} under {src}")
    return hits[0].name[: -len(f"_{table['baseline']}.json")]


def read_presets(metrics: Path, root: Path) -> list[tuple[Path, dict, str, str, dict[str, dict]]]:
    """``[(folder, combined table with absolute sources, data set, preset name, {row: run})]``
    of each ``<metrics>/multilabel_*/combined_table.json`` (``root``: where the table's
    ``source`` folders are relative to); a row's run is its metrics JSON
    ``<source>/<dataset>_<row>.json``. ``[]`` when no preset has a table.

    Raises:
        FileNotFoundError: a table's row has no run file ``<source>/<dataset>_<row>.json``.
    """
    out = []
    for f in sorted(Path(metrics).glob("multilabel_*/combined_table.json")):
        t = read_json(f)
        t["source"] = {k: str(Path(root) / v) for k, v in t["source"].items()}
        ds = _dataset(f.parent, t)
        runs = {n: read_json(Path(t["source"][n]) / f"{ds}_{n}.json") for n in t["rows"]}
        out.append((f.parent, t, ds, f.parent.name.replace("_", "-"), runs))
    return out


def preset_runs(presets: list) -> dict[str, dict[str, dict]]:
    """``{"<dataset> (preset <name>)": {row: run metrics}}`` of :func:`read_presets`' list: the
    runs behind each preset table, grouped as :func:`~contrastlab.reporting.picks.picks_table`
    takes them."""
    return {f"{ds} (preset {preset})": runs for _, _, ds, preset, runs in presets}


def preset_tables(cov: dict, metrics: Path, presets: list, digits: int = 2) -> list[Table]:
    """One :class:`~contrastlab.reporting.Table` per preset of :func:`read_presets`' list
    (``cov``: the coverage files, :func:`.coverage_rule.load`; ``metrics``: the folder holding
    the presets' folders): every row with mAP, macro-F1 at the validation threshold,
    micro-/macro-F1 at 0.5 (mean over seeds [95 % CI], or ° where the preset's coverage
    simulation does not cover) and macro-F1 @val-t against the strongest baseline (by
    validation mAP) with its Holm-corrected p; ``[]`` when no preset has one."""
    out = []
    for folder, t, ds, preset, runs in presets:
        title = f"{ds}, preset {preset} (presets/{preset}.yaml): test, %"
        rows = []
        for name, r in t["rows"].items():
            cells = []
            for col, m in COLUMNS.items():
                e = r[m]
                c = Cell(e["mean"], e.get("ci_low"), e.get("ci_high"), scale=100.0, digits=digits,
                         marks=tuple(k for k, on in (("↑", e.get("above")), ("↓", e.get("below"))) if on))
                ok = not e.get("no_cover") and rule.covers(cov, rule.coverage_key("multilabel", title, col, []))
                cells.append(rule.strip(c, ok))
            e = r["macro_f1_val_t"]
            vs = ("(strongest baseline)" if name == t["baseline"] else
                  f"{100 * e['delta']:+.{digits}f} ({format_p(e['p_holm'], e.get('n_resamples'), e.get('family_size', 1))})")
            rows.append([short_label("multilabel", name), str(t["n_seeds"][name]), *cells, vs])
        out.append(Table(title,
                         ["row", "seeds", *COLUMNS, "Δ macro-F1 @val-t vs strongest baseline (Holm p)"],
                         rows, note=(f"Runs made under presets/{preset}.yaml, outside the default "
                                     f"pipeline (docs/multilabel.md); {folder.name}/combined_table.json "
                                     "from `python scripts/multilabel_table.py --json`. Strongest "
                                     f"baseline by validation mAP: {short_label('multilabel', t['baseline'])}. "
                                     "↑/↓: significantly above / below it (paired bootstrap, Holm). "
                                     + rule.NOTE + unrecorded_note(metrics, folder.name))))
    return out
