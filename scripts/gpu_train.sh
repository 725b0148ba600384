#!/usr/bin/env bash
# Train several runs side by side on one CUDA device within a fixed wall time, each over one
# whole cosine cycle sized to that time:
#   OUT=out bash scripts/gpu_train.sh MINUTES NAME:INIT [NAME:INIT ...]
#   e.g. OUT=out bash scripts/gpu_train.sh 8 organic_g256:checkpoints/organic mlearn_g128:checkpoints/mlearn-mace
# NAME is a config in scripts/configs (NAME.yaml, run_dir runs/NAME); INIT the checkpoint given
# to --init ("-" for none). All runs first train two epochs together (the warm-up, whose learning
# rate does not depend on the epoch count); from the second epoch's time each run's `epochs` is
# set to what fits before the deadline, stage_two.start_epoch to the same fraction of it as in
# the config, and the run resumes to its end. The sized config is runs/NAME/sized.yaml (the
# run's config.json records it too). KERNEL_BACKEND (default: the config's) overrides `backend`.
# ALLOW_CPU=1 lets it run without a CUDA device (a smoke test of the sizing with small configs).
# Results: $OUT/NAME.tar.gz holds runs/NAME without its optimizer state (best checkpoint,
# metrics log, configs, parity plots); $OUT/NAME.log is the training output.
# The machine needs a CUDA build of torch; missing packages come from .whl/ when it exists
# (scripts/gpu_env.sh; on a machine without internet: ase, vesin and e3nn for the organic configs;
# the mlearn JSON files are read through pymatgen, so mlearn configs need pymatgen-core, monty,
# ruamel.yaml and orjson too: the four wheels, 4.9 MB, are all that reading them imports beyond
# numpy, scipy, sympy, networkx, pandas, matplotlib, requests, tabulate, joblib and tqdm, checked
# in a virtualenv holding only those). A device call carries at most 64 MiB of working tree with
# the wheels; the tracked files are 62 MB, 27 MB of them the earlier models' weights in docs/runs,
# which training does not read: move docs/runs aside for the call when the wheels do not fit.
# On a GPU a training step of small structures costs its ~2 700 operator launches rather than its
# arithmetic (about 120 ms at batch 4 on an H200 beside two other runs, for 128 and 256 channels
# alike; docs/benchmarks.md, "Training on a GPU"): configs meant for one use larger batches.
set -uo pipefail
cd "$(dirname "$0")/.."
MINUTES="${1:?usage: gpu_train.sh MINUTES NAME:INIT ...}"
shift
START=$(date +%s)
DEADLINE=$((START + ${MINUTES%.*} * 60))
RESERVE_S="${RESERVE_S:-60}"  # left at the end for the last validation, plots and the archives (the
# H200 call of 2026-12-04 with 25 s ended 48 s after its MINUTES; give the device call MINUTES + 1.5 min)
OUT="${OUT:-gpu_train_out}"
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS="${OMP_NUM_THREADS:-4}"
mkdir -p "$OUT"
source scripts/gpu_env.sh || exit 1
"$PY" -c "import torch; assert torch.cuda.is_available() or '${ALLOW_CPU:-}', 'no CUDA device'; print('torch', torch.__version__, torch.cuda.get_device_name() if torch.cuda.is_available() else 'cpu')" || exit 1

size_config() {  # size_config NAME EPOCHS|keep: write runs/NAME/sized.yaml
    "$PY" - "$1" "$2" "${KERNEL_BACKEND:-}" <<'PYEOF'
import sys
from pathlib import Path

import yaml

name, epochs, backend = sys.argv[1], sys.argv[2], sys.argv[3]
config = yaml.safe_load(Path(f"scripts/configs/{name}.yaml").read_text())
if epochs != "keep":
    fraction = config["stage_two"]["start_epoch"] / config["epochs"] if "stage_two" in config else None
    config["epochs"] = int(epochs)
    if fraction is not None:
        config["stage_two"]["start_epoch"] = max(config["schedule"].get("warmup_epochs", 0) + 1, round(fraction * int(epochs)))
if backend:
    config["backend"] = backend
Path(f"runs/{name}").mkdir(parents=True, exist_ok=True)
Path(f"runs/{name}/sized.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
print(f"{name}: epochs {config['epochs']}, stage two from {config.get('stage_two', {}).get('start_epoch')}")
PYEOF
}

train() {  # train NAME INIT [extra args]: one call of atomistic train, appending to the log
    local name="$1" init="$2"
    shift 2
    local init_args=()
    [ "$init" != "-" ] && init_args=(--init "$init")
    "$PY" -m atomistic.cli train "runs/$name/sized.yaml" "${init_args[@]}" "$@" >> "$OUT/$name.log" 2>&1
}

names=()
inits=()
for spec in "$@"; do
    names+=("${spec%%:*}")
    inits+=("${spec#*:}")
done

# 1. two epochs of each, side by side
pids=()
for i in "${!names[@]}"; do
    size_config "${names[$i]}" keep || exit 1
    train "${names[$i]}" "${inits[$i]}" --stop-after-epochs 2 &
    pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid"; done

# 2. each run sized to the time left, from its second epoch's seconds, then resumed to its end
pids=()
for i in "${!names[@]}"; do
    name="${names[$i]}"
    left=$((DEADLINE - $(date +%s) - RESERVE_S))
    epochs=$("$PY" - "runs/$name/metrics.jsonl" "$left" <<'PYEOF'
import json, sys

records = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
seconds = records[-1]["seconds"] * 1.05  # the second epoch; 5 % for the later validations' spread
print(records[-1]["epoch"] + max(1, int(float(sys.argv[2]) / seconds)))
PYEOF
    ) || { echo "$name: no epoch finished; see $OUT/$name.log"; continue; }
    size_config "$name" "$epochs"
    train "$name" "${inits[$i]}" --resume --max-minutes "$("$PY" -c "print(max(0.1, ($DEADLINE - $(date +%s) - $RESERVE_S) / 60))")" &
    pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid"; done

status=0
for name in "${names[@]}"; do
    tar czf "$OUT/$name.tar.gz" --exclude state.pt "runs/$name" || status=1
    echo "== $name"
    tail -n 4 "$OUT/$name.log"
done
echo "elapsed $(( $(date +%s) - START )) s"
exit "$status"
