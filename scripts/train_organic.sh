#!/usr/bin/env bash
# Reproduce checkpoints/organic from the bundled BOTNet acetylacetone data.
# Re-running resumes an interrupted run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh dev
if [ -f runs/organic/state.pt ]; then
    .venv/bin/atomistic train scripts/configs/organic.yaml --resume
else
    .venv/bin/atomistic train scripts/configs/organic.yaml
fi
.venv/bin/python scripts/write_model_card.py checkpoints/organic --bar organic
