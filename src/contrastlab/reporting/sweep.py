"""Sweep table: the ``dvc exp`` experiments side by side, in ``reports/sweep.md``
(``python scripts/sweep.py``): one column per experiment, a ``Settings`` table (rev, state,
the params that differ) and one table per track of ``reports/summary.json``.

Shape read (DVC 3.x, checked with 3.67): a list of baseline entries
``{"rev", "name", "data": {"rev", "timestamp", "params": {file: {"data": {...}}},
"metrics": {file: {"data": {...}} | {"error": ...}}, "deps", "outs", "meta"}, "error",
"experiments": [{"name", "executor": null | {"state": ...}, "revs": [<entry>]}] | null}``;
the first entry is the workspace (``"rev": "workspace"``), left out unless asked for.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Sequence

from ..errors import InputError
from . import TRACKS, Table, markdown_table

PARAMS_FILE = "params.yaml"
METRICS_FILE = "reports/summary.json"
MISSING = "-"


@dataclass
class ExpRow:
    """One column of the sweep table: ``kind`` ``baseline`` | ``experiment`` | ``workspace``;
    ``state`` ``done`` | ``queued`` | ``running`` | ``failed``; ``params`` flat
    ``{dotted.name: value}`` (other files' keys prefixed ``<file>:``); ``metrics``
    ``{track: {variant: {metric: value}}}``."""

    name: str
    rev: str
    kind: str
    state: str
    params: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)


def _flat(obj: Any, prefix: str = "") -> dict[str, Any]:
    """Nested dicts to ``{"a.b.c": value}`` (lists stay values, as DVC shows them)."""
    if not isinstance(obj, dict):
        return {prefix: obj}
    return {kk: vv for k, v in obj.items()
            for kk, vv in _flat(v, f"{prefix}.{k}" if prefix else str(k)).items()}


def _file_data(section: Any, file: str) -> dict[str, Any] | None:
    """``section[file]["data"]`` when present and a dict, else None (missing or DVC error)."""
    entry = section.get(file) if isinstance(section, dict) else None
    data = entry.get("data") if isinstance(entry, dict) else None
    return data if isinstance(data, dict) else None


def _metrics(data: dict[str, Any], metrics_file: str) -> dict[str, dict[str, dict[str, float]]]:
    """``{track: {variant: {metric: value}}}`` of ``metrics_file`` (numbers only)."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for track, variants in (_file_data(data.get("metrics"), metrics_file) or {}).items():
        for variant, ms in variants.items() if isinstance(variants, dict) else ():
            vals = {m: float(v) for m, v in (ms.items() if isinstance(ms, dict) else ())
                    if isinstance(v, (int, float)) and not isinstance(v, bool)}
            if vals:
                out.setdefault(track, {})[variant] = vals
    return out


def _params(data: dict[str, Any]) -> dict[str, Any]:
    files = data.get("params") or {}
    return {f"{'' if file == PARAMS_FILE else f'{file}:'}{k}": v
            for file in files for k, v in _flat(_file_data(files, file) or {}).items()}


def _entry_row(entry: dict[str, Any], kind: str, metrics_file: str, name: str | None = None,
               executor: Any = None) -> ExpRow:
    rev = str(entry.get("rev") or "")
    data = entry.get("data") if isinstance(entry.get("data"), dict) else {}
    x = executor.get("state") if isinstance(executor, dict) else None  # the executor's state
    state = {"success": "done"}.get(x, str(x)) if x else "failed" if entry.get("error") else "done"
    label = name or entry.get("name") or (rev if rev == "workspace" else rev[:7])
    return ExpRow(label, rev, kind, state, _params(data), _metrics(data, metrics_file))


def experiment_rows(exp_show: Any, metrics_file: str = METRICS_FILE,
                    include_workspace: bool = False) -> list[ExpRow]:
    """The sweep's columns from parsed ``dvc exp show --json`` output (the module docstring's
    shape), in DVC's order: each baseline commit followed by its experiments.

    Raises:
        InputError: ``exp_show`` is not a list of entries with a ``rev``, or an experiment
            has no ``revs`` list.
    """
    if not isinstance(exp_show, list) or not all(isinstance(e, dict) and "rev" in e
                                                 for e in exp_show):
        raise InputError("not the shape `dvc exp show --json` prints (DVC 3.x): expected a "
                         "list of {rev, name, data, error, experiments} objects")
    rows: list[ExpRow] = []
    for base in exp_show:
        if base["rev"] == "workspace":
            rows += [_entry_row(base, "workspace", metrics_file)] if include_workspace else []
            continue
        rows.append(_entry_row(base, "baseline", metrics_file))
        for exp in base.get("experiments") or []:
            revs = exp.get("revs") if isinstance(exp, dict) else None
            if not isinstance(revs, list) or not revs or not isinstance(revs[0], dict):
                raise InputError(f"experiment {exp!r:.80}: expected a non-empty `revs` list")
            rows.append(_entry_row(revs[0], "experiment", metrics_file,
                                   name=exp.get("name") or revs[0].get("name"),
                                   executor=exp.get("executor")))
    seen = Counter(r.name for r in rows)
    for r in rows:  # one column per experiment: a repeated name gets its short rev
        if seen[r.name] > 1 and r.kind != "workspace":
            r.name = f"{r.name} ({r.rev[:7]})"
    return rows


def differing_params(rows: Sequence[ExpRow]) -> list[str]:
    """Param names whose value is not the same in every row (a missing key counts as a
    value), in first-seen order."""
    keys = list(dict.fromkeys(k for r in rows for k in r.params))
    return [k for k in keys if len({json.dumps(r.params[k], sort_keys=True, default=str)
                                    if k in r.params else None for r in rows}) > 1]


def _fmt(v: Any, digits: int | None = None) -> str:
    """A cell: ``-`` for None, floats with ``digits`` decimals when given (metrics; params
    keep their own spelling), lists as JSON."""
    if v is None:
        return MISSING
    if isinstance(v, float) and digits is not None:
        return f"{v:.{digits}f}"
    if isinstance(v, (list, dict)):
        return json.dumps(v)
    return str(v)


def sweep_tables(rows: Sequence[ExpRow], digits: int | None = None) -> list[Table]:
    """``Settings`` (rev, state, differing params) and one metrics table per track, one column
    per experiment; ``digits``: decimals (default: the baseline's ``report.digits``, else 4).

    Raises:
        InputError: ``rows`` is empty.
    """
    if not rows:
        raise InputError("no experiments and no baseline to tabulate")
    if digits is None:
        digits = next((r.params["report.digits"] for r in rows if r.kind == "baseline"
                       and isinstance(r.params.get("report.digits"), int)), 4)
    cols = [r.name for r in rows]
    diff = differing_params(rows)
    settings = [["rev", *[r.rev if r.rev == "workspace" else r.rev[:7] for r in rows]],
                ["state", *[r.state for r in rows]],
                *([k, *[_fmt(r.params.get(k)) for r in rows]] for k in diff)]
    note = ("Params: only those that differ between the columns."
            if diff else "Params: the same in every column.")
    tables = [Table("Settings", ["setting", *cols], settings, note=note)]
    tracks = list(dict.fromkeys(t for r in rows for t in r.metrics))
    tracks = [t for t in TRACKS if t in tracks] + sorted(t for t in tracks if t not in TRACKS)
    for track in tracks:
        pairs = list(dict.fromkeys((v, m) for r in rows
                                   for v, ms in r.metrics.get(track, {}).items() for m in ms))
        metric_names = list(dict.fromkeys(m for _, m in pairs))
        one = len(metric_names) == 1
        body = [[v if one else f"{v} {m}",
                 *[_fmt(r.metrics.get(track, {}).get(v, {}).get(m), digits) for r in rows]]
                for v, m in pairs]
        tables.append(Table(f"{track}: {', '.join(metric_names)}",
                            ["variant" if one else "variant metric", *cols], body))
    return tables


def render_sweep(rows: Sequence[ExpRow], digits: int | None = None,
                 metrics_file: str = METRICS_FILE) -> str:
    """The whole ``sweep.md`` (Markdown): a title, how it was made, the tables; or the
    no-experiments message when ``rows`` has no ``experiment`` row."""
    head = ["# contrastlab: sweep across DVC experiments", ""]
    n = sum(r.kind == "experiment" for r in rows)
    if not n:  # the page says how to make some
        base = ", ".join(f"{r.name} ({r.rev[:7]})" for r in rows if r.kind == "baseline") or "HEAD"
        return "\n".join(head) + (f"\nNo DVC experiments on {base}: nothing to compare. Queue some "
                                  "and run them, then rerun this command:\n\n"
                                  "    dvc exp run --queue -S 'graph.tune.trials=8,16,32'\n"
                                  "    dvc exp run --run-all -j 1\n"
                                  "    python scripts/sweep.py\n")
    head += [f"{n} experiment(s) from `dvc exp show --json`, one column each after their "
             f"baseline commit; metrics from `{metrics_file}` (`report.headline`), `{MISSING}` "
             "where an experiment has none (queued, failed, track not run). MLflow: search "
             "``tags.dvc_exp_name = '<column name>'`` in the track's experiment.", "", ""]
    parts = [markdown_table(t) for t in sweep_tables(rows, digits)]
    return "\n".join(head) + "\n\n".join(parts) + "\n"
