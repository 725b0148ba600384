#!/usr/bin/env bash
# Reproduce checkpoints/elastic and checkpoints/dielectric (and their model cards) from the
# bundled tensor data. The EMT elastic data set itself is made by scripts/make_emt_elastic.py
# (about an hour on two cores); pass --regenerate to rebuild it first.
# Re-running resumes interrupted training runs.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh dev
if [ "${1:-}" = "--regenerate" ]; then
    rm -f data/tensors/elastic_emt.extxyz
    .venv/bin/python scripts/make_emt_elastic.py --n 4000 --seed 0 --workers 2
fi
for name in elastic dielectric; do
    bash scripts/train_or_resume.sh "scripts/configs/$name.yaml"
    .venv/bin/python scripts/tensor_model_card.py "checkpoints/$name"
done
