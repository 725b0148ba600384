from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch
from ase.build import bulk

from atomistic import load_potential
from atomistic.checkpoint import CheckpointError, resolve_recorded, save_checkpoint

from .conftest import small_mace


def test_roundtrip_float64(tmp_path):
    potential = small_mace(3, 1, 3, 2)
    save_checkpoint(potential, tmp_path / "m", provenance={"data": "none"}, metrics={"x": 1}, weights_dtype=torch.float64)
    loaded = load_potential(tmp_path / "m")
    atoms = bulk("Si", "diamond", 5.43)
    atoms.rattle(0.05, seed=0)
    (a,), (b,) = potential.predict(atoms), loaded.predict(atoms)
    assert a["energy"] == pytest.approx(b["energy"], abs=1e-12)
    np.testing.assert_allclose(a["forces"], b["forces"], atol=1e-12)
    manifest = json.loads((tmp_path / "m" / "manifest.json").read_text())
    assert manifest["format_version"] == 1
    assert manifest["species"] == [3, 14, 32, 42] and manifest["cutoff"] == 4.0
    assert set(manifest["e0s"]) == {"3", "14", "32", "42"}
    assert manifest["units"]["energy"] == "eV"
    assert manifest["provenance"] == {"data": "none"} and manifest["metrics"] == {"x": 1}
    assert loaded.metadata.provenance == {"data": "none"}


def test_roundtrip_with_element_dependent_radial_functions(tmp_path):
    potential = small_mace(2, 1, 3, 2, species_radial=True)
    save_checkpoint(potential, tmp_path / "m", weights_dtype=torch.float64)
    loaded = load_potential(tmp_path / "m")
    assert loaded.encoder.config.species_radial
    atoms = bulk("Si", "diamond", 5.43)
    atoms.rattle(0.05, seed=1)
    (a,), (b,) = potential.predict(atoms), loaded.predict(atoms)
    assert a["energy"] == pytest.approx(b["energy"], abs=1e-12)
    np.testing.assert_allclose(a["forces"], b["forces"], atol=1e-12)


def test_load_as_float32(tmp_path):
    save_checkpoint(small_mace(), tmp_path / "m")
    loaded = load_potential(tmp_path / "m", dtype="float32")
    assert loaded.dtype == torch.float32
    assert np.isfinite(loaded.predict(bulk("Ge", "diamond", 5.76))[0]["energy"])


def test_pickle_file_is_refused(tmp_path):
    potential = small_mace()
    path = tmp_path / "model.pt"
    torch.save(potential.state_dict(), path)
    with pytest.raises(CheckpointError, match="refusing to load .* pickle"):
        load_potential(path)
    raw = tmp_path / "weights.bin.data"
    raw.write_bytes(pickle.dumps({"a": 1}))
    with pytest.raises(CheckpointError, match="pickle"):
        load_potential(raw)


def test_directory_with_only_a_pickle_is_refused(tmp_path):
    directory = tmp_path / "m"
    save_checkpoint(small_mace(), directory)
    (directory / "weights.safetensors").unlink()
    torch.save({}, directory / "model.pth")
    with pytest.raises(CheckpointError, match=r"no weights.safetensors .*pickle"):
        load_potential(directory)


def test_unknown_version_and_missing_manifest(tmp_path):
    directory = tmp_path / "m"
    save_checkpoint(small_mace(), directory)
    manifest = json.loads((directory / "manifest.json").read_text())
    manifest["format_version"] = 99
    (directory / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CheckpointError, match="unknown checkpoint format_version 99"):
        load_potential(directory)
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match="has no manifest.json"):
        load_potential(tmp_path / "empty")


def test_names_resolve_to_checkpoints(tmp_path, monkeypatch):
    save_checkpoint(small_mace(), tmp_path / "tiny")
    monkeypatch.setenv("ATOMISTIC_CHECKPOINTS", str(tmp_path))
    assert load_potential("tiny").atomic_numbers == (3, 14, 32, 42)
    with pytest.raises(CheckpointError, match="no model named 'nothing'.*tiny"):
        load_potential("nothing")


def test_recorded_init_resolves_as_given_then_under_root(tmp_path, monkeypatch):
    store, root = tmp_path / "store", tmp_path / "root"
    save_checkpoint(small_mace(), store / "tiny")
    save_checkpoint(small_mace(), root / "runs" / "a" / "best")
    monkeypatch.setenv("ATOMISTIC_CHECKPOINTS", str(store))
    monkeypatch.chdir(tmp_path)
    assert resolve_recorded("tiny", root) == store / "tiny"  # a model name
    assert resolve_recorded("runs/a/best", root) == root / "runs" / "a" / "best"  # relative to the run's root
    assert resolve_recorded("root/runs/a/best", root) == Path("root/runs/a/best")  # as given
    assert resolve_recorded("runs/gone/best", root) is None
    assert resolve_recorded("gone", root) is None


