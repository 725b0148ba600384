"""Crystal tensors end to end: labels in files, training, evaluation metrics, prediction,
the server, and the order-3 (piezoelectric) head learning a known analytic function."""

from __future__ import annotations

import importlib.util
import json
import tempfile

import numpy as np
import pytest
import torch
from ase import Atoms
from ase.io import write
from typer.testing import CliRunner

from atomistic import keys
from atomistic.checkpoint import load_potential, save_checkpoint
from atomistic.cli import app
from atomistic.data import StructureError, read_structures
from atomistic.models.builders import build_potential
from atomistic.testing import analytic_piezo_frames
from atomistic.training.config import load_config
from atomistic.training.metrics import evaluate, tensor_metrics, vrh_moduli
from atomistic.training.run import prepare
from atomistic.voigt import elastic_from_voigt_mp, piezo_to_voigt_vasp

from .paths import DATA, ROOT

spec = importlib.util.spec_from_file_location("tensor_model_card", ROOT / "scripts" / "tensor_model_card.py")
tensor_model_card = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tensor_model_card)

runner = CliRunner()
ENCODER = {"name": "mace", "config": {"species": [13, 29, 79], "cutoff": 4.0, "channels": 4, "max_ell": 1, "num_layers": 1, "correlation": 2, "radial_hidden": [8]}}


def isotropic(lam: float, mu: float) -> np.ndarray:
    eye = np.eye(3)
    return lam * np.einsum("ij,kl->ijkl", eye, eye) + mu * (np.einsum("ik,jl->ijkl", eye, eye) + np.einsum("il,jk->ijkl", eye, eye))


def test_tensor_labels_read_from_extxyz_in_every_convention(tmp_path):
    atoms = Atoms("Cu", cell=np.eye(3) * 2.5, pbc=True)
    voigt = np.arange(36.0).reshape(6, 6)
    voigt = voigt + voigt.T
    e = np.random.default_rng(0).normal(size=(3, 3, 3))
    e = e + e.transpose(0, 2, 1)
    atoms.info = {"elastic_tensor": voigt.reshape(-1), "piezoelectric_tensor": piezo_to_voigt_vasp(e).reshape(-1), "dielectric_tensor": np.eye(3).reshape(-1) * 4}
    full = atoms.copy()
    full.info = {"elastic_tensor": elastic_from_voigt_mp(voigt).reshape(-1), "piezoelectric_tensor": e.reshape(-1)}
    write(tmp_path / "t.extxyz", [atoms, full])
    voigt_form, full_form = read_structures(tmp_path / "t.extxyz")
    np.testing.assert_array_equal(voigt_form.labels[keys.ELASTIC_TENSOR], elastic_from_voigt_mp(voigt))
    np.testing.assert_allclose(voigt_form.labels[keys.PIEZOELECTRIC_TENSOR], e)
    np.testing.assert_array_equal(voigt_form.labels[keys.DIELECTRIC_TENSOR], 4 * np.eye(3))
    np.testing.assert_array_equal(full_form.labels[keys.ELASTIC_TENSOR], voigt_form.labels[keys.ELASTIC_TENSOR])
    np.testing.assert_allclose(full_form.labels[keys.PIEZOELECTRIC_TENSOR], e)
    bad = atoms.copy()
    bad.info = {"elastic_tensor": np.arange(35.0)}
    write(tmp_path / "bad.extxyz", bad)
    with pytest.raises(StructureError, match="field 'elastic_tensor'.*36"):
        read_structures(tmp_path / "bad.extxyz")
    asymmetric = atoms.copy()
    asymmetric.info = {"elastic_tensor": np.arange(36.0)}
    write(tmp_path / "asym.extxyz", asymmetric)
    with pytest.raises(StructureError, match="elastic_tensor.*symmetry"):
        read_structures(tmp_path / "asym.extxyz")


