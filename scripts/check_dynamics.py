"""Relaxation and NVE energy conservation of a model, as the README's checks state them.

    python scripts/check_dynamics.py [--model default] [--dtype float64]

BFGS on a rattled (0.05 Å) 64-atom Si supercell to fmax < 0.01 eV/Å, then 100 steps of
velocity-Verlet NVE at 300 K (1 fs) from the perfect crystal; prints steps, final fmax and the
total-energy spread in meV/atom.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from ase import units
from ase.build import bulk
from ase.md.velocitydistribution import MaxwellBoltzmannDistribution
from ase.md.verlet import VelocityVerlet
from ase.optimize import BFGS

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from atomistic import AtomisticCalculator  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="default")
    parser.add_argument("--dtype", default="float64")
    args = parser.parse_args()
    calc = AtomisticCalculator(model=args.model, dtype=args.dtype)

    atoms = bulk("Si", "diamond", 5.43, cubic=True).repeat(2)
    atoms.rattle(0.05, seed=42)
    atoms.calc = calc
    start = time.perf_counter()
    optimizer = BFGS(atoms, logfile=None)
    optimizer.run(fmax=0.01, steps=300)
    fmax = np.linalg.norm(atoms.get_forces(), axis=1).max()
    print(f"{args.model} BFGS: {optimizer.nsteps} steps, fmax {fmax:.4f} eV/Å, {time.perf_counter() - start:.1f} s")

    atoms = bulk("Si", "diamond", 5.43, cubic=True).repeat(2)
    atoms.calc = calc
    MaxwellBoltzmannDistribution(atoms, temperature_K=300, rng=np.random.default_rng(0))
    dynamics = VelocityVerlet(atoms, timestep=1.0 * units.fs)
    energies: list[float] = []
    dynamics.attach(lambda: energies.append(atoms.get_total_energy()), interval=1)
    start = time.perf_counter()
    dynamics.run(100)
    spread = (max(energies) - min(energies)) / len(atoms) * 1000
    print(f"{args.model} NVE 100 x 1 fs: total-energy spread {spread:.4f} meV/atom, {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
