#!/usr/bin/env bash
# train_or_resume.sh CONFIG [--init CHECKPOINT]: `atomistic train`, resuming the run when one
# was started in runs/<config name> (the run_dir of the configs under scripts/configs).
set -euo pipefail
cd "$(dirname "$0")/.."
config="$1"; shift
run_dir="runs/$(basename "$config" .yaml)"
if [ -f "$run_dir/config.json" ]; then
    exec .venv/bin/atomistic train "$config" --resume "$@"
fi
exec .venv/bin/atomistic train "$config" "$@"
