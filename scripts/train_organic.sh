#!/usr/bin/env bash
# Reproduce checkpoints/organic from the bundled BOTNet acetylacetone data: organic_v6
# (64 channels, l <= 2 hidden features, 300 epochs from scratch, about 2.2 h on two CPU threads),
# then two warm restarts, organic_v8 from it and organic_v9 from organic_v8 (250 epochs each,
# about 1.4 h on one thread each). Re-running resumes an interrupted run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh dev
ORGANIC_NOTE="The second of two warm restarts of \`organic_v6\` (\`scripts/train_organic.sh\`): \`organic_v6\` (\`scripts/configs/organic_v6.yaml\`: 64 channels, l ≤ 2 hidden features, 300-epoch cosine from 0.01, energy weight 10 and then 100 after epoch 225), \`organic_v8\` (\`scripts/configs/organic_v8.yaml\` with \`--init runs/organic_v6/best\`: 250 epochs, cosine from 0.004, energy weight 100 after epoch 190) and this model, \`organic_v9\` (\`scripts/configs/organic_v9.yaml\` with \`--init runs/organic_v8/best\`: the same cycle from 0.002). Training time in all: 2.2 h + 1.5 h + 1.4 h (sums of epoch times) on a 2-core CPU. Earlier models on the same validation split (RMSE, meV/molecule and meV/Å, validation and then the whole 600 K file): \`organic_v3\` (32 channels, l ≤ 1; shipped before this one, weights in \`docs/runs/organic_v3/best\`) 2.0 and 10.9, 7.3 and 51.2; \`organic_v6\` 1.9 and 11.4, 8.0 and 63.6; \`organic_v8\` 1.5 and 9.4, 7.2 and 58.8. Known limit, measured with \`scripts/support_errors.py\`: 91 of the 500 600 K structures hold a bond shorter than any in the 300 K training file (most often O–H below 0.936 Å); on them this model's force RMSE is 114.8 meV/Å against 32.9 on the other 409 (\`organic_v3\`: 89.7 and 37.7). It fits the 300 K distribution better than the 32-channel model and extrapolates to compressed bonds worse, so expect larger force errors wherever a simulation compresses bonds beyond the 300 K data."
bash scripts/train_or_resume.sh scripts/configs/organic_v6.yaml
bash scripts/train_or_resume.sh scripts/configs/organic_v8.yaml --init runs/organic_v6/best
bash scripts/train_or_resume.sh scripts/configs/organic_v9.yaml --init runs/organic_v8/best
.venv/bin/python scripts/publish_checkpoint.py runs/organic_v9/best organic
.venv/bin/python scripts/write_model_card.py checkpoints/organic --bar organic --note "$ORGANIC_NOTE"
