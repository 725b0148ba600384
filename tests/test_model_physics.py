"""Every model configuration passes the physical checks of atomistic.testing."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from ase import Atoms
from ase.build import bulk

from atomistic import keys
from atomistic.testing import (
    assert_potential_physics,
    check_batch_consistency,
    check_rotation,
    random_periodic_structure,
    random_rotation,
)

from .conftest import MACE_VARIANTS, MLEARN_SPECIES, small_mace


@pytest.mark.parametrize("variant", MACE_VARIANTS, ids=lambda v: "ell{}-h{}-corr{}-layers{}".format(*v))
def test_physics_float64(variant):
    potential = small_mace(*variant)
    atoms = random_periodic_structure(MLEARN_SPECIES, n_atoms=5, seed=sum(variant))
    assert_potential_physics(potential, atoms, seed=1)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["float64", "float32"])
def test_physics_with_element_dependent_radial_functions(dtype):
    potential = small_mace(2, 1, 3, 2, dtype=dtype, species_radial=True)
    atoms = random_periodic_structure(MLEARN_SPECIES, n_atoms=6, seed=11)
    assert_potential_physics(potential, atoms, seed=4)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["float64", "float32"])
def test_physics_with_a_cutoff_per_species(dtype):
    # Li 4 Å, Si 3 Å, Ge 3.5 Å, Mo 2.6 Å: smoothness is checked at each of the ten pair cutoffs
    potential = small_mace(2, 1, 3, 2, dtype=dtype, species_cutoffs=(4.0, 3.0, 3.5, 2.6))
    atoms = random_periodic_structure(MLEARN_SPECIES, n_atoms=6, seed=13)
    assert_potential_physics(potential, atoms, seed=6)


def test_a_cutoff_per_species_drops_the_edges_beyond_each_pair_cutoff():
    from atomistic.testing import species_pair_cutoffs

    per_species = small_mace(2, 1, 3, 2, species_cutoffs=(4.0, 3.0, 3.5, 2.6))
    assert species_pair_cutoffs(per_species)[(3, 42)] == pytest.approx(3.3)
    li_mo = lambda d: Atoms("LiMo", positions=[[0, 0, 0], [d, 0, 0]])  # noqa: E731
    lone = per_species.predict(Atoms("LiMo", positions=[[0, 0, 0], [20.0, 0, 0]]))[0]["energy"]
    assert per_species.predict(li_mo(3.31))[0]["energy"] == pytest.approx(lone, abs=1e-14)
    assert abs(per_species.predict(li_mo(3.0))[0]["energy"] - lone) > 1e-6
    # cutoffs equal to the graph's everywhere: the same function as the plain model
    plain = small_mace(2, 1, 3, 2)
    same = small_mace(2, 1, 3, 2, species_cutoffs=(4.0,) * 4)
    atoms = random_periodic_structure(MLEARN_SPECIES, n_atoms=6, seed=14)
    (a,), (b,) = plain.predict(atoms), same.predict(atoms)
    assert b["energy"] == pytest.approx(a["energy"], rel=1e-12)
    np.testing.assert_allclose(b["forces"], a["forces"], atol=1e-12)


def test_species_cutoffs_are_validated():
    from atomistic.models.encoders.mace import MACEConfig

    with pytest.raises(ValueError, match="species_cutoffs.*one cutoff per species"):
        MACEConfig(species=(3, 14), cutoff=5.0, species_cutoffs=(5.0,))
    with pytest.raises(ValueError, match="species_cutoffs.*at most cutoff"):
        MACEConfig(species=(3, 14), cutoff=5.0, species_cutoffs=(6.0, 5.0))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["float64", "float32"])
def test_physics_with_per_species_energy_scale(dtype):
    potential = small_mace(2, 1, 3, 2, dtype=dtype)
    potential.heads["energy"].scale.copy_(torch.tensor([0.26, 0.87, 0.66, 1.57], dtype=dtype))
    atoms = random_periodic_structure(MLEARN_SPECIES, n_atoms=6, seed=12)
    assert_potential_physics(potential, atoms, seed=5)


def test_one_scale_for_all_species_loads_into_the_per_species_scale():
    # checkpoints written before the scale was per species hold a single value
    potential = small_mace(2, 1, 3, 2)
    state = potential.state_dict()
    state["heads.energy.scale"] = torch.tensor(0.75, dtype=torch.float64)
    other = small_mace(2, 1, 3, 2, seed=1)
    other.load_state_dict(state)
    assert torch.equal(other.heads["energy"].scale, torch.full((4,), 0.75, dtype=torch.float64))
    head = potential.heads["energy"]
    head.scale.fill_(0.75)
    atoms = random_periodic_structure(MLEARN_SPECIES, n_atoms=5, seed=2)
    assert potential.predict(atoms)[0]["energy"] == pytest.approx(other.predict(atoms)[0]["energy"], rel=1e-12)


def test_element_dependent_radial_feature_layout():
    """The radial MLP's inputs: the basis, then the basis in the slot of the centre's species
    and in the slot of the neighbour's species; zero wherever the basis is zero."""
    from atomistic.models.encoders.mace import species_radial_features

    radial = torch.rand(5, 3, dtype=torch.float64)
    onehot = torch.nn.functional.one_hot(torch.tensor([0, 1, 2, 3, 0]), 4).to(torch.float64)
    features = species_radial_features(radial, onehot, onehot.flip(0))
    assert features.shape == (5, 3 * (1 + 2 * 4))
    torch.testing.assert_close(features[:, :3], radial)
    # the centre block of edge 1 (species 1) holds the basis in its second slot only
    torch.testing.assert_close(features[1, 3:15].reshape(3, 4)[:, 1], radial[1])
    assert features[1, 3:15].reshape(3, 4)[:, [0, 2, 3]].abs().sum() == 0
    # the neighbour block of edge 1 (species reversed: 3)
    torch.testing.assert_close(features[1, 15:].reshape(3, 4)[:, 3], radial[1])
    # a zero basis (beyond the cutoff) gives zero features for every species
    assert species_radial_features(torch.zeros(5, 3, dtype=torch.float64), onehot, onehot).abs().sum() == 0


