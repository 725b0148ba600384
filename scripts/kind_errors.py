"""Errors of a checkpoint by mlearn configuration kind, on its training and validation splits,
and what its validation errors say about the whole file's mix of kinds.

A 10 % split of ~200 structures is a small sample of each kind: Mo's split holds 7 of the
file's 36 AIMD 6000 K frames (39 % of its atoms against 19 % of the file's). The per-kind
table shows each kind's share of the file and of the split, the force and energy MAE on
both splits (a training error far below the validation one is overfitting, both high is
underfitting), and the force and energy MAE the validation errors give for the file's own
mix of kinds (each kind weighted by its share of the file's atoms for forces, of its
structures for energies; a kind the split lacks takes its training error, likely an
underestimate, marked ``*``). That estimate is not a measurement on held-out data; it says
how much of a gap to a published test-set figure is the split's mix.

    python scripts/kind_errors.py CHECKPOINT [--element Mo]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from write_model_card import _kind_order, structure_kind  # noqa: E402

from atomistic import load_potential  # noqa: E402
from atomistic.training.config import config_from_dict  # noqa: E402
from atomistic.training.metrics import ErrorAccumulator  # noqa: E402
from atomistic.training.run import prepare  # noqa: E402


def errors_by_kind(potential, structures) -> dict[str, ErrorAccumulator]:
    """The residuals of ``structures`` against their labels, by configuration kind."""
    out: dict[str, ErrorAccumulator] = {}
    for structure, prediction in zip(structures, potential.predict(structures, properties=["energy", "forces"]), strict=True):
        out.setdefault(structure_kind(structure), ErrorAccumulator()).add(structure, prediction)
    return out


def _atoms(errors: ErrorAccumulator | None) -> int:
    """Atoms with force labels (force MAE is a mean over their components)."""
    return sum(c.size for c in errors.force_components) // 3 if errors else 0


def kind_table(element: str, train: dict[str, ErrorAccumulator], valid: dict[str, ErrorAccumulator]) -> str:
    """Markdown table of one element's kinds, with the pooled validation MAE and the file-mix
    estimates (force and energy) under it."""
    kinds = sorted(set(train) | set(valid), key=_kind_order)
    file_atoms = {k: _atoms(train.get(k)) + _atoms(valid.get(k)) for k in kinds}
    valid_atoms = {k: _atoms(valid.get(k)) for k in kinds}
    file_structures = {k: sum(split[k].n_structures for split in (train, valid) if k in split) for k in kinds}
    total_atoms, total_valid, total_structures = sum(file_atoms.values()), sum(valid_atoms.values()), sum(file_structures.values())
    lines = [
        f"{element}: force MAE (eV/Å) / energy MAE (meV/atom) by kind",
        "| kind | file structures | atoms in file | atoms in validation | train F / E | validation F / E |",
        "|---|---|---|---|---|---|",
    ]
    force_estimate, energy_estimate, missing_from_split = 0.0, 0.0, False
    for k in kinds:
        row = {}
        for name, split in (("train", train), ("valid", valid)):
            if k in split:
                m = split[k].summary()
                row[name] = (m["force_mae_ev_per_ang"], m["energy_mae_mev_per_atom"])
        shown = {name: f"{f:.3f} / {e:.2f}" for name, (f, e) in row.items()}
        lines.append(
            f"| {k} | {file_structures[k]} | {file_atoms[k]} ({file_atoms[k] / total_atoms:.0%}) | {valid_atoms[k]} "
            f"({valid_atoms[k] / max(total_valid, 1):.0%}) | {shown.get('train', '-')} | {shown.get('valid', '- *')} |"
        )
        force, energy = row["valid"] if "valid" in row else row["train"]
        missing_from_split |= "valid" not in row
        force_estimate += force * file_atoms[k] / total_atoms  # force MAE: over components, so by atoms
        energy_estimate += energy * file_structures[k] / total_structures  # energy MAE: over structures
    pooled = ErrorAccumulator()
    for errors in valid.values():
        pooled.extend(errors)
    pooled_metrics = pooled.summary()
    lines.append(
        f"\nvalidation: F {pooled_metrics['force_mae_ev_per_ang']:.3f} eV/Å, E {pooled_metrics['energy_mae_mev_per_atom']:.2f} meV/atom; "
        f"weighted by the file's mix of kinds: F {force_estimate:.3f} eV/Å, E {energy_estimate:.2f} meV/atom"
        + (" (* kinds missing from the split take their training error)" if missing_from_split else "")
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint")
    parser.add_argument("--element", action="append", help="only these training-file directories (e.g. Mo); all by default")
    args = parser.parse_args(argv)
    manifest = json.loads((Path(args.checkpoint) / "manifest.json").read_text())
    config = config_from_dict(manifest["provenance"]["config"])
    train, valid, _ = prepare(config)
    potential = load_potential(args.checkpoint, dtype="float64")

    def element_of(structure) -> str:
        return Path(structure.info["source"]).parent.name

    elements = sorted({element_of(s) for s in valid}) if not args.element else args.element
    for element in elements:
        train_errors = errors_by_kind(potential, [s for s in train if element_of(s) == element])
        valid_errors = errors_by_kind(potential, [s for s in valid if element_of(s) == element])
        print(kind_table(element, train_errors, valid_errors) + "\n")


if __name__ == "__main__":
    main()
