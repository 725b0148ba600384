"""Generate the EMT alloy elastic-tensor dataset ``data/tensors/elastic_emt.extxyz``.

Substitutional alloys of Al, Cu, Ag, Au, Ni, Pd, Pt (ASE's EMT potential): every ordered
prototype once (pure fcc, L1₂ A₃B, L1₀ AB, B2 AB: 91 cells), then seeded random cells —
random occupations (at least two elements) of fcc (4 or 8 atoms) and bcc (8 atoms) cells with
a random cell shear and rattle (low symmetry); from index ``MULTICOMPONENT_START`` on, random
3–4-element fcc cells of 8 or 12 atoms (small binary cells often relax to an ordered phase
already in the set; these rarely do).  Each structure is relaxed (cubic prototypes keep their shape; all
others relax cell and ions), then strained by ±0.5 % along each of the six independent strain
components with ions relaxed at fixed cell; pymatgen's
``ElasticTensor.from_independent_strains`` fits the relaxed-ion stiffness, which is then
Voigt-symmetrised.  Mechanically unstable cells (stiffness not positive definite) and
duplicates (cells that relax to a structure already in the set, see ``fingerprint``) are dropped.

Output: one extxyz frame per structure with ``elastic_tensor`` in ``info`` as the 6×6 Voigt
matrix in Materials Project order (xx, yy, zz, yz, xz, xy), GPa, flattened row-major; plus
``index``, ``family``, ``bulk_modulus_vrh`` and ``shear_modulus_vrh`` (GPa).

    python scripts/make_emt_elastic.py --n 4000 --seed 0 --workers 2
    python scripts/make_emt_elastic.py --n 4000 --start 2400   # extend an existing file

Deterministic for a given seed and n (any number of workers, any ``--start``).  Resumable per
worker shard.
"""

from __future__ import annotations

import argparse
import itertools
import multiprocessing
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
MULTICOMPONENT_START = 2400  # indices from here on draw 3–4-element cells
VOIGT_INDEX = ((0, 0), (1, 1), (2, 2), (1, 2), (0, 2), (0, 1))  # MP order


def mean_lattice(symbols) -> float:
    return float(np.mean([FCC_A[s] for s in symbols]))


def prototypes() -> list[tuple[Atoms, str, bool]]:
    """Every ordered prototype once: pure fcc (7), L1₂ A₃B (42), L1₀ AB (21), B2 AB (21).
    (atoms, family, keep_shape): cubic prototypes relax only their volume."""
    fcc_sites = [(0, 0, 0), (0.5, 0.5, 0), (0.5, 0, 0.5), (0, 0.5, 0.5)]
    out = []
    for element in METALS:
        out.append((bulk(element, "fcc", a=FCC_A[element]), "fcc", True))
    for a, b in itertools.permutations(METALS, 2):
        symbols = [b, a, a, a]
        out.append((Atoms(symbols, scaled_positions=fcc_sites, cell=[mean_lattice(symbols)] * 3, pbc=True), "L12", True))
    for a, b in itertools.combinations(METALS, 2):
        symbols = [a, a, b, b]  # tetragonal: c/a relaxes
        out.append((Atoms(symbols, scaled_positions=fcc_sites, cell=[mean_lattice(symbols)] * 3, pbc=True), "L10", False))
        lattice = mean_lattice([a, b]) / 2 ** (1 / 3)
        out.append((Atoms([a, b], scaled_positions=[(0, 0, 0), (0.5, 0.5, 0.5)], cell=[lattice] * 3, pbc=True), "B2", True))
    return out


def random_cell(rng) -> tuple[Atoms, str, bool]:
    """A random substitutional cell with at least two elements: fcc 2×1×1 (8 atoms, half of
    draws), fcc conventional (4 atoms, 15 %) or bcc 2×2×1 (8 atoms, 35 %), 2–3 elements, a
    random ±3 % cell shear and 0.05 Å rattle; relaxed in full (cell and ions)."""
    draw = rng.random()
    if draw < 0.5:
        base, family, per_volume = bulk("Cu", "fcc", a=1.0, cubic=True).repeat((2, 1, 1)), "random-fcc", 1.0
    elif draw < 0.65:
        base, family, per_volume = bulk("Cu", "fcc", a=1.0, cubic=True), "random-fcc", 1.0
    else:
        base, family, per_volume = bulk("Cu", "bcc", a=1.0, cubic=True).repeat((2, 2, 1)), "random-bcc", 2 ** (-1 / 3)
    return decorated_cell(base, rng, n_elements=int(rng.integers(2, 4)), min_distinct=2, per_volume=per_volume), family, False


def random_multicomponent_cell(rng) -> tuple[Atoms, str, bool]:
    """A random fcc cell of 8 (2×1×1) or 12 (3×1×1) atoms with 3–4 elements, each present, a
    random ±3 % cell shear and 0.05 Å rattle; relaxed in full."""
    repeat = (2, 1, 1) if rng.random() < 0.5 else (3, 1, 1)
    base = bulk("Cu", "fcc", a=1.0, cubic=True).repeat(repeat)
    n_elements = int(rng.integers(3, 5))
    return decorated_cell(base, rng, n_elements=n_elements, min_distinct=n_elements, per_volume=1.0), "random-fcc-multi", False


