from __future__ import annotations

import json
import os

# The Triton backend's parity tests run its kernels under the Triton interpreter when there
# is no GPU; the variable must be set before triton is imported.
if "TRITON_INTERPRET" not in os.environ:
    import torch

    if not torch.cuda.is_available():
        os.environ["TRITON_INTERPRET"] = "1"

import pytest
import torch

from atomistic.models.builders import build_potential, mace_architecture
from atomistic.models.encoders.mace import MACEConfig

from .paths import DATA

torch.set_num_threads(min(2, os.cpu_count() or 1))

MLEARN_SPECIES = (3, 14, 32, 42)

# (max_ell, hidden_lmax, correlation, num_layers): every value of each hyperparameter appears
MACE_VARIANTS = [
    (0, 0, 1, 1),
    (1, 1, 2, 2),
    (2, 1, 3, 2),
    (3, 2, 3, 1),
    (2, 2, 2, 4),
    (3, 1, 3, 3),
]


def small_mace(
    max_ell=2, hidden_lmax=1, correlation=3, num_layers=2, dtype=torch.float64, seed=0, cutoff=4.0, backend="reference",
    species_radial=False, species_cutoffs=None,
):
    torch.manual_seed(seed)
    config = MACEConfig(
        species=MLEARN_SPECIES,
        cutoff=cutoff,
        max_ell=max_ell,
        hidden_lmax=hidden_lmax,
        correlation=correlation,
        num_layers=num_layers,
        channels=4,
        num_bessel=6,
        radial_hidden=(8,),
        avg_num_neighbors=10.0,
        species_radial=species_radial,
        species_cutoffs=species_cutoffs,
    )
    potential = build_potential(mace_architecture(config, energy_mlp_hidden=8), dtype=dtype, backend=backend)
    head = potential.heads["energy"]
    head.e0s.copy_(torch.tensor([-1.9, -5.4, -4.5, -10.9], dtype=head.e0s.dtype))
    return potential


@pytest.fixture(scope="session")
def default_potential():
    from atomistic import load_potential

    return load_potential("default", dtype="float64")


def tiny_training_config(tmp_path, name: str, epochs: int = 2, extra: str = "", model_options: str = "") -> str:
    """A tiny float64 training config over the first 8 structures of the Li and Si mlearn files
    (copied to ``tmp_path/<element>/training.json``, the mlearn layout); returns its path.
    ``model_options`` (YAML, e.g. ``"per_species_scale: true"``) join the ``model`` mapping,
    ``extra`` lines the config's top level."""
    for element in ("Li", "Si"):
        (tmp_path / element).mkdir(exist_ok=True)
        records = json.loads((DATA / "mlearn" / element / "training.json").read_text())[:8]
        (tmp_path / element / "training.json").write_text(json.dumps(records))
    text = f"""
seed: 3
dtype: float64
run_dir: {tmp_path / 'runs' / name}
output: {tmp_path / 'out' / name}
epochs: {epochs}
batch_size: 4
data:
  train:
    - {{path: {tmp_path / 'Li' / 'training.json'}, weight: 1.0}}
    - {{path: {tmp_path / 'Si' / 'training.json'}, weight: 2.0}}
  valid_fraction: 0.25
model: {{cutoff: 4.0, channels: 4, max_ell: 1, hidden_lmax: 1, num_layers: 1, correlation: 2, radial_hidden: [8]{", " + model_options if model_options else ""}}}
schedule: {{kind: cosine, warmup_epochs: 1}}
{extra}
"""
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return str(path)


def write_acac_with_ref_keys(directory, count: int):
    """The first ``count`` acac 300 K frames written twice as extxyz: ``plain.xyz`` with ASE's
    label names and ``ref.xyz`` with the same labels only as ``REF_energy`` / ``REF_forces``
    (MACE's convention). Returns (plain, renamed) paths."""
    import ase.io

    frames = ase.io.read(DATA / "botnet" / "acac" / "train_300K.xyz", index=f":{count}")
    plain = directory / "plain.xyz"
    ase.io.write(plain, frames, format="extxyz")
    for atoms in frames:
        atoms.info["REF_energy"] = atoms.get_potential_energy()
        atoms.arrays["REF_forces"] = atoms.get_forces()
        atoms.calc = None
    renamed = directory / "ref.xyz"
    ase.io.write(renamed, frames, format="extxyz")
    return plain, renamed
