#!/usr/bin/env bash
# train_or_resume.sh CONFIG [--run-dir DIR] [--init CHECKPOINT]: `atomistic train`, resuming the
# run when one was started in DIR (without --run-dir: runs/<config name>, the run_dir of the
# configs under scripts/configs).
set -euo pipefail
cd "$(dirname "$0")/.."
config="$1"; shift
run_dir="runs/$(basename "$config" .yaml)"
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
    case "${args[i]}" in
        --run-dir) run_dir="${args[i + 1]}" ;;
        --run-dir=*) run_dir="${args[i]#--run-dir=}" ;;
    esac
done
if [ -f "$run_dir/config.json" ]; then
    exec .venv/bin/atomistic train "$config" --resume "$@"
fi
exec .venv/bin/atomistic train "$config" "$@"
