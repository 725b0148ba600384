"""Error metrics of a model against labelled structures (labels that are missing are skipped)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from atomistic import keys
from atomistic.data.convert import Structure
from atomistic.units import EV_PER_ANG3_TO_GPA

TENSOR_METRIC_PREFIX = {keys.DIELECTRIC_TENSOR: "dielectric", keys.PIEZOELECTRIC_TENSOR: "piezoelectric", keys.ELASTIC_TENSOR: "elastic"}
TENSOR_UNITS = {keys.DIELECTRIC_TENSOR: "", keys.PIEZOELECTRIC_TENSOR: "_c_per_m2", keys.ELASTIC_TENSOR: "_gpa"}
EWT_THRESHOLDS = (0.25, 0.10, 0.05)


def source_group(structure: Structure) -> str:
    """The name a structure's validation metrics are grouped under: the folder of the file it
    was read from (``data/mlearn/Ge/training.json`` → ``Ge``), ``-`` when its source is unknown."""
    source = structure.info.get("source")
    return (Path(str(source)).parent.name or "-") if source else "-"


def fnorm_key(key: str) -> str:
    """Name of a crystal tensor's Fnorm metric, e.g. ``elastic_fnorm_gpa``."""
    return f"{TENSOR_METRIC_PREFIX[key]}_fnorm{TENSOR_UNITS[key]}"


def vrh_moduli(elastic_tensor: np.ndarray) -> tuple[float, float]:
    """(bulk, shear) Voigt–Reuss–Hill moduli, GPa, of a 3×3×3×3 stiffness tensor (GPa), by
    pymatgen; NaN where the tensor has no compliance (singular)."""
    from pymatgen.analysis.elasticity import ElasticTensor

    tensor = ElasticTensor(np.asarray(elastic_tensor, dtype=np.float64))
    try:
        return float(tensor.k_vrh), float(tensor.g_vrh)
    except np.linalg.LinAlgError:
        return float("nan"), float("nan")


def tensor_metrics(key: str, predicted: np.ndarray, reference: np.ndarray) -> dict[str, float]:
    """Crystal-tensor errors over ``[n, 3, …, 3]`` predictions and references (the field's metrics):

    - ``<name>_fnorm<unit>``: mean Frobenius norm of the error ``‖ŷ − y‖_F``;
    - ``<name>_ewt25`` / ``_ewt10`` / ``_ewt5``: share (0–1) of samples with
      ``‖ŷ − y‖_F / ‖y‖_F`` below 25 %, 10 %, 5 %;
    - elastic only: ``bulk_modulus_vrh_mae_gpa`` and ``shear_modulus_vrh_mae_gpa``.
    """
    name = TENSOR_METRIC_PREFIX[key]
    predicted, reference = np.asarray(predicted, dtype=np.float64), np.asarray(reference, dtype=np.float64)
    if predicted.shape[0] == 0:
        return {}
    axes = tuple(range(1, predicted.ndim))
    error = np.sqrt(((predicted - reference) ** 2).sum(axis=axes))
    relative = error / np.maximum(np.sqrt((reference**2).sum(axis=axes)), 1e-12)
    out = {fnorm_key(key): float(error.mean())}
    for threshold in EWT_THRESHOLDS:
        out[f"{name}_ewt{round(threshold * 100)}"] = float((relative < threshold).mean())
    if key == keys.ELASTIC_TENSOR:
        moduli_pred = np.array([vrh_moduli(t) for t in predicted])
        moduli_ref = np.array([vrh_moduli(t) for t in reference])
        absolute = np.abs(moduli_pred - moduli_ref)
        out["bulk_modulus_vrh_mae_gpa"] = float(np.nanmean(absolute[:, 0]))
        out["shear_modulus_vrh_mae_gpa"] = float(np.nanmean(absolute[:, 1]))
    return out


@dataclasses.dataclass
class ErrorAccumulator:
    """Collects per-structure residuals; ``summary()`` gives the metrics in reporting units."""

    energy_per_atom: list[float] = dataclasses.field(default_factory=list)  # eV/atom
    force_components: list[np.ndarray] = dataclasses.field(default_factory=list)  # eV/Å
    stress_components: list[np.ndarray] = dataclasses.field(default_factory=list)  # eV/Å³
    tensors: dict[str, list[tuple[np.ndarray, np.ndarray]]] = dataclasses.field(default_factory=dict)  # (pred, ref)
    n_structures: int = 0

    @classmethod
    def of(cls, pairs) -> ErrorAccumulator:
        """The errors of ``(structure, prediction)`` pairs against the structures' labels."""
        accumulator = cls()
        for structure, prediction in pairs:
            accumulator.add(structure, prediction)
        return accumulator

    def add(self, structure: Structure, prediction: dict) -> None:
        self.n_structures += 1
        labels = structure.labels
        if "energy" in labels and keys.ENERGY in prediction:
            self.energy_per_atom.append((prediction[keys.ENERGY] - labels["energy"]) / len(structure))
        if "forces" in labels and keys.FORCES in prediction:
            self.force_components.append((prediction[keys.FORCES] - np.asarray(labels["forces"])).ravel())
        if "stress" in labels and keys.STRESS in prediction:
            self.stress_components.append((prediction[keys.STRESS] - np.asarray(labels["stress"])).ravel())
        for key in keys.TENSOR_KEYS:
            if key in labels and key in prediction:
                self.tensors.setdefault(key, []).append((np.asarray(prediction[key]), np.asarray(labels[key])))

    def extend(self, other: ErrorAccumulator) -> None:
        self.energy_per_atom += other.energy_per_atom
        self.force_components += other.force_components
        self.stress_components += other.stress_components
        for key, pairs in other.tensors.items():
            self.tensors.setdefault(key, []).extend(pairs)
        self.n_structures += other.n_structures

    def summary(self) -> dict[str, float | int | None]:
        """Energy/force/stress metrics (``None`` where no label), then the tensor metrics of
        every crystal tensor that was labelled (see :func:`tensor_metrics`)."""
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
            **{
                name: value
                for key, pairs in self.tensors.items()
                for name, value in tensor_metrics(key, np.stack([p for p, _ in pairs]), np.stack([r for _, r in pairs])).items()
            },
        }


def evaluate(potential, structures: Sequence[Structure], max_atoms_per_batch: int = 4096) -> ErrorAccumulator:
    """Predict every structure (batched) and accumulate its errors against its labels."""
    properties = [p for p in (keys.ENERGY, keys.FORCES, keys.STRESS, *keys.TENSOR_KEYS) if p in potential.properties]
    predictions = potential.predict(list(structures), properties=properties, max_atoms_per_batch=max_atoms_per_batch)
    return ErrorAccumulator.of(zip(structures, predictions, strict=True))
