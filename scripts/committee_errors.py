"""Held-out errors of several checkpoints and of their committee (the mean of their predicted
energies, forces and stresses), per validation source folder (``Ge``, ``Li``, … for mlearn).

The checkpoints must have been trained on the same validation split (same data files, seed,
``valid_fraction`` and ``stratify_by``): the split is rebuilt from the first one's manifest, as
``scripts/write_model_card.py`` does, and a checkpoint whose split differs is refused, since its
training set would overlap the others' validation set.

    python scripts/committee_errors.py checkpoints/mlearn docs/runs/mlearn_v20/best

Prints a Markdown table: energy MAE (meV/atom) / force MAE (eV/Å) per source and model, float64;
then how well the members' per-atom force disagreement (``forces_spread``) ranks the committee's
per-atom force errors (Spearman ρ, and the error of the atoms with the largest spread).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from atomistic import load_potential  # noqa: E402
from atomistic.training.config import config_from_dict  # noqa: E402
from atomistic.training.metrics import ErrorAccumulator, source_group  # noqa: E402
from atomistic.training.run import prepare, validation_split_mismatches  # noqa: E402

PROPERTIES = ("energy", "forces", "stress")


def committee_mean(predictions: list[dict]) -> dict:
    """The mean of several models' predictions of one structure, property by property."""
    return {key: np.mean([np.asarray(p[key]) for p in predictions], axis=0) for key in predictions[0]}


def error_table(valid, predictions_by_model: dict[str, list[dict]]) -> str:
    """Markdown table: one row per model, ``E / F`` MAE per source group of ``valid``."""
    groups = sorted({source_group(s) for s in valid})
    lines = ["| model | " + " | ".join(groups) + " |", "|---|" + "---|" * len(groups)]
    for name, predictions in predictions_by_model.items():
        cells = []
        for group in groups:
            pairs = [(s, p) for s, p in zip(valid, predictions, strict=True) if source_group(s) == group]
            m = ErrorAccumulator.of(pairs).summary()
            cells.append(f"{m['energy_mae_mev_per_atom']:.2f} / {m['force_mae_ev_per_ang']:.4f}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def forces_spread(predictions: list[dict]) -> np.ndarray:
    """``[n_atoms]`` eV/Å: the RMS deviation of several models' forces from their mean on each
    atom (what a committee checkpoint returns as ``forces_spread``, here with equal weights)."""
    forces = np.stack([np.asarray(p["forces"]) for p in predictions])
    return np.sqrt(((forces - forces.mean(axis=0)) ** 2).sum(-1).mean(axis=0))


def spread_table(valid, member_predictions: list[list[dict]], mean: list[dict]) -> str:
    """Markdown table: per source group, how well the members' disagreement flags the committee's
    force errors: the Spearman rank correlation between each atom's ``forces_spread`` and its
    force error ``|F_mean - F_ref|`` (eV/Å), and the mean error of the tenth of atoms with the
    largest spread against that of the others."""
    from scipy.stats import spearmanr

    spread_by_group: dict[str, list] = {}
    error_by_group: dict[str, list] = {}
    for i, structure in enumerate(valid):
        if "forces" not in structure.labels:
            continue
        group = source_group(structure)
        spread_by_group.setdefault(group, []).append(forces_spread([m[i] for m in member_predictions]))
        error = np.linalg.norm(np.asarray(mean[i]["forces"]) - np.asarray(structure.labels["forces"]), axis=-1)
        error_by_group.setdefault(group, []).append(error)
    lines = [
        "| source | atoms | Spearman ρ (spread, force error) | mean force error (eV/Å), top 10 % spread | the other 90 % |",
        "|---|---|---|---|---|",
    ]
    for group in sorted(spread_by_group):
        spread, error = np.concatenate(spread_by_group[group]), np.concatenate(error_by_group[group])
        top = spread >= np.quantile(spread, 0.9)
        rho = spearmanr(spread, error).statistic
        lines.append(f"| {group} | {len(spread)} | {rho:.2f} | {error[top].mean():.4f} | {error[~top].mean():.4f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoints", nargs="+", type=Path, help="checkpoint directories written by atomistic train")
    args = parser.parse_args(argv)
    if len(args.checkpoints) < 2:
        parser.error("a committee needs at least two checkpoints")
    for checkpoint in args.checkpoints:
        if not (checkpoint / "manifest.json").is_file():
            parser.error(f"{checkpoint}: no manifest.json (not a checkpoint directory)")
    configs = {str(c): config_from_dict(json.loads((c / "manifest.json").read_text())["provenance"]["config"]) for c in args.checkpoints}
    mismatched = validation_split_mismatches(configs)
    if mismatched:
        parser.error(f"{mismatched[0]}: trained on another validation split than {args.checkpoints[0]} (data, seed, valid_fraction or stratify_by differ)")
    _, valid, _ = prepare(configs[str(args.checkpoints[0])])
    predictions = {}
    for checkpoint in args.checkpoints:
        potential = load_potential(checkpoint, dtype="float64")
        properties = [p for p in PROPERTIES if p in potential.properties]
        predictions[str(checkpoint)] = potential.predict(valid, properties=properties)
    members = list(predictions.values())
    predictions["committee (mean)"] = [committee_mean([m[i] for m in members]) for i in range(len(valid))]
    print(f"held-out MAE, energy meV/atom / force eV/Å, {len(valid)} structures, float64")
    print(error_table(valid, predictions))
    print("\nthe members' force disagreement (forces_spread) against the committee's force error, per atom")
    print(spread_table(valid, members, predictions["committee (mean)"]))


if __name__ == "__main__":
    main()
