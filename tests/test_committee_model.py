"""Committee models (atomistic.models.committee): the weighted mean of member potentials, their
force spread, the physics of the mean, and the committee checkpoint."""

import json

import numpy as np
import pytest
import torch
from ase.build import bulk
from typer.testing import CliRunner

from atomistic import keys, load_potential
from atomistic.checkpoint import CheckpointError, save_checkpoint, save_committee
from atomistic.cli import app
from atomistic.models.committee import Committee, edges_within
from atomistic.testing import assert_potential_physics
from atomistic.training.config import ConfigError, load_config
from atomistic.training.run import train
from tests.conftest import small_mace, tiny_training_config


def silicon_germanium():
    atoms = bulk("Si", "diamond", a=5.43, cubic=True)
    atoms.numbers[[1, 4]] = 32
    atoms.rattle(0.05, seed=3)
    return atoms


def members(dtype=torch.float64):
    """Two members that differ in weights, cutoff and (per species) cutoffs."""
    return [
        small_mace(seed=1, cutoff=4.0, dtype=dtype),
        small_mace(seed=2, cutoff=3.6, dtype=dtype, species_cutoffs=(3.6, 3.2, 3.6, 3.0)),
    ]


def test_committee_is_the_weighted_mean_of_its_members_and_reports_their_force_spread():
    first, second = members()
    committee = Committee([first, second], weights=[3.0, 1.0])
    atoms = silicon_germanium()
    properties = ["energy", "energies", "forces", "stress", "forces_spread"]
    (mean,) = committee.predict(atoms, properties=properties)
    (a,) = first.predict(atoms, properties=["energy", "energies", "forces", "stress"])
    (b,) = second.predict(atoms, properties=["energy", "energies", "forces", "stress"])
    assert committee.cutoff == 4.0 and committee.weights == [0.75, 0.25]
    assert abs(a["energy"] - b["energy"]) > 1e-3  # the members do differ
    for key in ("energy", "energies", "forces", "stress"):
        np.testing.assert_allclose(mean[key], 0.75 * np.asarray(a[key]) + 0.25 * np.asarray(b[key]), rtol=0, atol=1e-12)
    deviation = 0.75 * ((a["forces"] - mean["forces"]) ** 2).sum(-1) + 0.25 * ((b["forces"] - mean["forces"]) ** 2).sum(-1)
    np.testing.assert_allclose(mean["forces_spread"], np.sqrt(deviation), rtol=0, atol=1e-12)
    assert mean["forces_spread"].shape == (len(atoms),)
    (spread_only,) = committee.predict(atoms, properties=["forces_spread"])
    np.testing.assert_allclose(spread_only["forces_spread"], mean["forces_spread"], rtol=0, atol=1e-12)


def test_each_member_reads_only_the_edges_within_its_cutoff():
    first, _ = members()
    atoms = silicon_germanium()
    from atomistic.data.convert import to_structures
    from atomistic.data.graph import build_graph

    (structure,) = to_structures(atoms)
    wide = build_graph([structure], 5.0, first.species)
    narrow = build_graph([structure], 4.0, first.species)
    kept = edges_within(wide, 4.0)
    assert kept[keys.EDGE_INDEX].shape[1] == narrow[keys.EDGE_INDEX].shape[1] < wide[keys.EDGE_INDEX].shape[1]
    np.testing.assert_allclose(first(kept)[keys.ENERGY], first(narrow)[keys.ENERGY], rtol=0, atol=1e-10)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["float64", "float32"])
def test_committee_physics(dtype):
    """Equivariance, forces = -dE/dr, stress = strain derivative, extensivity, smoothness at the
    largest member cutoff, isolated atoms at the mean E0."""
    assert_potential_physics(Committee(members(dtype)), silicon_germanium())


