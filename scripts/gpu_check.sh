#!/usr/bin/env bash
# One prepared check for a GPU machine (written for an H200; finishes in about 10 minutes):
#   1. kernel parity tests on CUDA (reference, e3nn, cueq, triton; float32 and float64),
#   2. atomistic vs mace-torch (+ cuEquivariance) at equal hyperparameters, medium model
#      (128 channels, hidden L 2), float32 and float64: atoms/s, ratio, peak GPU memory and
#      microseconds per atom per MD step (energy + forces),
#   3. the largest bulk Si system that fits for one energy + forces step.
# Results go to ${OUT:-gpu_check_out}/ (log + JSON).
#
# The machine needs a CUDA build of torch. Packages it lacks come as wheels (scripts/gpu_env.sh),
# on a GPU machine without internet:
#   .whl/       project: e3nn ase vesin safetensors typer rich pyyaml, pytest; kernels:
#               cuequivariance cuequivariance-torch cuequivariance-ops-torch-cu13 (or -cu12), triton
#   .whl-peer/  peer: mace-torch==0.3.16 e3nn==0.4.4 torch-ema matscipy prettytable opt-einsum-fx
#               (built into .venv-mace on top of the system torch)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-gpu_check_out}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
LOG="$OUT/gpu_check.log"
source scripts/gpu_env.sh || exit 1

{
    echo "# gpu_check $(date -u +%FT%TZ)"
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
    "$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name())"
    for module in cuequivariance_torch triton pytest ase vesin e3nn; do
        "$PY" -c "import $module" 2>/dev/null || echo "# missing python module: $module"
    done

    echo "## 1. kernel parity on CUDA"
    timeout 240 "$PY" -m pytest -q -p no:cacheprovider tests/test_kernels.py -m "not slow" -x 2>&1 | tail -15

    echo "## 2. atomistic vs mace-torch, medium model (128 channels, hidden L 2, max_ell 3)"
    PEER_ARGS=(--peer-system-site-packages)
    "$PY" -c "import cuequivariance_torch" 2>/dev/null && PEER_ARGS+=(--peer-cueq)
    timeout 300 "$PY" scripts/bench_inference.py mace --device cuda --backend auto --channels 128 --hidden-lmax 2 \
        --repeats 20 --json "${PEER_ARGS[@]}" > "$OUT/bench_mace_cuda.json"
    "$PY" - "$OUT/bench_mace_cuda.json" <<'PYEOF'
import json, sys
report = json.load(open(sys.argv[1]))
print(f"# {report['machine']}; backend {report['backend']}; peer cueq {report['peer_cueq']}")
for row in report["cases"]:
    print(f"{row['structure']:<13} {row['dtype']:<8} ours {row['ours_atoms_per_s']:>10.0f} atoms/s "
          f"({1e6 / row['ours_atoms_per_s']:.2f} us/atom/step)  mace {row['mace_atoms_per_s']:>10.0f} atoms/s  "
          f"ratio {row['ratio']:.2f}  peak MiB {row['ours_peak_mb']:.0f} / {row['mace_peak_mb']:.0f}")
PYEOF

    echo "## 3. largest bulk Si that fits (energy + forces, float32, medium model)"
    timeout 150 "$PY" scripts/bench_largest.py --device cuda --channels 128 --hidden-lmax 2
} 2>&1 | tee "$LOG"
