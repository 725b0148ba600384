#!/usr/bin/env bash
# Create (or reuse) the project's virtualenv and install atomistic into it.
# Usage: scripts/setup_env.sh [EXTRAS]   e.g. scripts/setup_env.sh dev,server
# torch 2.13.0 (CPU build) is installed first only when the venv holds no torch,
# so a CUDA build the user installed there is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${ATOMISTIC_VENV:-.venv}"
EXTRAS="${1:-}"
PYTHON="${PYTHON:-python3}"
if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV"
fi
PY="$VENV/bin/python"
"$PY" -m pip install --quiet --upgrade pip >/dev/null
if ! "$PY" -c "import torch" >/dev/null 2>&1; then
    "$PY" -m pip install --quiet "torch==2.13.0"
fi
if [ -n "$EXTRAS" ]; then
    "$PY" -m pip install --quiet -e ".[${EXTRAS}]"
else
    "$PY" -m pip install --quiet -e .
fi
