"""Measure README command 1 (``bash scripts/run.sh``) on a fresh clone, stage by stage, into
``reports/fresh_clone.json`` (``tests/foundation/test_fresh_clone.py`` checks the README
against every ``reports/fresh_clone*.json``; a measurement on another machine type is kept
under its own name, e.g. ``reports/fresh_clone_amd.json``, with the CPU model in ``machine``).
Run it inside the clone, with nothing else on the machine:

    d=$(mktemp -d) && git clone . "$d" && cd "$d" && python3 scripts/fresh_clone_timing.py

It runs what the script runs, ``bash scripts/env.sh`` and then one ``dvc repro``, and reads
DVC's output as it comes: a stage's wall seconds run from its ``Running stage '<name>'`` line to
the next such line (or the end), so they include DVC's check of the unchanged stages after it.
CPU seconds (user + system of every process, ``resource.getrusage(RUSAGE_CHILDREN)``) are
measured for the environment and for ``dvc repro`` as a whole, not per stage. Stages that DVC
found unchanged (committed outputs, or inputs rebuilt byte-equal) are ``skipped_unchanged``.
"""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import sys
import time
from datetime import date
from pathlib import Path


def timed(cmd: list[str], env: dict | None = None, on_line=None) -> tuple[int, float, float]:
    """``(exit status, wall s, CPU s of its processes)`` of one command; each output line is
    echoed and passed to ``on_line(line, seconds since the start)``."""
    r0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.time()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in p.stdout:
        sys.stdout.write(line)
        if on_line:
            on_line(line, time.time() - t0)
    rc = p.wait()
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return rc, time.time() - t0, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``; ``"unknown CPU"`` elsewhere): run times differ
    by machine type, so a measurement names its own."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")),
                        "unknown CPU")
    except OSError:
        return "unknown CPU"


def main() -> int:
    root = Path(__file__).resolve().parents[1]
    os.chdir(root)
    out = root / "reports" / "fresh_clone.json"
    rc, wall, cpu = timed(["bash", "scripts/env.sh"])
    env = {**os.environ, "PYTHONUNBUFFERED": "1",
           "PATH": f"{root / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    starts, skipped = [], []

    def on_line(line: str, t: float) -> None:
        m = re.match(r"Running stage '([^']+)'", line)
        if m:
            starts.append((m.group(1), t))
        m = re.match(r"Stage '([^']+)' didn't change", line)
        if m:
            skipped.append(m.group(1))

    rc2, wall2, cpu2 = timed(["dvc", "repro"], env=env, on_line=on_line) if rc == 0 else (rc, 0.0, 0.0)
    ends = [t for _, t in starts[1:]] + [wall2]
    rec = {"what": "bash scripts/run.sh on a fresh clone without a DVC remote: the environment, "
                   "then dvc repro (every stage whose outputs live in the DVC cache reruns; "
                   "scripts/fresh_clone_timing.py)",
           "commit": subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip(),
           "date": date.today().isoformat(),
           "machine": f"{os.cpu_count()} CPU cores ({cpu_model()}), idle; cpu_s counts the run's own "
                      "processes only, per stage not measured (null)",
           "exit_status": rc or rc2, "env": {"wall_s": round(wall), "cpu_s": round(cpu)},
           "stages": [{"stage": s, "wall_s": round(e - t), "cpu_s": None} for (s, t), e in zip(starts, ends)],
           "skipped_unchanged": skipped, "repro_wall_s": round(wall2), "repro_cpu_s": round(cpu2)}
    rec["skipped_unchanged"].sort()
    rec["total_wall_s"] = round(wall + wall2)
    rec["total_cpu_s"] = round(cpu + cpu2)
    tmp = out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(rec, indent=1) + "\n", encoding="utf-8")
    tmp.replace(out)
    print(f"fresh_clone_timing: {rec['total_wall_s'] / 60:.0f} min wall, "
          f"{rec['total_cpu_s'] / 60:.0f} CPU-min -> {out}")
    return rec["exit_status"]


if __name__ == "__main__":
    sys.exit(main())
