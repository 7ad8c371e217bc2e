#!/usr/bin/env bash
# The code track's seed-corpus table: a retrieval corpus of >= 49,631 bodies (the size of
# the retrieval notes' corpus, docs/sources.md) from every installed distribution with
# >= 3 Python files, beside the default table.
#
#   bash scripts/seed_corpus.sh [WORKDIR]        (default WORKDIR: ../contrastlab-seed-corpus)
#
# It clones the committed HEAD into WORKDIR (your workspace and its DVC outputs stay as they
# are), switches that clone to presets/code-seed-corpus.yaml, runs the data stages and the
# baselines with DVC there (a rerun skips what is done; the teacher resumes from its shards),
# trains and evaluates every variant of the preset with the stage scripts (no tuning: the
# preset's learning rate and temperature), fuses BM25 with each (hybrid_code), and copies
# the metrics and per-query ranks to reports/metrics/code_seed_corpus/ and
# reports/data/code_seed_corpus/ of this checkout, where the report's second code table
# reads them (`dvc repro report`). Elapsed seconds per step go to
# reports/timings/code_seed_corpus.json (not a DVC output, not a metric).
set -euo pipefail
root=$(git rev-parse --show-toplevel)
work=${1:-"$root/../contrastlab-seed-corpus"}
if [ ! -d "$work/.git" ]; then
  git clone --quiet "$root" "$work"
fi
if [ ! -e "$work/.venv" ]; then
  ln -s "$root/.venv" "$work/.venv"
fi
# shellcheck disable=SC1091
source "$root/.venv/bin/activate"
cd "$work"
export PYTHONPATH="$work/src" CONTRASTLAB_MLFLOW="${CONTRASTLAB_MLFLOW:-0}"
python scripts/preset.py presets/code-seed-corpus.yaml

declare -A took
step() {  # step NAME CMD...: run, time, record
  local name=$1 t0
  shift
  t0=$(date +%s)
  "$@"
  took[$name]=$(( $(date +%s) - t0 ))
  echo "seed_corpus: $name took ${took[$name]} s"
}
step data_and_baselines dvc repro baselines_code
metrics="$root/reports/metrics/code_seed_corpus"
data="$root/reports/data/code_seed_corpus"
mkdir -p "$metrics" "$data"
variants=$(python -c "from contrastlab.params import load_params; print(' '.join(load_params('params.yaml').code.variants))")
io="--splits data/code/splits.parquet --teacher data/code/teacher --models data/code/models"
for v in $variants; do
  step "train_$v" python stages/train_code.py --variant "$v" $io --plots reports/plots/code_seed_corpus
  step "evaluate_$v" python stages/evaluate_code.py --variant "$v" $io --metrics "$metrics" --curves "$data" \
    --history "reports/plots/code_seed_corpus/$v.csv"
done
# BM25 fused with every trained predictor (scores built 1,024 queries at a time)
step hybrids python stages/hybrid_code.py --functions data/code/functions.parquet $io \
  --baselines reports/metrics/code/baselines.json \
  --metrics "$metrics/hybrids.json" --ranks "$data/hybrids_ranks.csv"
gzip -n -f "$data/hybrids_ranks.csv"   # 6.7 MB of plain CSV; the report reads the .gz
cp reports/metrics/code/baselines.json "$metrics/baselines.json"
cp reports/data/code/baselines_ranks.csv "$data/baselines_ranks.csv"
mkdir -p "$root/reports/timings"
for k in "${!took[@]}"; do echo "$k ${took[$k]}"; done | python -c "
import json, sys
print(json.dumps({f'{k}_s': int(v) for k, v in (l.split() for l in sys.stdin)}, indent=2, sort_keys=True))
" > "$root/reports/timings/code_seed_corpus.json"
python - "$metrics" <<'EOF'
import json, sys
from pathlib import Path
b = json.loads((Path(sys.argv[1]) / "baselines.json").read_text())
print(f"seed_corpus: corpus {b['corpus_size']:,} bodies; results in {sys.argv[1]}")
EOF
