#!/usr/bin/env bash
# Reproduce checkpoints/organic from the bundled BOTNet acetylacetone data
# (scripts/configs/organic_v2.yaml: ~300 epochs, about 1.5 h on one CPU core).
# Re-running resumes an interrupted run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh dev
if [ -f runs/organic_v2/config.json ]; then
    .venv/bin/atomistic train scripts/configs/organic_v2.yaml --resume
else
    .venv/bin/atomistic train scripts/configs/organic_v2.yaml
fi
.venv/bin/python scripts/publish_checkpoint.py runs/organic_v2/best organic
.venv/bin/python scripts/write_model_card.py checkpoints/organic --bar organic