def test_tensor_metrics_fnorm_ewt_and_vrh_moduli():
    reference = np.stack([isotropic(100.0, 50.0)] * 4)
    factors = np.array([1.0, 1.04, 1.2, 2.0])  # relative Frobenius errors 0, 4 %, 20 %, 100 %
    predicted = reference * factors[:, None, None, None, None]
    metrics = tensor_metrics(keys.ELASTIC_TENSOR, predicted, reference)
    norm = np.sqrt((reference[0] ** 2).sum())
    assert metrics["elastic_fnorm_gpa"] == pytest.approx(norm * (0 + 0.04 + 0.2 + 1.0) / 4)
    assert (metrics["elastic_ewt25"], metrics["elastic_ewt10"], metrics["elastic_ewt5"]) == (0.75, 0.5, 0.5)
    # isotropic: K = λ + 2μ/3, G = μ exactly (Voigt = Reuss)
    assert vrh_moduli(reference[0]) == pytest.approx((100.0 + 2 * 50.0 / 3, 50.0))
    assert metrics["bulk_modulus_vrh_mae_gpa"] == pytest.approx((100 + 100 / 3) * (0 + 0.04 + 0.2 + 1.0) / 4)
    dielectric = tensor_metrics(keys.DIELECTRIC_TENSOR, np.eye(3)[None] * 2.2, np.eye(3)[None] * 2.0)
    assert dielectric["dielectric_ewt25"] == 1.0 and dielectric["dielectric_ewt5"] == 0.0
    assert "bulk_modulus_vrh_mae_gpa" not in dielectric


def _train_dielectric(tmp_path):
    """Train a tiny dielectric model for two epochs on 12 small Materials Project crystals; returns
    its config path and the crystals (``tmp_path/model`` holds the model)."""
    frames = read_structures(DATA / "tensors" / "dielectric_mp.extxyz")[:40]
    small = [s for s in frames if len(s) <= 6][:12]
    write(tmp_path / "train.extxyz", [_with_info(s, keys.DIELECTRIC_TENSOR) for s in small])
    config = tmp_path / "diel.yaml"
    config.write_text(
        f"""
seed: 0
dtype: float64
run_dir: {tmp_path / 'run'}
output: {tmp_path / 'model'}
epochs: 2
batch_size: 4
data: {{train: [{tmp_path / 'train.extxyz'}], valid_fraction: 0.25}}
model: {{cutoff: 4.0, channels: 4, max_ell: 1, num_layers: 1, correlation: 2, radial_hidden: [8],
        energy_head: false, tensor_heads: {{dielectric_tensor: {{channels: 4, hidden: 8}}}}}}
"""
    )
    result = runner.invoke(app, ["train", str(config)])
    assert result.exit_code == 0, result.output
    return config, small


def test_train_eval_predict_a_dielectric_model(tmp_path):
    config, small = _train_dielectric(tmp_path)
    manifest = json.loads((tmp_path / "model" / "manifest.json").read_text())
    assert manifest["properties"] == [keys.DIELECTRIC_TENSOR] and "e0s" not in manifest
    assert (tmp_path / "run" / "parity_dielectric_tensor.png").exists()
    potential = load_potential(str(tmp_path / "model"))
    assert potential.properties == (keys.DIELECTRIC_TENSOR,)
    eps = potential.predict(small[:2])[0][keys.DIELECTRIC_TENSOR]
    assert eps.shape == (3, 3) and np.array_equal(eps, eps.T)
    with pytest.raises(ValueError, match="does not provide \\['energy'\\]"):
        potential.predict(small[:1], properties=["energy"])
    result = runner.invoke(app, ["eval", str(tmp_path / "model"), str(tmp_path / "train.extxyz"), "--json"])
    assert result.exit_code == 0, result.output
    metrics = json.loads(result.output)
    assert metrics["n_structures"] == len(small) and metrics["energy_mae_mev_per_atom"] is None
    assert {"dielectric_fnorm", "dielectric_ewt25", "dielectric_ewt10", "dielectric_ewt5"} <= set(metrics)
    # predictions written as extxyz read back as labels, in the same convention
    out = tmp_path / "pred.extxyz"
    result = runner.invoke(app, ["predict", str(tmp_path / "train.extxyz"), "--model", str(tmp_path / "model"), "-o", str(out)])
    assert result.exit_code == 0, result.output
    np.testing.assert_allclose(read_structures(out)[0].labels[keys.DIELECTRIC_TENSOR], eps, atol=1e-8)


