"""scripts/average_checkpoints.py: uniform weight averaging of checkpoints of one architecture."""

import importlib.util
import json

import pytest
import torch

from atomistic.checkpoint import CheckpointError, load_potential, save_checkpoint
from tests.conftest import small_mace
from tests.paths import ROOT

spec = importlib.util.spec_from_file_location("average_checkpoints", ROOT / "scripts" / "average_checkpoints.py")
average_checkpoints = importlib.util.module_from_spec(spec)
spec.loader.exec_module(average_checkpoints)


def test_average_is_the_mean_of_the_weights_and_keeps_e0s_and_provenance(tmp_path):
    first, second = small_mace(seed=0), small_mace(seed=1)
    save_checkpoint(first, tmp_path / "a", provenance={"config": {"seed": 3}}, metrics={"x": 1}, weights_dtype=torch.float64)
    save_checkpoint(second, tmp_path / "b", weights_dtype=torch.float64)
    average_checkpoints.main([str(tmp_path / "avg"), str(tmp_path / "a"), str(tmp_path / "b")])
    averaged = load_potential(tmp_path / "avg", dtype=torch.float64, backend="reference")
    a, b, mean = first.state_dict(), second.state_dict(), averaged.state_dict()
    weight = "encoder.layers.0.interaction.linear_in.weight"
    assert not torch.equal(a[weight], b[weight])
    torch.testing.assert_close(mean[weight], (a[weight] + b[weight]) / 2, rtol=0, atol=1e-15)
    torch.testing.assert_close(mean["heads.energy.e0s"], a["heads.energy.e0s"], rtol=0, atol=0)
    manifest = json.loads((tmp_path / "avg" / "manifest.json").read_text())
    assert manifest["provenance"]["config"] == {"seed": 3}
    assert manifest["provenance"]["averaged_from"] == [str(tmp_path / "a"), str(tmp_path / "b")]
    assert manifest["metrics"] == {}


def test_refuses_a_different_architecture_or_different_e0s(tmp_path):
    save_checkpoint(small_mace(), tmp_path / "a")
    save_checkpoint(small_mace(max_ell=1), tmp_path / "other")
    with pytest.raises(CheckpointError, match="different architecture"):
        average_checkpoints.average_checkpoints([str(tmp_path / "a"), str(tmp_path / "other")], tmp_path / "out")
    shifted = small_mace(seed=1)
    shifted.heads["energy"].e0s.add_(0.1)
    save_checkpoint(shifted, tmp_path / "shifted")
    with pytest.raises(CheckpointError, match="e0s"):
        average_checkpoints.average_checkpoints([str(tmp_path / "a"), str(tmp_path / "shifted")], tmp_path / "out")
    with pytest.raises(CheckpointError, match="at least two"):
        average_checkpoints.average_checkpoints([str(tmp_path / "a")], tmp_path / "out")