def test_shipped_mlearn_small_loads_and_predicts():
    potential = load_potential("mlearn-small")
    assert "validation" in potential.metadata.metrics
    assert set(potential.atomic_numbers) == {3, 14, 32, 42}
    (r,) = potential.predict(bulk("Si", "diamond", 5.43))
    assert -6.0 < r["energy"] / 2 < -5.0  # PBE Si: about -5.4 eV/atom


def test_mlearn_small_physics():
    from atomistic.testing import assert_potential_physics, random_periodic_structure

    potential = load_potential("mlearn-small")
    for seed in (0, 1):
        atoms = random_periodic_structure((3, 14, 32, 42), n_atoms=6, seed=seed, density=0.04)
        assert_potential_physics(potential, atoms, seed=seed)


def test_clebsch_gordan_constants_are_rebuilt_not_stored(tmp_path):
    """A float32 checkpoint loaded in float64 keeps exact equivariance: e3nn's compiled
    Clebsch-Gordan buffers are never stored, so they are rebuilt in float64."""
    from safetensors.torch import load_file

    from atomistic.testing import check_rotation, random_periodic_structure, random_rotation

    save_checkpoint(small_mace(2, 2, 3, 2), tmp_path / "m", weights_dtype=torch.float32)
    assert not [k for k in load_file(str(tmp_path / "m" / "weights.safetensors")) if "_compiled_main" in k]
    loaded = load_potential(tmp_path / "m", dtype="float64")
    atoms = random_periodic_structure((3, 14, 32, 42), n_atoms=6, seed=4)
    deviation = check_rotation(loaded, atoms, random_rotation(np.random.default_rng(0)))
    assert deviation["energy"] < 1e-12 and deviation["forces"] < 1e-12


@pytest.mark.parametrize(
    ("name", "species"),
    [
        ("mlearn", (3, 14, 32, 42)),  # a committee of the next two
        ("mlearn-mace", (3, 14, 32, 42)),
        ("mlearn-sevennet", (3, 14, 32, 42)),
        ("mlearn-compact", (3, 14, 32, 42)),
        ("organic", (1, 6, 8)),
        ("organic-compact", (1, 6, 8)),
    ],
)
def test_shipped_trained_models_physics(name, species):
    """Every shipped model trained here: equivariance, forces = -dE/dr, stress = strain
    derivative, batching and extensivity on a random periodic cell of its elements (float64)."""
    from atomistic.testing import assert_potential_physics, random_periodic_structure

    potential = load_potential(name, dtype="float64")
    assert set(potential.atomic_numbers) == set(species)
    atoms = random_periodic_structure(species, n_atoms=6, seed=2, density=0.04)
    assert_potential_physics(potential, atoms, seed=2)


# Heavy isolated-atom references (eV; the first two are acetylacetone's C and O): totals of
# thousands of eV, where neighbouring float32 values lie 1-2 meV apart.
HEAVY_E0S = [-1026.8538996116154, -2037.796869412825, -3012.4471286421, -4099.12345678901]


def test_float32_model_keeps_float64_references_and_totals(tmp_path):
    """A float32 model sums its energies in float64 around exact float64 E0s: its totals agree
    with the same weights in float64 to the network's float32 precision (~µeV here), not the
    2 meV spacing of float32 numbers near its −16 400 eV; a float32 checkpoint keeps the E0s exact."""
    potential = small_mace()
    potential.heads["energy"].e0s.copy_(torch.tensor(HEAVY_E0S, dtype=torch.float64))
    atoms = bulk("Mo", "bcc", 3.16, cubic=True).repeat((2, 1, 1))
    atoms.rattle(0.05, seed=3)
    (exact,) = potential.predict(atoms)
    assert abs(exact["energy"]) > 8000

    single = small_mace(dtype=torch.float32)
    single.load_state_dict(potential.state_dict())
    head = single.heads["energy"]
    assert head.e0s.dtype == torch.float64 and head.scale.dtype == torch.float32
    assert head.e0s.tolist() == HEAVY_E0S
    (approx,) = single.predict(atoms)
    assert approx["energy"] == pytest.approx(exact["energy"], abs=2e-5)
    # the float64 total is not a float32 number (float32's grid near −16 400 eV is 2 meV)
    assert float(np.float32(exact["energy"])) != exact["energy"]

    save_checkpoint(single, tmp_path / "m")  # float32 weights
    loaded = load_potential(tmp_path / "m", dtype="float32")
    assert loaded.heads["energy"].e0s.tolist() == HEAVY_E0S
    manifest = json.loads((tmp_path / "m" / "manifest.json").read_text())
    assert manifest["weights_dtype"] == "float32"
    assert [manifest["e0s"][str(z)] for z in manifest["species"]] == HEAVY_E0S
    (reloaded,) = loaded.predict(atoms)
    assert reloaded["energy"] == pytest.approx(approx["energy"], abs=2e-5)  # kernel backend may differ
    np.testing.assert_allclose(reloaded["forces"], approx["forces"], atol=1e-5)
