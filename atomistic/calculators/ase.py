"""ASE calculator running a local :class:`~atomistic.models.potential.Potential`."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
from ase.calculators.calculator import Calculator, PropertyNotImplementedError, all_changes
from ase.stress import full_3x3_to_voigt_6_stress

from atomistic import keys
from atomistic.checkpoint import load_potential, resolve

_SHARED: dict[tuple[str, str, str, str], Any] = {}
_LOCK = threading.Lock()


def shared_potential(model: str, device: str = "cpu", dtype: str = "float64", backend: str = "auto"):
    """Load ``model`` once per (path, device, dtype, backend); later calls share the weights."""
    path = str(resolve(model).resolve())
    key = (path, str(device), str(dtype), backend)
    with _LOCK:
        if key not in _SHARED:
            _SHARED[key] = load_potential(path, device=device, dtype=dtype, backend=backend)
        return _SHARED[key]


class AtomisticCalculator(Calculator):
    """Energy, free energy, per-atom energies, forces and stress from an atomistic model.

    Args:
        model: a model name (``"default"``) or checkpoint directory.
        device: ``"cpu"`` or ``"cuda"``.
        dtype: ``"float64"`` (default) or ``"float32"``.
        backend: kernel backend (``"auto"``, ``"reference"``, ``"cueq"``, ``"triton"``, ``"e3nn"``);
            ``"auto"`` picks the fastest correct one for the device and dtype.
        potential: an already-loaded ``Potential`` to use instead of ``model``.

    Units: eV, eV/Å, and stress in eV/Å³ (ASE's Voigt order and sign). A committee model also
    leaves ``results["forces_spread"]`` (``[n_atoms]`` eV/Å: how far its members' forces
    disagree). Several calculators built with the same arguments share one loaded model.
    """

    implemented_properties = ["energy", "free_energy", "energies", "forces", "stress"]

    def __init__(self, model: str = "default", device: str = "cpu", dtype: str = "float64", backend: str = "auto", potential=None, **kwargs):
        super().__init__(**kwargs)
        self.potential = potential if potential is not None else shared_potential(model, device, dtype, backend)

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        super().calculate(atoms, properties, system_changes)
        has_volume = bool(self.atoms.pbc.any() and self.atoms.cell.volume > 1e-12)
        if "stress" in properties and not has_volume:
            raise PropertyNotImplementedError("stress needs a periodic structure with a non-zero cell volume")
        # stress comes from the same backward pass as the forces: compute it whenever it is
        # defined, so a later get_stress() does not re-evaluate the model
        want_stress = has_volume
        requested = [keys.ENERGY, keys.ATOMIC_ENERGIES, keys.FORCES] + ([keys.STRESS] if want_stress else [])
        if keys.FORCES_SPREAD in self.potential.properties:  # a committee: its members' disagreement comes free
            requested.append(keys.FORCES_SPREAD)
        result = self.potential.predict(self.atoms, properties=requested)[0]
        self.results = {
            "energy": result[keys.ENERGY],
            "free_energy": result[keys.ENERGY],
            "energies": np.asarray(result[keys.ATOMIC_ENERGIES]),
            "forces": np.asarray(result[keys.FORCES]),
        }
        if want_stress:
            self.results["stress"] = full_3x3_to_voigt_6_stress(np.asarray(result[keys.STRESS]))
        if keys.FORCES_SPREAD in result:
            self.results["forces_spread"] = np.asarray(result[keys.FORCES_SPREAD])
