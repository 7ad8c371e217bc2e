#!/usr/bin/env bash
# The code track's GPU bi-encoder table on a CUDA machine: presets/code-biencoder-gpu.yaml (every
# layer trained, bf16, 256 tokens, batch 128 per GPU), then each further preset named, in order,
# e.g. presets/code-biencoder-gpu-lease.yaml (what a 15-minute lease runs: no study).
#
#   bash scripts/biencoder_gpu.sh [PRESET ...]     (WORKDIR=... default ../contrastlab-biencoder-gpu)
#
# It writes params.yaml with the presets applied to WORKDIR (this checkout's params.yaml is not
# touched), builds the token-id cache there, and runs the stage scripts as dvc.yaml's cmd runs
# them: train_biencoder@<row> through `python -m contrastlab.launch` (torchrun, nproc from the
# preset: one rank per visible GPU), the rows at once (one process each; ROWS_AT_ONCE=0 runs
# them one after another), then hybrid_biencoder (BM25 fusions). Each row as the presets
# declare it (no study); TUNED=reports/tuned/code uses the tuned files of a study run with the
# same presets (`dvc repro tune_biencoder` after scripts/preset.py), never the CPU studies'. The metrics and per-query ranks go to
# reports/metrics/code_biencoder_gpu/ and reports/data/code_biencoder_gpu/ with the default
# table's BM25 beside them, and scripts/collect_gpu_biencoder.py records the device and the
# seconds (logs/device_runs.json). Then `dvc repro report`. It needs data/code/functions.parquet
# and splits.parquet (`dvc repro split_by_repo`) and, for FAISS on the GPU, a GPU build of FAISS
# (else FAISS on the CPU: the metrics' `index` says which ran).
set -euo pipefail
root=$(git rev-parse --show-toplevel)
work=${WORKDIR:-"$root/../contrastlab-biencoder-gpu"}
PY=${PYTHON:-python}
mkdir -p "$work/logs"
cd "$root"
export PYTHONPATH="$root/src:$root/stages${PYTHONPATH:+:$PYTHONPATH}" CONTRASTLAB_MLFLOW="${CONTRASTLAB_MLFLOW:-0}"
presets=(presets/code-biencoder-gpu.yaml "$@")
# ALLOW_CPU=1: a smoke run on the CPU (with a preset that sets device: cpu), device "cpu"
device=$("$PY" -c "import os, torch; ok = torch.cuda.is_available(); assert ok or os.environ.get('ALLOW_CPU') == '1', 'scripts/biencoder_gpu.sh needs a CUDA device'; print(torch.cuda.get_device_name(0) if ok else 'cpu')")
cp params.yaml "$work/params.yaml"
for p in "${presets[@]}"; do "$PY" scripts/preset.py "$p" --params "$work/params.yaml"; done
metrics="$root/reports/metrics/code_biencoder_gpu"
data="$root/reports/data/code_biencoder_gpu"
mkdir -p "$metrics/logs" "$data"
io=(--params "$work/params.yaml" --functions data/code/functions.parquet --splits data/code/splits.parquet)
"$PY" stages/biencoder_cache.py "${io[@]}" --out "$work/cache.safetensors"
read -r nproc rows < <("$PY" -c "from contrastlab.params import load_params; be = load_params('$work/params.yaml').code.biencoder; print(be.nproc, ' '.join(be.rows))")
: > "$work/logs/times.txt"
train() {  # one row through the launcher; its log and wall seconds to $work/logs
  local r=$1 s
  s=$(date +%s)
  "$PY" -m contrastlab.launch --standalone --nproc_per_node="$nproc" stages/train_biencoder.py \
    --row "$r" "${io[@]}" --cache "$work/cache.safetensors" --tuned "${TUNED:-$work/no_study}" \
    --models "$work/models" --metrics "$metrics" --data "$data" --plots "$work/plots" \
    > "$work/logs/$r.log" 2>&1 || { echo "FAILED $r (log: $work/logs/$r.log)"; tail -n 5 "$work/logs/$r.log"; return 1; }
  echo "$r rc=0 wall_s=$(( $(date +%s) - s ))" >> "$work/logs/times.txt"
  tail -n 1 "$work/logs/$r.log"
}
status=0
if [ "${ROWS_AT_ONCE:-1}" = 1 ]; then
  pids=()
  for r in $rows; do train "$r" & pids+=($!); done
  for p in "${pids[@]}"; do wait "$p" || status=1; done
else
  for r in $rows; do train "$r" || status=1; done
fi
[ $status = 0 ] || exit $status
"$PY" stages/hybrid_biencoder.py "${io[@]}" --models "$work/models" \
  --baselines reports/metrics/code/baselines.json --metrics "$metrics/hybrids_biencoder.json" \
  --ranks "$data/hybrids_biencoder_ranks.csv"
gzip -n -f "$data/hybrids_biencoder_ranks.csv"
cp reports/metrics/code/baselines.json "$metrics/baselines.json"
cp reports/data/code/baselines_ranks.csv "$data/baselines_ranks.csv"
"$PY" scripts/collect_gpu_biencoder.py --metrics "$metrics" --logs "$work/logs" --device "$device" \
  $(printf -- '--preset %s ' "${presets[@]}")
echo "biencoder_gpu: results in $metrics; the query index of each row in $work/models/<row>/index"
