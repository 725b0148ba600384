"""CEITNet-style tensor heads: exact O(3) equivariance, exact index symmetries, zero
piezoelectric response for centrosymmetric crystals, and the Voigt conventions."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from ase import Atoms

from atomistic.data import to_structures
from atomistic.data.graph import build_graph
from atomistic.models.heads.tensors import (
    DIELECTRIC,
    ELASTIC,
    PIEZOELECTRIC,
    DielectricHead,
    ElasticHead,
    PiezoelectricHead,
    SphericalTensorHead,
)
from atomistic.testing import random_periodic_structure
from atomistic.voigt import (
    elastic_from_voigt_mp,
    elastic_to_voigt_mp,
    piezo_from_voigt_vasp,
    piezo_to_voigt_vasp,
)

from .conftest import MLEARN_SPECIES, small_mace

HEADS = {
    "dielectric": (DielectricHead, 2),
    "piezoelectric": (PiezoelectricHead, 3),
    "elastic": (ElasticHead, 4),
    "dielectric-3-pairs": (lambda irreps, cutoff: DielectricHead(irreps, cutoff, pairs=3), 2),
    "elastic-3-pairs": (lambda irreps, cutoff: ElasticHead(irreps, cutoff, pairs=3), 4),
    "sh-dielectric": (lambda irreps, cutoff: SphericalTensorHead(irreps, cutoff, DIELECTRIC), 2),
    "sh-piezoelectric": (lambda irreps, cutoff: SphericalTensorHead(irreps, cutoff, PIEZOELECTRIC), 3),
    "sh-elastic": (lambda irreps, cutoff: SphericalTensorHead(irreps, cutoff, ELASTIC), 4),
}


def _tensor(head_name: str, atoms: Atoms, seed: int = 0) -> np.ndarray:
    potential = small_mace(2, 1, 3, 2)
    torch.manual_seed(seed)
    head_cls, _ = HEADS[head_name]
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)  # e3nn bakes its constants in the construction dtype
    try:
        head = head_cls(potential.encoder.irreps_out, cutoff=potential.cutoff).to(torch.float64)
    finally:
        torch.set_default_dtype(previous)
    graph = build_graph(list(to_structures([atoms])), potential.cutoff, potential.species, dtype=torch.float64)
    outputs = potential.encoder(graph)
    return head(graph, outputs)[head.output_key][0].detach().numpy()


def _random_orthogonal(seed: int, reflect: bool) -> np.ndarray:
    q, _ = np.linalg.qr(np.random.default_rng(seed).normal(size=(3, 3)))
    if (np.linalg.det(q) < 0) != reflect:
        q[:, 0] *= -1
    return q


@pytest.mark.parametrize("reflect", [False, True], ids=["rotation", "rotoreflection"])
@pytest.mark.parametrize("head_name", HEADS)
def test_equivariance_float64(head_name, reflect):
    atoms = random_periodic_structure(MLEARN_SPECIES, n_atoms=5, seed=4)
    rotation = _random_orthogonal(7, reflect)
    rotated = atoms.copy()
    rotated.positions = atoms.positions @ rotation.T
    rotated.cell = atoms.cell.array @ rotation.T
    tensor, tensor_rotated = _tensor(head_name, atoms), _tensor(head_name, rotated)
    order = HEADS[head_name][1]
    expected = tensor
    for axis in range(order):  # R ⊗ ... ⊗ R · T
        expected = np.moveaxis(np.tensordot(rotation, expected, axes=([1], [axis])), 0, axis)
    scale = max(1.0, np.abs(tensor).max())
    # the Cartesian heads are exact polynomials in the edge directions (1e-10); the spherical
    # baseline goes through e3nn's numerically derived change of basis, good to ~3e-9
    tolerance = 1e-8 if head_name.startswith("sh-") else 1e-10
    assert np.abs(tensor_rotated - expected).max() < tolerance * scale
    assert np.abs(tensor).max() > 1e-6  # not trivially zero


def test_index_symmetries_hold_exactly():
    atoms = random_periodic_structure(MLEARN_SPECIES, n_atoms=6, seed=2)
    eps = _tensor("dielectric", atoms)
    assert np.array_equal(eps, eps.T)
    e = _tensor("piezoelectric", atoms)
    assert np.array_equal(e, e.transpose(0, 2, 1))
    c = _tensor("elastic", atoms)
    for permutation in ((1, 0, 2, 3), (0, 1, 3, 2), (2, 3, 0, 1)):
        assert np.array_equal(c, c.transpose(permutation))


def test_piezoelectric_vanishes_for_centrosymmetric_crystals():
    rng = np.random.default_rng(3)
    cell = np.diag([4.1, 4.6, 5.3]) + rng.normal(scale=0.3, size=(3, 3))
    fractional = rng.uniform(size=(3, 3))
    numbers = [14, 32, 42]
    # every atom at f has a partner of the same element at -f: inversion is a symmetry
    centro = Atoms(numbers=numbers * 2, scaled_positions=np.concatenate([fractional, -fractional]) % 1.0, cell=cell, pbc=True)
    e_centro = _tensor("piezoelectric", centro)
    broken = centro.copy()
    broken.positions[0] += [0.15, -0.1, 0.05]
    e_broken = _tensor("piezoelectric", broken)
    assert np.abs(e_broken).max() > 1e-4
    assert np.abs(e_centro).max() < 1e-12 * max(1.0, np.abs(e_broken).max())


def test_voigt_orderings():
    c = np.zeros((3, 3, 3, 3))
    c[0, 1, 0, 1] = c[1, 0, 0, 1] = c[0, 1, 1, 0] = c[1, 0, 1, 0] = 7.0  # C_xyxy -> C66
    c[1, 2, 2, 2] = c[2, 1, 2, 2] = c[2, 2, 1, 2] = c[2, 2, 2, 1] = 3.0  # C_yzzz -> C43 and C34
    voigt = elastic_to_voigt_mp(c)
    assert voigt[5, 5] == 7.0 and voigt[3, 2] == 3.0 and voigt[2, 3] == 3.0 and np.count_nonzero(voigt) == 3
    np.testing.assert_array_equal(elastic_from_voigt_mp(voigt), c)
    e = np.zeros((3, 3, 3))
    e[0, 0, 1] = e[0, 1, 0] = 2.0  # x, xy -> column 3 (VASP order xx yy zz xy yz zx)
    e[2, 2, 0] = e[2, 0, 2] = 5.0  # z, zx -> column 5
    v = piezo_to_voigt_vasp(e)
    assert v[0, 3] == 2.0 and v[2, 5] == 5.0 and np.count_nonzero(v) == 2
    np.testing.assert_array_equal(piezo_from_voigt_vasp(v), e)