def decorated_cell(base: Atoms, rng, n_elements: int, min_distinct: int, per_volume: float) -> Atoms:
    """``base`` (lattice constant 1) with random occupations by ``n_elements`` distinct metals,
    at least ``min_distinct`` of them present, scaled to their mean fcc lattice constant times
    ``per_volume``, sheared by ±3 % and rattled by 0.05 Å."""
    elements = rng.choice(len(METALS), size=n_elements, replace=False)
    symbols = [METALS[e] for e in elements[rng.integers(len(elements), size=len(base))]]
    while len(set(symbols)) < min_distinct:
        symbols = [METALS[e] for e in elements[rng.integers(len(elements), size=len(base))]]
    cell = np.asarray(base.cell) * mean_lattice(symbols) * per_volume
    shear = np.eye(3) + rng.normal(scale=0.03, size=(3, 3))
    atoms = Atoms(symbols, scaled_positions=base.get_scaled_positions(), cell=cell @ shear.T, pbc=True)
    atoms.rattle(0.05, seed=int(rng.integers(2**31)))
    return atoms


def fingerprint(frame: Atoms) -> tuple:
    """Equal for the same relaxed structure reached from different cells or orientations
    (different random occupations often relax to one ordered phase): reduced formula and the
    rotation-invariant VRH moduli to 0.1 GPa."""
    return frame.get_chemical_formula(empirical=True), round(frame.info["bulk_modulus_vrh"], 1), round(frame.info["shear_modulus_vrh"], 1)


def structure(index: int, seed: int) -> tuple[Atoms, str, bool]:
    """Structure ``index`` of the dataset: the prototypes first, then seeded random cells."""
    fixed = prototypes()
    if index < len(fixed):
        return fixed[index]
    if index >= MULTICOMPONENT_START:
        return random_multicomponent_cell(np.random.default_rng([seed, index]))
    return random_cell(np.random.default_rng([seed, index]))


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


def compute(index: int, seed: int) -> Atoms | None:
    """Relaxed structure ``index`` with its elastic tensor in ``info``; None when EMT finds it
    mechanically unstable (a stiffness that is not positive definite: no elastic tensor of a
    phase that exists)."""
    atoms, family, keep_shape = structure(index, seed)
    atoms = relax(atoms, keep_shape)
    voigt = np.asarray(elastic_tensor(atoms).voigt)
    if not np.all(np.linalg.eigvalsh(voigt) > 0):
        return None
    tensor = ElasticTensor.from_voigt(voigt)
    frame = Atoms(atoms.numbers, positions=atoms.positions, cell=atoms.cell, pbc=True)
    frame.info.update(
        index=index, family=family, elastic_tensor=voigt.reshape(-1),
        bulk_modulus_vrh=float(tensor.k_vrh), shear_modulus_vrh=float(tensor.g_vrh),
    )
    return frame


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2400, help="structures computed (prototypes first); unstable ones are dropped")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=2, help="processes (indices are dealt round-robin)")
    parser.add_argument("-o", "--output", default="data/tensors/elastic_emt.extxyz")
    parser.add_argument("--start", type=int, default=0, help="keep the structures of indices below this from the existing output and compute the rest")
    args = parser.parse_args()
    output = Path(args.output)
    kept = [f for f in read(output, ":", format="extxyz") if f.info["index"] < args.start] if args.start else []
    shards = [output.with_name(f"{output.name}.part{w}") for w in range(args.workers)]
    started = time.time()
    with multiprocessing.get_context("spawn").Pool(args.workers) as pool:
        pool.starmap(run_shard, [(w, args.workers, args.start, args.n, args.seed, str(shards[w])) for w in range(args.workers)])
    frames = kept + sorted(
        (f for shard in shards if shard.exists() for f in read(shard, ":", format="extxyz") if args.start <= f.info["index"] < args.n),
        key=lambda f: f.info["index"],
    )
    unique: dict[tuple, Atoms] = {}
    for frame in frames:  # the first of each duplicate set (lowest index) stays
        unique.setdefault(fingerprint(frame), frame)
    duplicates = len(frames) - len(unique)
    frames = list(unique.values())
    write(output, frames, format="extxyz")
    for shard in shards:
        shard.unlink()
    print(f"{len(frames)} stable, distinct structures of {args.n} ({duplicates} duplicates dropped) in {output} ({time.time() - started:.0f} s)")


def run_shard(worker: int, workers: int, start: int, n: int, seed: int, path: str) -> None:
    """Compute indices ``start + worker, start + worker + workers, …`` below ``n`` into
    ``path``, resuming after the last index already there."""
    done = {f.info["index"] for f in read(path, ":", format="extxyz")} if Path(path).exists() and Path(path).stat().st_size else set()
    last = max(done, default=-1)
    for index in range(start + worker, n, workers):
        if index <= last:
            continue
        frame = compute(index, seed)
        if frame is not None:
            write(path, frame, format="extxyz", append=True)
        if worker == 0 and index % 100 < workers:
            print(f"{index + 1}/{n}", flush=True)


if __name__ == "__main__":
    main()
