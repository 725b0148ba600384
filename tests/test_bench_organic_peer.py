"""scripts/bench_organic_peer.py: the mace-torch command mirrors the atomistic config."""

import ast
import importlib.util
import sys
from pathlib import Path

import ase.io
import numpy as np

from atomistic.training.config import load_config
from atomistic.training.run import prepare
from tests.paths import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
spec = importlib.util.spec_from_file_location("bench_organic_peer", ROOT / "scripts" / "bench_organic_peer.py")
bench_organic_peer = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench_organic_peer)


def flags(command):
    """``{"--flag": value}`` (``True`` for a flag without a value)."""
    out, k = {}, 1
    while k < len(command):
        if k + 1 < len(command) and not command[k + 1].startswith("--"):
            out[command[k]] = command[k + 1]
            k += 2
        else:
            out[command[k]] = True
            k += 1
    return out


def test_train_command_carries_the_configs_model_loss_and_schedule(tmp_path):
    config = load_config(ROOT / "scripts" / "configs" / "organic_v2.yaml")
    command = bench_organic_peer.train_command(config, Path("/peer/bin/python"), tmp_path, epochs=100)
    assert command[0] == "/peer/bin/mace_run_train"
    f = flags(command)
    assert f["--num_channels"] == "32" and f["--max_L"] == "1" and f["--max_ell"] == "3"
    assert f["--correlation"] == "3" and f["--num_interactions"] == "2" and f["--r_max"] == "5.0"
    assert f["--radial_MLP"] == "[64, 64]" and f["--num_cutoff_basis"] == "6" and f["--num_radial_basis"] == "8"
    assert f["--energy_weight"] == "10.0" and f["--forces_weight"] == "1.0" and f["--batch_size"] == "4"
    assert f["--lr"] == "0.01" and f["--ema_decay"] == "0.995" and f["--max_num_epochs"] == "100"
    # stage two at the config's fraction of the epochs (225 of 300), with its energy weight
    assert f["--swa"] is True and f["--start_swa"] == "75" and f["--swa_energy_weight"] == "100.0"
    e0s = ast.literal_eval(f["--E0s"])  # as mace-torch reads it
    assert set(e0s) == {1, 6, 8} and e0s[1] < 0


def test_split_files_hold_the_reference_labels(tmp_path):
    config = load_config(ROOT / "scripts" / "configs" / "organic_v2.yaml")
    _, valid, _ = prepare(config)
    bench_organic_peer.write_split(valid[:3], tmp_path / "valid.xyz")
    frames = ase.io.read(tmp_path / "valid.xyz", ":")
    assert len(frames) == 3
    assert frames[1].info["REF_energy"] == float(valid[1].labels["energy"])
    np.testing.assert_allclose(frames[1].arrays["REF_forces"], valid[1].labels["forces"])
    np.testing.assert_allclose(frames[1].positions, valid[1].positions)
