#!/usr/bin/env bash
# Reproduce checkpoints/mlearn-small and checkpoints/mlearn from the bundled mlearn data.
# Long: tens of minutes per stage on two CPU cores. Re-running resumes interrupted runs.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh dev
.venv/bin/python scripts/train_mlearn_small.py --epochs 30 --run-dir runs/default --out checkpoints/mlearn-small
.venv/bin/python scripts/mlearn_small_model_card.py
if [ -f runs/mlearn/state.pt ]; then
    .venv/bin/atomistic train scripts/configs/mlearn.yaml --init mlearn-small --resume
else
    .venv/bin/atomistic train scripts/configs/mlearn.yaml --init mlearn-small
fi
.venv/bin/python scripts/write_model_card.py checkpoints/mlearn --bar mlearn
