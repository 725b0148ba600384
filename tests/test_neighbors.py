from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from ase import Atoms
from ase.neighborlist import neighbor_list as ase_neighbor_list

from atomistic.data import neighbor_list
from atomistic.data.convert import Structure, StructureError, validate_structure
from atomistic.data.neighbors import _full_rank_box


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


def _brute_force_pairs(positions, cutoff):
    """Every ordered pair of distinct atoms closer than ``cutoff`` (no periodicity)."""
    d = np.linalg.norm(positions[:, None] - positions[None], axis=-1)
    i, j = np.nonzero((d < cutoff) & ~np.eye(len(positions), dtype=bool))
    return sorted(zip(i.tolist(), j.tolist(), strict=True))


@pytest.mark.parametrize("pbc", [(True, True, False), (True, False, False), (False, True, False)])
def test_in_plane_lattice_vectors_get_an_orthogonal_placeholder(pbc):
    """A hexagonal slab's lattice vectors lie in the xy plane: the placeholder for the missing
    directions must be orthogonal to them (a box of rank 2 made vesin's search crawl)."""
    cell = np.array([[3.0, 0.0, 0.0], [-1.5, 2.6, 0.0], [0.0, 0.0, 0.0]])
    pbc = np.array(pbc)
    box = _full_rank_box(cell, pbc)
    assert abs(np.linalg.det(box)) > 1e-6
    for k in np.flatnonzero(~pbc):
        assert np.allclose(box[pbc] @ box[k], 0.0) and np.isclose(np.linalg.norm(box[k]), 1.0)


@pytest.mark.parametrize("gap", [1e3, 1e6, 3e7])
def test_fragments_far_apart_keep_exactly_their_own_pairs(gap):
    """Clusters 10^3-10^7 Å apart: the empty gaps are closed before the cell list sees them,
    and the pairs are exactly those of brute force, with the true distances (to the float64
    precision of the coordinates, ~10^-8 Å at 10^7 Å)."""
    rng = np.random.default_rng(7)
    positions = np.concatenate([rng.uniform(0, 4, (12, 3)) + shift for shift in ([0, 0, 0], [gap, 0, 0], [gap, gap, -gap])])
    i, j, shifts, d = neighbor_list(positions, np.zeros((3, 3)), np.zeros(3, bool), 2.5, with_distances=True)
    assert _pairs(i, j, shifts) == [(a, b, (0, 0, 0)) for a, b in _brute_force_pairs(positions, 2.5)]
    np.testing.assert_allclose(d, np.linalg.norm(positions[j] - positions[i], axis=1), rtol=0, atol=1e-7)


def test_slab_with_a_wide_vacuum_gap_matches_ase():
    """Two hexagonal layers 10^5 Å apart along the slab's non-periodic direction."""
    cell = np.array([[5.0, 0.0, 0.0], [2.5, 4.33, 0.0], [0.0, 0.0, 1.0]])
    rng = np.random.default_rng(3)
    frac = rng.uniform(0, 1, (16, 2))
    positions = np.c_[frac @ cell[:2, :2], np.r_[rng.uniform(0, 2, 8), 1e5 + rng.uniform(0, 2, 8)]]
    atoms = Atoms("H16", positions=positions, cell=[cell[0], cell[1], [0, 0, 2e5]], pbc=(True, True, False))
    i, j, shifts = neighbor_list(positions, cell, np.array([True, True, False]), 3.0)
    ai, aj, a_shift = ase_neighbor_list("ijS", atoms, 3.0)
    assert _pairs(i, j, shifts) == _pairs(ai, aj, a_shift)


_SEARCH_IN_A_SUBPROCESS = """
import sys
import numpy as np
from atomistic.data import neighbor_list
case = sys.argv[1]
rng = np.random.default_rng(0)
if case == "flake":  # 2000 atoms over a flat 400 x 400 Å sheet, no periodicity
    positions, cell, pbc = np.c_[rng.uniform(0, 400, (2000, 2)), np.zeros(2000)], np.zeros((3, 3)), [False] * 3
elif case == "sheet":  # the same as a periodic slab
    positions, cell, pbc = np.c_[rng.uniform(0, 400, (2000, 2)), np.zeros(2000)], np.diag([400.0, 400.0, 1.0]), [True, True, False]
else:  # two atoms 10^6 Å apart
    positions, cell, pbc = np.array([[0.0, 0, 0], [1e6, 0, 0]]), np.zeros((3, 3)), [False] * 3
i, j, shifts, d = neighbor_list(positions, cell, np.array(pbc), 1.0, with_distances=True)
print(len(i), bool((d < 1.0).all()))
"""


@pytest.mark.parametrize("case", ["flake", "sheet", "far_pair"])
def test_flat_and_sparse_structures_do_not_crash_the_search(case):
    """Searched at 1 Å (as validation does), these shapes made vesin's cell list shrink one
    direction to zero bins and kill the process with SIGFPE; in a subprocess so a regression
    fails this test instead of the test run."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _SEARCH_IN_A_SUBPROCESS, case], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[1] == "True"


def test_structures_too_elongated_to_search_are_refused_naming_the_field():
    """A periodic cell 10^7 Å long and 3 Å wide would need billions of bin visits at validation's
    1 Å; coordinates past ±10^8 Å are refused before any search (their extents overflowed)."""
    structure = Structure(
        numbers=np.array([14, 14]), positions=np.array([[0.0, 0, 0], [1.5, 1.5, 1.5]]), cell=np.diag([1e7, 3.0, 3.0]), pbc=np.array([True] * 3)
    )
    with pytest.raises(StructureError, match=r"structure 4: field 'cell': the structure is 1e\+07 x 3 x 3 Å across"):
        validate_structure(structure, 4)
    huge = Structure(numbers=np.array([1, 1]), positions=np.array([[1e308, 0, 0], [-1e308, 0, 0]]), cell=np.zeros((3, 3)), pbc=np.zeros(3, bool))
    with pytest.raises(StructureError, match=r"field 'positions': coordinates beyond"):
        validate_structure(huge)
    with pytest.raises(StructureError, match=r"field 'cell': lattice vector components beyond"):
        validate_structure(dataclasses.replace(structure, cell=np.eye(3) * 1e308))
