"""Which order do the shear components of each mlearn group's ``virial_stress`` follow?

Two checks per (element, configuration group), each run for both candidate orders
(VASP: xy yz zx; LAMMPS: xy xz yz):

1. Elastic strain series (same mode, neighbouring strains): the DFT energy change must equal
   the stress work ``V σ̄ : Δε`` (σ̄ the mean stress of the two cells, Δε the symmetric strain
   between them). Mean |ΔE − work| per atom, meV/atom. Physics alone, no model.
2. With ``--model``: the model's shear stress against the labels read in each order
   (MAE of the xz and yz components, GPa) beside its xy MAE (the same in both orders). A model
   fitted to the energies and forces of the whole set predicts the true shear stress; the order
   whose xz/yz error matches the xy error is the right one.

    python scripts/check_mlearn_stress_order.py [--model CHECKPOINT] [--elements Mo Si ...]

Reads the raw files, so its result does not depend on the order the reader assumes
(``atomistic.data.datasets.MLEARN_LAMMPS_SHEAR_ORDER``); it also prints that table's choice.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from atomistic.data.datasets import (  # noqa: E402
    SHEAR_ORDERS,
    elastic_stress_work_mismatch,
    mlearn_shear_order,
    mlearn_virial_to_stress,
    structures_from_mlearn_records,
)
from atomistic.units import EV_PER_ANG3_TO_GPA  # noqa: E402


def strain_series_mismatch(structures, virials, order: str) -> tuple[float, int]:
    """Mean |ΔE − V σ̄:Δε| (meV/atom) over neighbouring strains of each Elastic mode, with the
    stress read in ``order``; and the number of pairs."""
    relabelled = [
        dataclasses.replace(s, labels={**s.labels, "stress": mlearn_virial_to_stress(v, order)})
        for s, v in zip(structures, virials, strict=True)
    ]
    mismatch = elastic_stress_work_mismatch(relabelled)
    return (float(np.mean(mismatch)) * 1000 if mismatch else float("nan")), len(mismatch)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="checkpoint for the model-based check (e.g. checkpoints/mlearn)")
    parser.add_argument("--elements", nargs="+", default=["Li", "Mo", "Si", "Ge"])
    parser.add_argument("--data", default=str(ROOT / "data" / "mlearn"))
    args = parser.parse_args()
    potential = None
    if args.model:
        from atomistic import load_potential

        potential = load_potential(args.model, dtype="float64")
    header = "| element | group | structures | reader's order | Elastic ΔE − work, meV/atom (VASP / LAMMPS) |"
    if potential is not None:
        header += " model xz,yz MAE GPa (VASP / LAMMPS) | model xy MAE GPa |"
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    for element in args.elements:
        records = json.loads((Path(args.data) / element / "training.json").read_text())
        groups = defaultdict(list)
        for record in records:
            if (record.get("outputs") or {}).get("virial_stress") is not None:
                groups[record.get("group", "-")].append(record)
        for group, members in sorted(groups.items()):
            structures = structures_from_mlearn_records(members)
            virials = [m["outputs"]["virial_stress"] for m in members]
            row = f"| {element} | {group} | {len(members)} | {mlearn_shear_order(members[0])} |"
            if group == "Elastic":
                (vasp, n), (lammps, _) = (strain_series_mismatch(structures, virials, o) for o in SHEAR_ORDERS)
                row += f" {vasp:.2f} / {lammps:.2f} ({n} pairs) |"
            else:
                row += " - |"
            if potential is not None:
                predicted = np.array([p["stress"] for p in potential.predict(structures, properties=["energy", "forces", "stress"])])
                predicted = predicted * EV_PER_ANG3_TO_GPA
                errors = []
                for order in SHEAR_ORDERS:
                    labels = np.array([mlearn_virial_to_stress(v, order) for v in virials]) * EV_PER_ANG3_TO_GPA
                    errors.append(np.abs(predicted[:, [0, 1], [2, 2]] - labels[:, [0, 1], [2, 2]]).mean())
                labels = np.array([mlearn_virial_to_stress(v) for v in virials]) * EV_PER_ANG3_TO_GPA
                xy = np.abs(predicted[:, 0, 1] - labels[:, 0, 1]).mean()
                row += f" {errors[0]:.2f} / {errors[1]:.2f} | {xy:.2f} |"
            print(row, flush=True)


if __name__ == "__main__":
    main()