def test_tensor_model_card_tables_hold_the_measured_held_out_figures(tmp_path):
    config, _ = _train_dielectric(tmp_path)
    tensor_model_card.main([str(tmp_path / "model")])
    card = (tmp_path / "model" / "MODEL_CARD.md").read_text()
    train, valid, _ = prepare(load_config(config))
    measured = evaluate(load_potential(str(tmp_path / "model"), dtype="float64"), valid).summary()
    assert f"| Fnorm: mean Frobenius norm of the error | {measured['dielectric_fnorm']:.4g} |" in card
    assert f"| EwT25: share within 25 % (relative Frobenius error) | {100 * measured['dielectric_ewt25']:.1f} % |" in card
    assert f"| `{tmp_path / 'train.extxyz'}` | {len(train)} | {len(valid)} | 1 | - |" in card  # not a bundled file: no source
    assert "| tensor head | |\n|---|---|\n| output | `dielectric_tensor` |" in card
    assert "| loss | MSE; weights crystal tensors 1;" in card  # a tensor-only model weighs no energy
    assert "moduli" not in card  # the VRH moduli are elastic-only
    manifest = json.loads((tmp_path / "model" / "manifest.json").read_text())
    assert manifest["metrics"]["held_out"]["dielectric_fnorm"] == measured["dielectric_fnorm"]


def _with_info(structure, key):
    atoms = structure.to_ase()
    atoms.info[key] = np.asarray(structure.labels[key]).reshape(-1)
    return atoms


def _elastic_model(tmp_path) -> str:
    torch.manual_seed(0)
    potential = build_potential(
        {"encoder": ENCODER, "heads": {"elastic_tensor": {"channels": 4, "hidden": 8, "scale": 100.0}}}, name="elastic-test"
    )
    return str(save_checkpoint(potential, tmp_path / "elastic-test"))


def test_server_returns_elastic_tensors_and_refuses_what_a_model_lacks(tmp_path):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from server.config import Settings
    from server.main import create_app

    model = _elastic_model(tmp_path)  # a checkpoint directory is served under the path it was given
    settings = Settings(models=[model], data_dir=tempfile.mkdtemp(prefix="atomistic-test-"))
    cu3au = {"symbols": ["Au", "Cu", "Cu", "Cu"], "positions": [[0, 0, 0], [1.87, 1.87, 0], [1.87, 0, 1.87], [0, 1.87, 1.87]], "cell": (np.eye(3) * 3.74).tolist(), "pbc": True}
    with TestClient(create_app(settings)) as client:
        info = client.get("/v1/models").json()
        assert info[0]["properties"] == [keys.ELASTIC_TENSOR]
        response = client.post("/v1/predict", json={"model": model, "properties": ["elastic_tensor"], "structures": [cu3au]})
        assert response.status_code == 200, response.text
        result = response.json()["results"][0]
        full, voigt = np.array(result["elastic_tensor"]), np.array(result["elastic_tensor_voigt"])
        assert full.shape == (3, 3, 3, 3) and voigt.shape == (6, 6)
        np.testing.assert_array_equal(voigt, voigt.T)
        assert voigt[3, 3] == full[1, 2, 1, 2] and voigt[0, 1] == full[0, 0, 1, 1]
        default = client.post("/v1/predict", json={"model": model, "structures": [cu3au]})
        assert default.status_code == 200 and "elastic_tensor" in default.json()["results"][0]
        refused = client.post("/v1/predict", json={"model": model, "properties": ["energy"], "structures": [cu3au]})
        assert refused.status_code == 422 and "properties" in refused.text and "elastic_tensor" in refused.text


# --- order 3: learn a known analytic polar tensor of the structure ----------------------------

