"""Generate the EMT alloy elastic-tensor dataset ``data/tensors/elastic_emt.extxyz``.

Substitutional alloys of Al, Cu, Ag, Au, Ni, Pd, Pt (ASE's EMT potential) on five families
of cells: pure fcc, L1₂ (A₃B), L1₀ (AB), bcc-like (B2 and random bcc supercells) and random
low-symmetry fcc supercells (random occupation, random cell shear before relaxing).  Each
structure is relaxed (cell and ions; high-symmetry prototypes keep their shape), then
strained by ±0.5 % along each of the six independent strain components with ions
relaxed at fixed cell; pymatgen's ``ElasticTensor.from_independent_strains`` fits the
relaxed-ion stiffness from the stress–strain data.

Output: one extxyz frame per structure with ``elastic_tensor`` in ``info`` as the 6×6 Voigt
matrix in Materials Project order (xx, yy, zz, yz, xz, xy), GPa, flattened row-major; plus
``family``, ``bulk_modulus_vrh`` and ``shear_modulus_vrh`` (GPa).  Unstable cells (a
non-positive-definite tensor, e.g. some bcc phases that EMT does not hold) are kept: they are
real EMT responses, and flagged with ``stable=False``.

    python scripts/make_emt_elastic.py --n 2400 --seed 0 -o data/tensors/elastic_emt.extxyz

Deterministic for a given seed.  Resumable: frames already in the output are skipped.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from ase import Atoms
from ase.build import bulk
from ase.calculators.emt import EMT
from ase.filters import UnitCellFilter
from ase.io import read, write
from ase.optimize import BFGS
from pymatgen.analysis.elasticity import ElasticTensor
from pymatgen.analysis.elasticity.strain import Strain
from pymatgen.analysis.elasticity.stress import Stress
from pymatgen.io.ase import AseAtomsAdaptor

from atomistic.units import EV_PER_ANG3_TO_GPA

METALS = ("Al", "Cu", "Ag", "Au", "Ni", "Pd", "Pt")
FCC_A = {"Al": 4.05, "Cu": 3.61, "Ag": 4.09, "Au": 4.08, "Ni": 3.52, "Pd": 3.89, "Pt": 3.92}
STRAINS = (-0.005, 0.005)
VOIGT_INDEX = ((0, 0), (1, 1), (2, 2), (1, 2), (0, 2), (0, 1))  # MP order


def mean_lattice(symbols) -> float:
    return float(np.mean([FCC_A[s] for s in symbols]))


def pure_fcc(rng) -> tuple[Atoms, str, bool]:
    element = METALS[rng.integers(len(METALS))]
    return bulk(element, "fcc", a=FCC_A[element], cubic=bool(rng.integers(2))), "fcc", True


def l12(rng) -> tuple[Atoms, str, bool]:
    a, b = rng.choice(len(METALS), size=2, replace=False)
    symbols = [METALS[b], METALS[a], METALS[a], METALS[a]]
    lattice = mean_lattice(symbols)
    atoms = Atoms(symbols, scaled_positions=[(0, 0, 0), (0.5, 0.5, 0), (0.5, 0, 0.5), (0, 0.5, 0.5)], cell=[lattice] * 3, pbc=True)
    return atoms, "L12", True


def l10(rng) -> tuple[Atoms, str, bool]:
    a, b = rng.choice(len(METALS), size=2, replace=False)
    symbols = [METALS[a], METALS[a], METALS[b], METALS[b]]
    lattice = mean_lattice(symbols)
    atoms = Atoms(symbols, scaled_positions=[(0, 0, 0), (0.5, 0.5, 0), (0.5, 0, 0.5), (0, 0.5, 0.5)], cell=[lattice] * 3, pbc=True)
    return atoms, "L10", False  # tetragonal: the c/a ratio relaxes


def bcc_like(rng) -> tuple[Atoms, str, bool]:
    if rng.random() < 0.5:  # B2 (CsCl)
        a, b = rng.choice(len(METALS), size=2, replace=False)
        symbols = [METALS[a], METALS[b]]
        lattice = mean_lattice(symbols) / 2 ** (1 / 3)
        return Atoms(symbols, scaled_positions=[(0, 0, 0), (0.5, 0.5, 0.5)], cell=[lattice] * 3, pbc=True), "B2", True
    elements = rng.choice(len(METALS), size=rng.integers(1, 4), replace=False)
    base = bulk("Cu", "bcc", a=1.0, cubic=True).repeat((2, 1, 1))
    symbols = [METALS[elements[rng.integers(len(elements))]] for _ in range(len(base))]
    lattice = mean_lattice(symbols) / 2 ** (1 / 3)
    atoms = Atoms(symbols, scaled_positions=base.get_scaled_positions(), cell=np.diag([2 * lattice, lattice, lattice]), pbc=True)
    return atoms, "bcc-random", True


def random_fcc(rng) -> tuple[Atoms, str, bool]:
    elements = rng.choice(len(METALS), size=rng.integers(2, 4), replace=False)
    repeat = [(1, 1, 1), (2, 1, 1), (1, 2, 1)][rng.integers(3)]
    base = bulk("Cu", "fcc", a=1.0, cubic=True).repeat(repeat)
    symbols = [METALS[elements[rng.integers(len(elements))]] for _ in range(len(base))]
    lattice = mean_lattice(symbols)
    cell = np.asarray(base.cell) * lattice
    shear = np.eye(3) + rng.normal(scale=0.03, size=(3, 3))
    atoms = Atoms(symbols, scaled_positions=base.get_scaled_positions(), cell=cell @ shear.T, pbc=True)
    atoms.rattle(0.05, seed=int(rng.integers(2**31)))
    return atoms, "random-fcc", False


FAMILIES = ((pure_fcc, 0.05), (l12, 0.25), (l10, 0.15), (bcc_like, 0.15), (random_fcc, 0.40))


def relax(atoms: Atoms, keep_shape: bool, fmax: float = 2e-4, steps: int = 400) -> Atoms:
    atoms.calc = EMT()
    BFGS(UnitCellFilter(atoms, hydrostatic_strain=keep_shape), logfile=None).run(fmax=fmax, steps=steps)
    return atoms


def stress_gpa(atoms: Atoms) -> np.ndarray:
    """Relax ions at fixed cell; the ASE stress (tensile positive) as a 3×3 in GPa."""
    atoms.calc = EMT()
    if len(atoms) > 1:
        BFGS(atoms, logfile=None).run(fmax=1e-3, steps=200)
    return atoms.get_stress(voigt=False) * EV_PER_ANG3_TO_GPA


def elastic_tensor(atoms: Atoms) -> ElasticTensor:
    """Relaxed-ion stiffness (GPa) from independent ±0.5 % strains (pymatgen fit)."""
    structure = AseAtomsAdaptor.get_structure(atoms)
    eq_stress = Stress(stress_gpa(atoms.copy()))
    strains, stresses = [], []
    for i, j in VOIGT_INDEX:
        for amount in STRAINS:
            strain = Strain.from_index_amount((i, j), amount)  # Green–Lagrange, one component
            deformation = strain.get_deformation_matrix(shape="symmetric")
            deformed = AseAtomsAdaptor.get_atoms(deformation.apply_to_structure(structure))
            strains.append(strain)
            stresses.append(Stress(stress_gpa(deformed)))
    fitted = ElasticTensor.from_independent_strains(strains, stresses, eq_stress=eq_stress)
    return fitted.voigt_symmetrized  # the fit's C_IJ - C_JI is noise (ionic relaxation, ~0.01 GPa)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2400)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("-o", "--output", default="data/tensors/elastic_emt.extxyz")
    args = parser.parse_args()
    output = Path(args.output)
    done = len(read(output, ":")) if output.exists() and output.stat().st_size else 0
    rng = np.random.default_rng(args.seed)
    weights = np.array([w for _, w in FAMILIES])
    started = time.time()
    for k in range(args.n):
        family = FAMILIES[rng.choice(len(FAMILIES), p=weights / weights.sum())][0]
        atoms, name, keep_shape = family(np.random.default_rng([args.seed, k]))
        if k < done:
            continue
        atoms = relax(atoms, keep_shape)
        tensor = elastic_tensor(atoms)
        voigt = np.asarray(tensor.voigt)
        frame = Atoms(atoms.numbers, positions=atoms.positions, cell=atoms.cell, pbc=True)
        frame.info.update(
            family=name,
            elastic_tensor=voigt.reshape(-1),
            bulk_modulus_vrh=float(tensor.k_vrh),
            shear_modulus_vrh=float(tensor.g_vrh),
            stable=bool(np.all(np.linalg.eigvalsh(0.5 * (voigt + voigt.T)) > 0)),
        )
        write(output, frame, format="extxyz", append=True)
        if (k + 1) % 50 == 0:
            rate = (time.time() - started) / (k + 1 - done)
            print(f"{k + 1}/{args.n} structures, {rate:.2f} s each, ETA {(args.n - k - 1) * rate / 60:.0f} min", flush=True)


if __name__ == "__main__":
    main()
