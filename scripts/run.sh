#!/usr/bin/env bash
# Set everything up and run the main job: the REST server with the shipped default model
# (SevenNet-0) and the crystal-tensor models `elastic` and `dielectric` on
# http://127.0.0.1:8000 (ATOMISTIC_HOST / ATOMISTIC_PORT to change).
# Extra arguments go to `atomistic serve` (and replace the model list).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh server
if [ $# -eq 0 ]; then
    set -- --model default --model elastic --model dielectric
fi
exec .venv/bin/atomistic serve "$@"
