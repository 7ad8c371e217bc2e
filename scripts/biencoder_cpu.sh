#!/usr/bin/env bash
# The code track's CPU-budget bi-encoder table (presets/code-biencoder-cpu.yaml): the compute
# curve's best budget under 60 CPU-minutes, on the pipeline's seeds, with its BM25 fusions.
#
#   bash scripts/biencoder_cpu.sh [WORKDIR]     (default WORKDIR: ../contrastlab-biencoder-cpu)
#
# It writes params.yaml with the preset applied to WORKDIR (this checkout's params.yaml is
# not touched), builds the preset's lower-layer cache there, runs the stage scripts
# train_biencoder and hybrid_biencoder with that params file (the row's declared learning rate
# and temperature: no study), and writes the metrics and per-query ranks to
# reports/metrics/code_biencoder_cpu/ and reports/data/code_biencoder_cpu/, with the default
# table's BM25 (reports/metrics/code/baselines.json, the same corpus and split) beside them,
# where the report's code section reads them (`dvc repro report`). It needs
# data/code/functions.parquet and splits.parquet (`dvc repro split_by_repo`). CPU and wall
# seconds of every step (all threads, /usr/bin/time) go to
# reports/metrics/code_biencoder_cpu/logs/timings.json (not a DVC output; the report and
# docs/code.md read the CPU minutes a seed from it).
set -euo pipefail
root=$(git rev-parse --show-toplevel)
work=${1:-"$root/../contrastlab-biencoder-cpu"}
mkdir -p "$work"
# shellcheck disable=SC1091
source "$root/.venv/bin/activate"
cd "$root"
export PYTHONPATH="$root/src:$root/stages" CONTRASTLAB_MLFLOW="${CONTRASTLAB_MLFLOW:-0}"
[ -f data/code/splits.parquet ] || dvc repro split_by_repo
cp params.yaml "$work/params.yaml"
python scripts/preset.py presets/code-biencoder-cpu.yaml --params "$work/params.yaml"
metrics="$root/reports/metrics/code_biencoder_cpu"
data="$root/reports/data/code_biencoder_cpu"
mkdir -p "$metrics/logs" "$data"
io=(--params "$work/params.yaml" --functions data/code/functions.parquet --splits data/code/splits.parquet)
timings="$metrics/logs/timings.json"
step() {  # step NAME CMD...: run it; its CPU seconds (user + system, children included) to $timings
  local name=$1
  shift
  /usr/bin/time -f "%U %S %e" -o "$work/$name.time" "$@"
  python - "$timings" "$name" "$work/$name.time" <<'PY'
import json, sys
from pathlib import Path
out, name, t = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]).read_text().split()
d = json.loads(out.read_text()) if out.exists() else {}
d[name] = {"cpu_s": round(float(t[0]) + float(t[1]), 1), "wall_s": round(float(t[2]), 1)}
out.write_text(json.dumps(d, indent=2, sort_keys=True) + "\n")
print(f"biencoder_cpu: {name} {d[name]['cpu_s'] / 60:.1f} CPU-minutes, {d[name]['wall_s'] / 60:.1f} min wall")
PY
}
step cache python stages/biencoder_cache.py "${io[@]}" --out "$work/cache.safetensors"
rows=$(python -c "from contrastlab.params import load_params; print(' '.join(load_params('$work/params.yaml').code.biencoder.rows))")
for r in $rows; do
  step "train_$r" python stages/train_biencoder.py --row "$r" "${io[@]}" --cache "$work/cache.safetensors" \
    --tuned "$work/no_study" --models "$work/models" --metrics "$metrics" --data "$data" \
    --plots "$work/plots"
done
step hybrids python stages/hybrid_biencoder.py "${io[@]}" --models "$work/models" \
  --baselines reports/metrics/code/baselines.json --metrics "$metrics/hybrids_biencoder.json" \
  --ranks "$data/hybrids_biencoder_ranks.csv"
gzip -n -f "$data/hybrids_biencoder_ranks.csv"
cp reports/metrics/code/baselines.json "$metrics/baselines.json"
cp reports/data/code/baselines_ranks.csv "$data/baselines_ranks.csv"
echo "biencoder_cpu: results in $metrics"
