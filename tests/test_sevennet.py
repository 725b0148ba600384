"""The imported SevenNet models reproduce sevenn's own calculator exactly."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from ase import Atoms
from ase.build import bulk, fcc111, molecule
from ase.stress import full_3x3_to_voigt_6_stress
from safetensors.torch import load_file

from atomistic import load_potential
from atomistic.checkpoint import CheckpointError, checkpoints_dir, resolve
from atomistic.testing import random_periodic_structure

pytest.importorskip("sevenn")
from .sevennet_reference import SevenNetReference  # noqa: E402


def parity_structures() -> list[Atoms]:
    si = bulk("Si", "diamond", 5.43, cubic=True)
    si.rattle(0.05, seed=0)
    skewed = random_periodic_structure((3, 8, 15, 26), n_atoms=10, seed=7, density=0.06, skew=0.4)
    small = bulk("Mo", "bcc", 3.16)  # one atom, cell much smaller than the 5 Å cutoff
    small.rattle(0.02, seed=1)
    rocksalt = bulk("NaCl", "rocksalt", 5.64, cubic=True)
    rocksalt.rattle(0.03, seed=2)
    slab = fcc111("Cu", size=(2, 2, 3), vacuum=6.0)
    slab.rattle(0.03, seed=3)
    ethanol = molecule("CH3CH2OH")
    water = molecule("H2O")
    return [si, skewed, small, rocksalt, slab, ethanol, water]


@pytest.fixture(scope="module")
def structures():
    return parity_structures()


@pytest.mark.parametrize(
    "name,dtype,e_tol,f_tol,s_tol",
    [
        ("sevennet-0", torch.float64, 1e-6, 1e-5, 1e-6),
        ("sevennet-0", torch.float32, None, None, None),
        ("sevennet-l3i5", torch.float64, 1e-6, 1e-5, 1e-6),
    ],
)
def test_parity_with_sevenn(structures, name, dtype, e_tol, f_tol, s_tol):
    ours = load_potential(name, dtype=dtype).predict(structures)
    reference = SevenNetReference(name, dtype)
    for atoms, mine in zip(structures, ours, strict=True):
        ref = reference(atoms)
        e_per_atom = abs(mine["energy"] - ref["energy"]) / len(atoms)
        force_error = np.abs(mine["forces"] - ref["forces"]).max()
        if dtype == torch.float64:
            assert e_per_atom < e_tol, f"{atoms.get_chemical_formula()}: energy differs by {e_per_atom:.2e} eV/atom"
            assert force_error < f_tol, f"{atoms.get_chemical_formula()}: forces differ by {force_error:.2e} eV/Å"
        else:  # float32: 1e-4 relative
            assert abs(mine["energy"] - ref["energy"]) <= 1e-4 * abs(ref["energy"])
            assert force_error <= 1e-4 * max(1.0, np.abs(ref["forces"]).max())
        if "stress" in ref:
            stress_error = np.abs(full_3x3_to_voigt_6_stress(mine["stress"]) - ref["stress"]).max()
            limit = s_tol if dtype == torch.float64 else 1e-4 * max(1e-2, np.abs(ref["stress"]).max())
            assert stress_error < limit, f"{atoms.get_chemical_formula()}: stress differs by {stress_error:.2e}"


def test_default_is_sevennet0():
    assert resolve("default").resolve() == (checkpoints_dir() / "sevennet-0").resolve()
    potential = load_potential("default")
    assert len(potential.atomic_numbers) == 89
    assert potential.encoder.name == "nequip"


def test_import_reproduces_committed_checkpoint(tmp_path):
    from atomistic.importers.sevennet import import_sevennet

    import_sevennet("sevennet-0", tmp_path / "s0")
    fresh = load_file(str(tmp_path / "s0" / "weights.safetensors"))
    committed = load_file(str(checkpoints_dir() / "sevennet-0" / "weights.safetensors"))
    assert fresh.keys() == committed.keys()
    for key in fresh:
        assert torch.equal(fresh[key], committed[key]), key
    manifest = json.loads((tmp_path / "s0" / "manifest.json").read_text())
    assert "MIT" in manifest["provenance"]["license"]
    assert (tmp_path / "s0" / "LICENSE_SEVENNET").exists() and (tmp_path / "s0" / "MODEL_CARD.md").exists()


def test_sevennet_pickle_is_still_refused_by_load_potential():
    from atomistic.importers.sevennet import sevennet_checkpoint_path

    with pytest.raises(CheckpointError, match="pickle"):
        load_potential(sevennet_checkpoint_path("sevennet-0"))


def test_sevennet0_physics():
    from atomistic.testing import assert_potential_physics

    potential = load_potential("sevennet-0", dtype="float64")
    atoms = random_periodic_structure((8, 14, 26), n_atoms=6, seed=11, density=0.05)
    assert_potential_physics(potential, atoms, seed=0)  # parity off: rotations only
