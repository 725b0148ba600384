from __future__ import annotations

import numpy as np
import pytest
from ase import Atoms
from ase.neighborlist import neighbor_list as ase_neighbor_list

from atomistic.data import neighbor_list


def _pairs(i, j, shifts):
    return sorted(zip(i.tolist(), j.tolist(), map(tuple, np.asarray(shifts, dtype=int).tolist()), strict=True))


def _random_atoms(rng, n, pbc, skew, scale):
    cell = scale * (np.eye(3) + skew * rng.uniform(-1, 1, (3, 3)))
    frac = rng.uniform(0, 1, (n, 3))
    return Atoms("H" * n, scaled_positions=frac, cell=cell, pbc=pbc)


CASES = [
    # (pbc, skew, cell scale Å, n_atoms, cutoff Å)
    ((True, True, True), 0.0, 6.0, 12, 3.5),
    ((True, True, True), 0.4, 6.0, 10, 4.0),  # skewed
    ((True, True, True), 0.3, 2.2, 3, 5.0),  # cell much smaller than the cutoff: many images
    ((True, True, False), 0.3, 5.0, 8, 4.0),  # slab
    ((True, False, False), 0.2, 4.0, 6, 4.5),  # wire
    ((False, True, True), 0.3, 3.0, 5, 4.0),
    ((False, False, False), 0.0, 6.0, 15, 3.0),  # molecule-like cluster
]


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_ase(case, seed):
    pbc, skew, scale, n, cutoff = CASES[case]
    rng = np.random.default_rng(100 * case + seed)
    atoms = _random_atoms(rng, n, pbc, skew, scale)
    i, j, shifts, d = neighbor_list(atoms.positions, atoms.cell.array, atoms.pbc, cutoff, with_distances=True)
    ai, aj, a_shift = ase_neighbor_list("ijS", atoms, cutoff)
    assert _pairs(i, j, shifts) == _pairs(ai, aj, a_shift)
    vectors = atoms.positions[j] - atoms.positions[i] + shifts @ atoms.cell.array
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), d, atol=1e-10)
    assert (d < cutoff).all()


def test_small_cell_has_self_images():
    atoms = Atoms("Si", positions=[[0, 0, 0]], cell=np.eye(3) * 2.0, pbc=True)
    i, j, shifts = neighbor_list(atoms.positions, atoms.cell.array, atoms.pbc, 4.5)
    assert len(i) > 50 and (i == j).all() and not (shifts == 0).all(axis=1).any()
