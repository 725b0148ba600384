"""What the model sees of a structure: positions wrapped and centred in float64, the same edges."""

from __future__ import annotations

import numpy as np
import pytest
from ase.build import bulk, molecule

import atomistic
from atomistic.data.convert import as_structure
from atomistic.data.graph import model_frame, structure_edges


def _edge_vectors(positions, cell, edges, shifts):
    return positions[edges[1]] - positions[edges[0]] + shifts @ cell


@pytest.mark.parametrize("pbc", [(True, True, True), (True, True, False), (False, False, False)])
def test_model_frame_keeps_every_edge_vector(pbc):
    atoms = bulk("Si", "diamond", 5.43, cubic=True)
    atoms.pbc = pbc
    rng = np.random.default_rng(0)
    atoms.positions += rng.integers(-3, 4, (len(atoms), 3)) @ (atoms.cell.array * np.array(pbc)[:, None])  # unwrapped
    atoms.positions += [2e3, -1e3, 5e2]
    structure = as_structure(atoms)
    edges, shifts = structure_edges(structure, 4.0)
    positions, local_edges, local_shifts = model_frame(structure, 4.0)
    np.testing.assert_array_equal(local_edges, edges)
    np.testing.assert_allclose(
        _edge_vectors(positions, structure.cell, edges, local_shifts),
        _edge_vectors(structure.positions, structure.cell, edges, shifts),
        atol=1e-9,
    )
    assert np.abs(positions.mean(axis=0)).max() < 1e-9
    assert np.abs(local_shifts).max() <= 1  # each edge reaches at most the next image of a 5.43 Å cell


def test_float32_predictions_do_not_depend_on_where_the_structure_sits():
    """A molecule 10^4 Å from the origin, and a crystal whose atoms sit several cells away from
    it, give the float32 model the same numbers as at home (the forces were ~40 meV/Å off)."""
    potential = atomistic.load_potential("organic", dtype="float32")
    home = molecule("CH3CH2OH")
    away = home.copy()
    away.positions += [1e4, -1e4, 1e4]
    at_home, far_away = potential.predict([home, away])
    np.testing.assert_allclose(far_away["energy"], at_home["energy"], rtol=0, atol=1e-4)
    np.testing.assert_allclose(far_away["forces"], at_home["forces"], rtol=0, atol=1e-4)

    silicon = atomistic.load_potential("mlearn-small", dtype="float32")
    crystal = bulk("Si", "diamond", 5.43, cubic=True)
    crystal.rattle(0.05, seed=1)
    unwrapped = crystal.copy()
    unwrapped.positions += np.arange(len(crystal))[:, None] * 37 * crystal.cell.array[0] + [3e3, 0, 0]
    wrapped_result, unwrapped_result = silicon.predict([crystal, unwrapped])
    for key, tol in (("energy", 1e-4), ("forces", 1e-4), ("stress", 1e-6)):
        np.testing.assert_allclose(unwrapped_result[key], wrapped_result[key], rtol=0, atol=tol)