def test_committee_checkpoint_round_trip_and_listing(tmp_path, monkeypatch):
    directories = []
    for i, member in enumerate(members()):
        member.metadata.name = f"member{i}"
        directories.append(save_checkpoint(member, tmp_path / "src" / f"member{i}", weights_dtype=torch.float64))
    target = save_committee(directories, tmp_path / "ckpts" / "pair", weights=[1.0, 1.0], provenance={"note": "test"})
    manifest = json.loads((target / "manifest.json").read_text())
    assert manifest["architecture"] == {"committee": {"members": ["members/member0", "members/member1"], "weights": [0.5, 0.5]}}
    assert manifest["cutoff"] == 4.0 and "forces_spread" in manifest["properties"]
    loaded = load_potential(target, dtype="float64")
    assert isinstance(loaded, Committee) and loaded.metadata.provenance == {"note": "test"}
    atoms = silicon_germanium()
    (expected,) = Committee(members()).predict(atoms, properties=["energy", "forces", "forces_spread"])
    (got,) = loaded.predict(atoms, properties=["energy", "forces", "forces_spread"])
    for key in expected:
        np.testing.assert_allclose(got[key], expected[key], rtol=0, atol=1e-10)
    # a committee may replace the checkpoint directory that holds one of its members
    replaced = save_committee([directories[0], target / "members" / "member1"], target)
    assert sorted(p.name for p in (replaced / "members").iterdir()) == ["member0", "member1"]
    (again,) = load_potential(replaced, dtype="float64").predict(atoms, properties=["energy"])
    assert abs(again["energy"] - expected["energy"]) < 1e-10
    monkeypatch.setenv("ATOMISTIC_CHECKPOINTS", str(tmp_path / "ckpts"))
    result = CliRunner().invoke(app, ["models"])
    assert result.exit_code == 0 and "committee of 2" in result.output
    # atomistic eval scores a committee like any model
    from tests.paths import DATA

    records = json.loads((DATA / "mlearn" / "Si" / "training.json").read_text())[:3]
    (tmp_path / "si.json").write_text(json.dumps(records))
    result = CliRunner().invoke(app, ["eval", "pair", str(tmp_path / "si.json"), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["n_structures"] == 3


def test_committee_refusals(tmp_path):
    first, second = members()
    with pytest.raises(ValueError, match="at least two members"):
        Committee([first])
    with pytest.raises(ValueError, match="one positive number per member"):
        Committee([first, second], weights=[1.0, 0.0])
    from atomistic.models.builders import build_potential, mace_architecture
    from atomistic.models.encoders.mace import MACEConfig

    other = build_potential(mace_architecture(MACEConfig(species=(1, 8), cutoff=3.0, channels=4, max_ell=1, radial_hidden=(8,))))
    with pytest.raises(ValueError, match="same elements"):
        Committee([first, other.double()])
    committee = Committee([first, second])
    with pytest.raises(ValueError, match="train .*its members"):
        committee(build_graph_of(first), training=True)
    target = save_committee(
        [save_checkpoint(m, tmp_path / f"m{i}") for i, m in enumerate((first, second))], tmp_path / "pair"
    )
    manifest = json.loads((target / "manifest.json").read_text())
    manifest["architecture"]["committee"]["members"][1] = "../m1"
    (target / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CheckpointError, match="outside the checkpoint"):
        load_potential(target)


def build_graph_of(potential):
    from atomistic.data.convert import to_structures
    from atomistic.data.graph import build_graph

    return build_graph(list(to_structures(silicon_germanium())), potential.cutoff, potential.species)


def test_a_committee_is_not_fine_tuned_as_one_model(tmp_path):
    first, second = members()
    target = save_committee(
        [save_checkpoint(m, tmp_path / f"m{i}") for i, m in enumerate((first, second))], tmp_path / "pair"
    )
    config = load_config(tiny_training_config(tmp_path, "init_committee", epochs=1))
    with pytest.raises(ConfigError, match="committee is not fine-tuned"):
        train(config, init=str(target), log=lambda *_: None)


def test_server_lists_a_committee_and_returns_its_force_spread(tmp_path):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from server.config import Settings
    from server.main import create_app

    sources = []
    for i, member in enumerate(members()):
        member.metadata.name = f"member{i}"
        sources.append(save_checkpoint(member, tmp_path / f"member{i}", weights_dtype=torch.float64))
    target = save_committee(sources, tmp_path / "pair")
    atoms = silicon_germanium()
    structure = {"numbers": atoms.numbers.tolist(), "positions": atoms.positions.tolist(), "cell": atoms.cell.tolist(), "pbc": True}
    settings = Settings(models=[str(target)], data_dir=str(tmp_path / "data"), dtype="float64")
    with TestClient(create_app(settings)) as client:
        (info,) = client.get("/v1/models").json()
        response = client.post("/v1/predict", json={"model": info["name"], "properties": ["energy", "forces_spread"], "structures": [structure]})
    assert info["encoder"] == "committee(mace, mace)" and "forces_spread" in info["properties"]
    assert response.status_code == 200, response.text
    (result,) = response.json()["results"]
    (local,) = load_potential(target, dtype="float64").predict(atoms, properties=["energy", "forces_spread"])
    assert "forces" not in result  # not asked for
    np.testing.assert_allclose(result["forces_spread"], local["forces_spread"], rtol=0, atol=1e-9)
    assert abs(result["energy"] - local["energy"]) < 1e-9


def test_ase_calculator_leaves_the_committee_force_spread_in_its_results():
    from atomistic import AtomisticCalculator

    committee = Committee(members())
    atoms = silicon_germanium()
    atoms.calc = AtomisticCalculator(potential=committee)
    forces = atoms.get_forces()
    (expected,) = committee.predict(atoms, properties=["forces", "forces_spread"])
    np.testing.assert_allclose(forces, expected["forces"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(atoms.calc.results["forces_spread"], expected["forces_spread"], rtol=0, atol=1e-12)
