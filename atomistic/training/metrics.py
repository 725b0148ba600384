"""Error metrics of a model against labelled structures (labels that are missing are skipped)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from atomistic import keys
from atomistic.data.convert import Structure
from atomistic.units import EV_PER_ANG3_TO_GPA


@dataclasses.dataclass
class ErrorAccumulator:
    """Collects per-structure residuals; ``summary()`` gives the metrics in reporting units."""

    energy_per_atom: list[float] = dataclasses.field(default_factory=list)  # eV/atom
    force_components: list[np.ndarray] = dataclasses.field(default_factory=list)  # eV/Å
    stress_components: list[np.ndarray] = dataclasses.field(default_factory=list)  # eV/Å³
    n_structures: int = 0

    def add(self, structure: Structure, prediction: dict) -> None:
        self.n_structures += 1
        labels = structure.labels
        if "energy" in labels and keys.ENERGY in prediction:
            self.energy_per_atom.append((prediction[keys.ENERGY] - labels["energy"]) / len(structure))
        if "forces" in labels and keys.FORCES in prediction:
            self.force_components.append((prediction[keys.FORCES] - np.asarray(labels["forces"])).ravel())
        if "stress" in labels and keys.STRESS in prediction:
            self.stress_components.append((prediction[keys.STRESS] - np.asarray(labels["stress"])).ravel())

    def extend(self, other: ErrorAccumulator) -> None:
        self.energy_per_atom += other.energy_per_atom
        self.force_components += other.force_components
        self.stress_components += other.stress_components
        self.n_structures += other.n_structures

    def summary(self) -> dict[str, float | int | None]:
        e = np.abs(np.asarray(self.energy_per_atom))
        f = np.abs(np.concatenate(self.force_components)) if self.force_components else np.zeros(0)
        s = np.abs(np.concatenate(self.stress_components)) if self.stress_components else np.zeros(0)

        def mae(x, scale=1.0):
            return float(x.mean() * scale) if x.size else None

        def rmse(x, scale=1.0):
            return float(math.sqrt((x**2).mean()) * scale) if x.size else None

        return {
            "energy_mae_mev_per_atom": mae(e, 1000.0),
            "energy_rmse_mev_per_atom": rmse(e, 1000.0),
            "force_mae_ev_per_ang": mae(f),
            "force_rmse_ev_per_ang": rmse(f),
            "stress_mae_gpa": mae(s, EV_PER_ANG3_TO_GPA),
            "n_structures": self.n_structures,
        }


def evaluate(potential, structures: Sequence[Structure], max_atoms_per_batch: int = 4096) -> ErrorAccumulator:
    """Predict every structure (batched) and accumulate its errors against its labels."""
    properties = (keys.ENERGY, keys.FORCES, keys.STRESS)
    accumulator = ErrorAccumulator()
    predictions = potential.predict(list(structures), properties=properties, max_atoms_per_batch=max_atoms_per_batch)
    for structure, prediction in zip(structures, predictions, strict=True):
        accumulator.add(structure, prediction)
    return accumulator
