"""Evaluate checkpoints/mlearn-small on its held-out validation split (per element) and write
its MODEL_CARD.md from the manifest and these measurements.

    python scripts/mlearn_small_model_card.py [--checkpoint checkpoints/mlearn-small]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from train_mlearn_small import ELEMENTS  # noqa: E402

from atomistic import load_potential  # noqa: E402
from atomistic.data.datasets import read_mlearn_json, seeded_split  # noqa: E402
from atomistic.training.metrics import evaluate  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--checkpoint", default=str(ROOT / "checkpoints" / "mlearn-small"))
    parser.add_argument("--data", default=str(ROOT / "data" / "mlearn"))
    args = parser.parse_args()
    checkpoint = Path(args.checkpoint)
    manifest = json.loads((checkpoint / "manifest.json").read_text())
    seed = manifest["provenance"]["hyperparameters"]["seed"]
    potential = load_potential(checkpoint, dtype="float64")
    rows = []
    per_element = {}
    for element in ELEMENTS:
        _, valid = seeded_split(read_mlearn_json(Path(args.data) / element / "training.json"), 0.1, seed)
        m = evaluate(potential, valid).summary()
        per_element[element] = m
        rows.append(
            f"| {element} | {m['n_structures']} | {m['energy_mae_mev_per_atom']:.1f} | {m['force_mae_ev_per_ang']:.3f} "
            f"| {m['force_rmse_ev_per_ang']:.3f} | {m['stress_mae_gpa']:.2f} |"
        )
    hp = manifest["provenance"]["hyperparameters"]
    encoder = manifest["architecture"]["encoder"]["config"]
    card = f"""# Model card: `mlearn-small`

A small MACE-class equivariant potential for **Li, Si, Ge and Mo**, trained on the mlearn
DFT data. It is the project's small model for examples and fast end-to-end tests; it is not a
universal potential and should not be used for other elements (they are rejected) or for
chemistry far from the training data (mixtures of these elements were never seen).

## Training data

{manifest["provenance"]["training_data"]}.
{manifest["provenance"]["split"]}: {manifest["provenance"]["n_train"]} training and
{manifest["provenance"]["n_valid"]} validation structures (bulk, strained, vacancy, surface and
AIMD snapshots). The official mlearn test sets were not used.
Reference energies E0 (eV): {json.dumps({k: round(v, 4) for k, v in manifest["e0s"].items()})}
({manifest["provenance"]["e0s_method"]}).

## Architecture and hyperparameters

MACE-class encoder: cutoff {encoder["cutoff"]} Å, {encoder["num_bessel"]} Bessel functions with a
polynomial envelope (p = {encoder["envelope_exponent"]}), spherical harmonics to L = {encoder["max_ell"]},
{encoder["channels"]} channels, node features to L = {encoder["hidden_lmax"]}, {encoder["num_layers"]} layers,
correlation order {encoder["correlation"]}, radial MLP {encoder["radial_hidden"]}, average neighbours
{encoder["avg_num_neighbors"]}. Energy head: linear + MLP readout, scale {manifest["scale"]:.4f} eV.
Training: {hp["epochs"]} epochs, batch {hp["batch_size"]} structures, AdamW with peak learning rate
{hp["lr"]} (cosine schedule with warm-up), EMA of weights; loss on energy per atom, forces and
stress ({json.dumps(hp["training"]["loss"])}). Best validation epoch: {manifest["provenance"]["epoch"]}.
Weights stored in {manifest["weights_dtype"]}; evaluation below in float64.

## Held-out validation metrics (measured by `scripts/mlearn_small_model_card.py`)

| element | structures | energy MAE (meV/atom) | force MAE (eV/Å) | force RMSE (eV/Å) | stress MAE (GPa) |
|---|---|---|---|---|---|
{chr(10).join(rows)}

These are on a random 10 % split of the mlearn *training* files, which is easier than the
official test sets: they are not comparable with the published mlearn test-set errors.

## Limits

- Elements: Li, Si, Ge, Mo only; each was trained as a separate chemistry.
- Trained for minutes on two CPU cores: accuracy is well below that of the published
  potentials for these elements. Use it for workflows and tests, not for production science.
- DFT level: PBE (VASP); no dispersion.
"""
    (checkpoint / "MODEL_CARD.md").write_text(card)
    print(card)
    manifest["metrics"]["validation_per_element"] = per_element
    (checkpoint / "manifest.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
