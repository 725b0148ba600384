#!/usr/bin/env bash
# Set everything up and run the main job: the REST server with the shipped default model
# (SevenNet-0) on http://127.0.0.1:8000 (ATOMISTIC_HOST / ATOMISTIC_PORT to change).
# Extra arguments go to `atomistic serve`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh server
exec .venv/bin/atomistic serve "$@"
