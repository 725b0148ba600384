from __future__ import annotations

import numpy as np
import pytest
from ase import Atoms, units
from ase.build import bulk
from ase.calculators.calculator import PropertyNotImplementedError
from ase.filters import FrechetCellFilter
from ase.md.velocitydistribution import MaxwellBoltzmannDistribution
from ase.md.verlet import VelocityVerlet
from ase.optimize import BFGS

from atomistic import AtomisticCalculator

pytestmark = pytest.mark.filterwarnings("ignore:Use thermalize_momenta:DeprecationWarning")


def test_properties_and_shared_weights():
    calc_a = AtomisticCalculator(model="default")
    calc_b = AtomisticCalculator(model="default")
    assert calc_a.potential is calc_b.potential
    atoms = bulk("Mo", "bcc", 3.16, cubic=True).repeat(2)
    atoms.rattle(0.02, seed=0)
    atoms.calc = calc_a
    energy = atoms.get_potential_energy()
    assert atoms.get_potential_energies().sum() == pytest.approx(energy, abs=1e-9)
    assert atoms.get_forces().shape == (16, 3)
    assert atoms.get_stress().shape == (6,)
    assert atoms.calc.get_property("free_energy") == energy


def test_stress_of_molecule_is_not_implemented():
    atoms = Atoms("Si2", positions=[[0, 0, 0], [2.3, 0, 0]])
    atoms.calc = AtomisticCalculator()
    assert np.isfinite(atoms.get_potential_energy())
    with pytest.raises(PropertyNotImplementedError):
        atoms.get_stress()


def test_bfgs_relaxes_rattled_si64():
    atoms = bulk("Si", "diamond", 5.43, cubic=True).repeat(2)
    atoms.rattle(0.05, seed=42)
    atoms.calc = AtomisticCalculator(model="default")
    converged = BFGS(atoms, logfile=None).run(fmax=0.01, steps=300)
    assert converged
    assert np.linalg.norm(atoms.get_forces(), axis=1).max() < 0.01


def test_cell_relaxation_with_frechet_filter():
    atoms = bulk("Si", "diamond", 5.6, cubic=True)
    atoms.rattle(0.02, seed=1)
    atoms.calc = AtomisticCalculator(model="default")
    BFGS(FrechetCellFilter(atoms), logfile=None).run(fmax=0.01, steps=200)
    assert np.abs(atoms.get_stress()).max() * 160.2 < 0.1  # GPa
    assert 5.2 < atoms.cell.lengths()[0] < 5.7


def test_nve_energy_conservation():
    atoms = bulk("Si", "diamond", 5.43, cubic=True).repeat(2)
    atoms.calc = AtomisticCalculator(model="default")
    MaxwellBoltzmannDistribution(atoms, temperature_K=300, rng=np.random.default_rng(0))
    dynamics = VelocityVerlet(atoms, timestep=1.0 * units.fs)
    energies = []
    dynamics.attach(lambda: energies.append(atoms.get_total_energy()), interval=1)
    dynamics.run(100)
    drift = (max(energies) - min(energies)) / len(atoms)
    assert drift < 1e-3, f"total energy varied by {drift * 1000:.3f} meV/atom"


@pytest.mark.parametrize("seed", [0, 1])
def test_default_model_physics(default_potential, seed):
    """The issue's checks on random periodic Si/Ge/Li/Mo structures, float64."""
    from atomistic.testing import (
        check_forces_finite_difference,
        check_rotation,
        check_stress_finite_difference,
        random_periodic_structure,
        random_rotation,
    )

    atoms = random_periodic_structure((3, 14, 32, 42), n_atoms=6, seed=seed, density=0.04)
    deviation = check_rotation(default_potential, atoms, random_rotation(np.random.default_rng(seed)))
    assert deviation["energy"] < 1e-9 and deviation["forces"] < 1e-9
    assert check_forces_finite_difference(default_potential, atoms)["forces"] < 1e-6
    assert check_stress_finite_difference(default_potential, atoms)["stress"] < 1e-6