def test_physics_float32_honest_tolerances():
    potential = small_mace(2, 1, 3, 2, dtype=torch.float32)
    atoms = random_periodic_structure(MLEARN_SPECIES, n_atoms=5, seed=3)
    assert_potential_physics(potential, atoms, seed=2)


def test_float32_close_to_float64():
    p64 = small_mace(2, 1, 3, 2)
    p32 = small_mace(2, 1, 3, 2, dtype=torch.float32)
    p32.load_state_dict({k: v.to(torch.float32) if v.is_floating_point() else v for k, v in p64.state_dict().items()})
    atoms = random_periodic_structure(MLEARN_SPECIES, n_atoms=6, seed=5)
    (a,), (b,) = p64.predict(atoms), p32.predict(atoms)
    assert abs(a["energy"] - b["energy"]) < 1e-4 * max(1, abs(a["energy"]))
    np.testing.assert_allclose(a["forces"], b["forces"], atol=1e-4)


def test_batch_of_mixed_systems_equals_single():
    potential = small_mace()
    structures = [
        random_periodic_structure(MLEARN_SPECIES, n_atoms=4, seed=1),
        Atoms("SiGe", positions=[[0, 0, 0], [2.3, 0.1, 0]]),  # molecule
        bulk("Mo", "bcc", 3.16),  # one atom, cell smaller than the cutoff
        random_periodic_structure((14,), n_atoms=3, seed=2),
    ]
    slab = bulk("Si", "diamond", 5.43, cubic=True)
    slab.pbc = (True, True, False)
    structures.append(slab)
    worst = check_batch_consistency(potential, structures)
    assert max(worst.values()) < 1e-10


def test_slab_and_molecule_rotation():
    potential = small_mace(3, 1, 3, 2)
    rng = np.random.default_rng(0)
    slab = bulk("Ge", "diamond", 5.76, cubic=True)
    slab.pbc = (True, True, False)
    slab.rattle(0.05, seed=3)
    molecule = Atoms("Si3Li", positions=[[0, 0, 0], [2.2, 0, 0], [0, 2.4, 0.3], [1, 1, 1.8]])
    for atoms in (slab, molecule):
        deviation = check_rotation(potential, atoms, random_rotation(rng, reflection=True))
        assert deviation["energy"] < 1e-9 and deviation["forces"] < 1e-9


def test_molecule_has_no_stress():
    potential = small_mace()
    (result,) = potential.predict(Atoms("Si2", positions=[[0, 0, 0], [2.3, 0, 0]]))
    assert keys.STRESS not in result and keys.FORCES in result
    np.testing.assert_allclose(result[keys.FORCES].sum(axis=0), 0.0, atol=1e-12)


def test_predict_rejects_unsupported_element_and_property():
    potential = small_mace()
    from atomistic.data import StructureError

    with pytest.raises(StructureError, match="not supported by this model"):
        potential.predict(Atoms("Au", positions=[[0, 0, 0]]))
    with pytest.raises(ValueError, match="unknown properties"):
        potential.predict(Atoms("Si", positions=[[0, 0, 0]]), properties=("energy", "dipole"))


def test_config_validation():
    from atomistic.models.encoders.mace import MACEConfig

    with pytest.raises(ValueError, match="max_ell"):
        MACEConfig(species=(14,), max_ell=4)
    with pytest.raises(ValueError, match="num_layers"):
        MACEConfig(species=(14,), num_layers=5)
    with pytest.raises(ValueError, match="correlation"):
        MACEConfig(species=(14,), correlation=0)


def test_bad_structure_does_not_take_down_its_batch():
    potential = small_mace()
    good = random_periodic_structure(MLEARN_SPECIES, n_atoms=4, seed=1)
    bad = {"numbers": [14, 14], "positions": [[0, 0, 0], [0.01, 0, 0]]}
    results = potential.predict([good, bad, Atoms("Au", positions=[[0, 0, 0]]), good], errors="return")
    assert "error" in results[1] and results[1]["error"].index == 1 and "apart" in str(results[1]["error"])
    assert "error" in results[2] and "not supported" in str(results[2]["error"])
    (alone,) = potential.predict(good)
    for k in (0, 3):
        assert results[k]["energy"] == pytest.approx(alone["energy"], abs=1e-10)