def test_order3_head_learns_an_analytic_polar_tensor(tmp_path):
    write(tmp_path / "train.extxyz", analytic_piezo_frames(160, 0))
    write(tmp_path / "test.extxyz", analytic_piezo_frames(40, 10_000))
    config = tmp_path / "piezo.yaml"
    config.write_text(
        f"""
seed: 0
dtype: float32
run_dir: {tmp_path / 'run'}
output: {tmp_path / 'model'}
epochs: 40
batch_size: 8
data: {{train: [{tmp_path / 'train.extxyz'}], valid_fraction: 0.1}}
model: {{cutoff: 4.0, channels: 8, max_ell: 1, num_layers: 1, correlation: 2, radial_hidden: [16],
        energy_head: false, tensor_heads: {{piezoelectric_tensor: {{channels: 8, hidden: 16}}}}}}
optimizer: {{learning_rate: 0.01, ema_decay: 0.9}}
early_stopping_patience: 40
"""
    )
    result = runner.invoke(app, ["train", str(config)])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["eval", str(tmp_path / "model"), str(tmp_path / "test.extxyz"), "--json"])
    metrics = json.loads(result.output)
    test = read_structures(tmp_path / "test.extxyz")
    mean_norm = np.mean([np.sqrt((s.labels[keys.PIEZOELECTRIC_TENSOR] ** 2).sum()) for s in test])
    # held-out structures: the error is a small fraction of the tensor's size (zero predicts 100 %)
    assert metrics["piezoelectric_fnorm_c_per_m2"] < 0.2 * mean_norm, (metrics, mean_norm)
    assert metrics["piezoelectric_ewt25"] > 0.5


def test_shipped_elastic_model_gives_cu3au_bulk_modulus_within_10_percent_of_emt():
    """Through the server: K_VRH of the predicted tensor of L1₂ Cu₃Au against EMT's own
    finite-strain bulk modulus (an energy-volume fit of EMT on the relaxed cell)."""
    pytest.importorskip("fastapi")
    from ase.calculators.emt import EMT
    from ase.eos import EquationOfState
    from ase.filters import UnitCellFilter
    from ase.optimize import BFGS
    from ase.units import GPa
    from fastapi.testclient import TestClient

    from server.config import Settings
    from server.main import create_app

    atoms = Atoms("AuCu3", scaled_positions=[(0, 0, 0), (0.5, 0.5, 0), (0.5, 0, 0.5), (0, 0.5, 0.5)], cell=[3.75] * 3, pbc=True)
    atoms.calc = EMT()
    BFGS(UnitCellFilter(atoms, hydrostatic_strain=True), logfile=None).run(fmax=1e-4)
    volumes, energies = [], []
    for scale in np.linspace(0.98, 1.02, 9):
        strained = atoms.copy()
        strained.set_cell(atoms.cell * scale, scale_atoms=True)
        strained.calc = EMT()
        volumes.append(strained.get_volume())
        energies.append(strained.get_potential_energy())
    eos = EquationOfState(volumes, energies, eos="birchmurnaghan")
    eos.fit()
    emt_bulk = eos.B / GPa
    settings = Settings(models=["elastic"], data_dir=tempfile.mkdtemp(prefix="atomistic-test-"))
    structure = {"numbers": atoms.numbers.tolist(), "positions": atoms.positions.tolist(), "cell": atoms.cell.tolist(), "pbc": True}
    with TestClient(create_app(settings)) as client:
        response = client.post("/v1/predict", json={"model": "elastic", "properties": ["elastic_tensor"], "structures": [structure]})
    assert response.status_code == 200, response.text
    bulk, _ = vrh_moduli(np.array(response.json()["results"][0]["elastic_tensor"]))
    print(f"Cu3Au bulk modulus: served {bulk:.1f} GPa, EMT E-V fit {emt_bulk:.1f} GPa")
    assert abs(bulk - emt_bulk) < 0.10 * emt_bulk, (bulk, emt_bulk)


