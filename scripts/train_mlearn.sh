#!/usr/bin/env bash
# Reproduce checkpoints/mlearn from the bundled mlearn data (scripts/configs/mlearn_v2.yaml:
# 120 epochs, about 3 h on one CPU core with the fused kernels), and checkpoints/mlearn-small.
# Re-running resumes interrupted runs.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh dev
.venv/bin/python scripts/train_mlearn_small.py --epochs 30 --run-dir runs/default --out checkpoints/mlearn-small
.venv/bin/python scripts/mlearn_small_model_card.py
if [ -f runs/mlearn_v2/config.json ]; then
    .venv/bin/atomistic train scripts/configs/mlearn_v2.yaml --resume
else
    .venv/bin/atomistic train scripts/configs/mlearn_v2.yaml
fi
.venv/bin/python scripts/publish_checkpoint.py runs/mlearn_v2/best mlearn
.venv/bin/python scripts/write_model_card.py checkpoints/mlearn --bar mlearn
