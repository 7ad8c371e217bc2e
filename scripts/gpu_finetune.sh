#!/usr/bin/env bash
# The fine-tuning comparison on a CUDA machine: every MiniLM layer trained in bf16
# (presets/finetune-gpu.yaml), the five trained variants and the frozen / head baselines,
# all at once on one GPU (NPROC=N: each variant under torchrun on N ranks, one after another).
#
#   dvc repro finetune_data                      # the HumanEval variants (CPU, sandboxed)
#   bash scripts/gpu_finetune.sh [override.yaml ...]
#   python stages/finetune_evaluate.py --data data/finetune/humaneval/variants.parquet \
#       --metrics-dir reports/metrics/finetune_gpu --runs-dir data/finetune_gpu/runs
#   python stages/finetune_index.py --data data/finetune/humaneval/variants.parquet \
#       --cache data/finetune_gpu/cache.safetensors --index data/finetune_gpu/index \
#       --override presets/finetune-gpu.yaml
#   python stages/finetune_summary.py --data data/finetune/humaneval/variants.parquet \
#       --metrics-dir reports/metrics/finetune_gpu --preset presets/finetune-gpu.yaml
#
# Writes reports/metrics/finetune_gpu/ (<variant>.json, items/<variant>.npz, logs/) and
# data/finetune_gpu/ (token-id cache, embeddings). Outside dvc.yaml on purpose: the default
# pipeline runs on CPU; the GPU numbers are committed with the device named (docs/finetune.md).
set -euo pipefail
PY=${PYTHON:-python}
NPROC=${NPROC:-1}
OV=(--override presets/finetune-gpu.yaml)
for f in "$@"; do OV+=(--override "$f"); done
M=${METRICS_DIR:-reports/metrics/finetune_gpu}
D=${DATA_DIR:-data/finetune_gpu}
mkdir -p "$M/logs" "$D"
export CONTRASTLAB_MLFLOW=${CONTRASTLAB_MLFLOW:-0} CONTRASTLAB_THREADS=${CONTRASTLAB_THREADS:-2}

"$PY" - <<'EOF'
import torch
assert torch.cuda.is_available(), "scripts/gpu_finetune.sh needs a CUDA device"
print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}, "
      f"bf16 {torch.cuda.is_bf16_supported()}, {torch.cuda.device_count()} GPU(s)")
EOF
V=data/finetune/humaneval/variants.parquet
"$PY" stages/finetune_cache.py "${OV[@]}" --data "$V" --out "$D/cache.safetensors"

run() {  # one variant, its log in $M/logs
    local v=$1
    if [ "$NPROC" -gt 1 ]; then
        torchrun --standalone --nproc_per_node="$NPROC" stages/finetune_encoder.py --variant "$v" \
            "${OV[@]}" --data "$V" --cache "$D/cache.safetensors" --metrics-dir "$M" --runs-dir "$D/runs"
    else
        "$PY" stages/finetune_encoder.py --variant "$v" "${OV[@]}" --data "$V" \
            --cache "$D/cache.safetensors" --metrics-dir "$M" --runs-dir "$D/runs"
    fi > "$M/logs/$v.log" 2>&1 || { echo "FAILED $v (log: $M/logs/$v.log)"; tail -5 "$M/logs/$v.log"; return 1; }
    tail -1 "$M/logs/$v.log"
}

VARIANTS=${VARIANTS:-"mulsupcon all any simdis bce head frozen"}
status=0
if [ "$NPROC" -gt 1 ]; then
    for v in $VARIANTS; do run "$v" || status=1; done
else  # one process per variant: a small model leaves one GPU mostly idle per process
    pids=()
    for v in $VARIANTS; do run "$v" & pids+=($!); done
    for p in "${pids[@]}"; do wait "$p" || status=1; done
fi
exit $status
