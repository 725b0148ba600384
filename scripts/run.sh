#!/usr/bin/env bash
# Set everything up and run the main job: predictions of the shipped default model on the
# bundled example structures.  Extra arguments go to `atomistic predict`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh server
exec .venv/bin/atomistic predict "$@"