@pytest.mark.parametrize(
    ("model", "message"),
    [
        ("{tensor_heads: {stiffness: {}}}", "model.tensor_heads: unknown output 'stiffness'"),
        ("{tensor_heads: {elastic_tensor: {basis: polar}}}", "model.tensor_heads.elastic_tensor.basis"),
        ("{tensor_heads: {elastic_tensor: {width: 3}}}", "model.tensor_heads.elastic_tensor: options"),
        ("{energy_head: false}", "needs an energy head or at least one tensor head"),
        ("{tensor_heads: {elastic_tensor: {basis: spherical, pairs: 2}}}", "model.tensor_heads.elastic_tensor.pairs: applies"),
        ("{tensor_heads: {piezoelectric_tensor: {pairs: 2}}}", "model.tensor_heads.piezoelectric_tensor.pairs: applies"),
        ("{tensor_heads: {elastic_tensor: {pairs: 0}}}", "model.tensor_heads.elastic_tensor.pairs: must be"),
        ("{tensor_heads: {dielectric_tensor: {lmax: 2}}}", "model.tensor_heads.dielectric_tensor.lmax: applies"),
    ],
)
def test_tensor_head_config_errors_name_the_field(tmp_path, model, message):
    from atomistic.training.config import ConfigError, load_config

    path = tmp_path / "bad.yaml"
    path.write_text(f"data: {{train: [x.extxyz]}}\nmodel: {model}\n")
    with pytest.raises(ConfigError, match=message.replace(".", "\\.").replace("'", ".")):
        load_config(path)


@pytest.mark.parametrize("name", ["elastic", "dielectric"])
def test_shipped_tensor_models_are_exactly_equivariant_and_symmetric(name):
    """T(Rx) = R⊗…⊗R · T(x) for a rotoreflection, float64, on the shipped checkpoints."""
    potential = load_potential(name, dtype="float64")
    key = potential.properties[0]
    numbers = [z for z in (13, 29, 79, 8, 14) if z in potential.atomic_numbers][:2]
    atoms = random_periodic_structure_like(numbers)
    q, _ = np.linalg.qr(np.random.default_rng(5).normal(size=(3, 3)))
    q[:, 0] *= -1 if np.linalg.det(q) > 0 else 1  # a reflection included
    rotated = atoms.copy()
    rotated.positions = atoms.positions @ q.T
    rotated.cell = atoms.cell.array @ q.T
    tensor, tensor_rotated = (potential.predict(a, properties=[key])[0][key] for a in (atoms, rotated))
    expected = tensor
    for axis in range(tensor.ndim):
        expected = np.moveaxis(np.tensordot(q, expected, axes=([1], [axis])), 0, axis)
    assert np.abs(tensor_rotated - expected).max() < 1e-10 * np.abs(tensor).max()
    assert np.array_equal(tensor, tensor.swapaxes(-1, -2))


def random_periodic_structure_like(numbers) -> Atoms:
    from atomistic.testing import random_periodic_structure

    return random_periodic_structure(numbers, n_atoms=5, seed=11, density=0.05, skew=0.1)


def test_a_tensor_head_fine_tunes_on_a_pretrained_energy_encoder(tmp_path):
    """``--init`` with ``model.tensor_heads``: the head goes onto the checkpoint's encoder
    (new elements get fresh embeddings) and the energy head is dropped when asked."""
    write(tmp_path / "piezo.extxyz", analytic_piezo_frames(12, 3))
    config = tmp_path / "ft.yaml"
    config.write_text(
        f"""
run_dir: {tmp_path / 'run'}
output: {tmp_path / 'model'}
epochs: 1
data: {{train: [{tmp_path / 'piezo.extxyz'}], valid_fraction: 0.25}}
model: {{energy_head: false, tensor_heads: {{piezoelectric_tensor: {{channels: 4, hidden: 8}}}}}}
"""
    )
    result = runner.invoke(app, ["train", str(config), "--init", "mlearn-small"])
    assert result.exit_code == 0, result.output
    tuned = load_potential(str(tmp_path / "model"))
    base = load_potential("mlearn-small")
    assert tuned.properties == (keys.PIEZOELECTRIC_TENSOR,)
    assert set(base.atomic_numbers) | {13, 29, 79} == set(tuned.atomic_numbers)
    assert tuned.metadata.architecture["encoder"]["config"]["channels"] == base.metadata.architecture["encoder"]["config"]["channels"]
