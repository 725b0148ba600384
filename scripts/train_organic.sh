#!/usr/bin/env bash
# Reproduce checkpoints/organic from the bundled BOTNet acetylacetone data: organic_v2
# (300 epochs from scratch, about 1.5 h on one CPU core), then a warm restart from it,
# organic_v3 (250 epochs, about 1.2 h). Re-running resumes an interrupted run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh dev
bash scripts/train_or_resume.sh scripts/configs/organic_v2.yaml
bash scripts/train_or_resume.sh scripts/configs/organic_v3.yaml --init runs/organic_v2/best
.venv/bin/python scripts/publish_checkpoint.py runs/organic_v3/best organic
.venv/bin/python scripts/write_model_card.py checkpoints/organic --bar organic
