#!/usr/bin/env bash
# Set up the same environment (with the development extras) and run the test suite.
# Extra arguments go to pytest, e.g. `scripts/test.sh -m slow`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh dev,server
.venv/bin/ruff check atomistic server tests scripts
exec .venv/bin/python -m pytest "$@"
