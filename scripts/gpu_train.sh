#!/usr/bin/env bash
# Train the GPU-sized mlearn and organic models side by side on one CUDA device for a fixed
# wall time, resumably: a later call (with runs/<name> carried back from $OUT) continues them.
#   OUT=out bash scripts/gpu_train.sh [MINUTES]        (default 8)
# Results: $OUT/<name>.tar.gz holds runs/<name> (best checkpoint, metrics log, training state:
# unpack it in the repository root to continue there), $OUT/<name>.log the training output.
# The machine needs a CUDA build of torch; missing packages come from .whl/ when it exists.
set -uo pipefail
cd "$(dirname "$0")/.."
MINUTES="${1:-8}"
OUT="${OUT:-gpu_train_out}"
PY="${PYTHON:-python3}"
export PYTHONUNBUFFERED=1
mkdir -p "$OUT"
"$PY" -c "import atomistic" 2>/dev/null || export PYTHONPATH="$PWD:${PYTHONPATH:-}"
"$PY" -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'; print(torch.cuda.get_device_name())" || exit 1
pids=()
for name in mlearn_gpu organic_gpu; do
    resume=()
    [ -f "runs/$name/state.pt" ] && resume=(--resume)
    "$PY" -m atomistic.cli train "scripts/configs/$name.yaml" "${resume[@]}" --max-minutes "$MINUTES" \
        > "$OUT/$name.log" 2>&1 &
    pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
for name in mlearn_gpu organic_gpu; do
    tar czf "$OUT/$name.tar.gz" "runs/$name" || status=1
    tail -n 3 "$OUT/$name.log"
done
exit "$status"
