"""scripts/acac_frames.py: geometry and force errors of chosen acetylacetone frames."""

import importlib.util
import re

import ase.io
import numpy as np
import pytest

from atomistic.data.convert import Structure
from tests.paths import ROOT

spec = importlib.util.spec_from_file_location("acac_frames", ROOT / "scripts" / "acac_frames.py")
acac_frames = importlib.util.module_from_spec(spec)
spec.loader.exec_module(acac_frames)


def test_enol_geometry_of_a_centred_and_an_offset_hydrogen():
    # O at ±1.2 Å on x, C bonded to the first O at 1.25 Å, H on the O···O axis
    def frame(h_x):
        numbers = np.array([8, 8, 6, 1])
        positions = np.array([[-1.2, 0, 0], [1.2, 0, 0], [-1.2, 1.25, 0], [h_x, 0, 0]], dtype=float)
        return Structure(numbers=numbers, positions=positions, cell=np.zeros((3, 3)), pbc=np.zeros(3, bool))

    centred = acac_frames.enol_geometry(frame(0.0))
    assert centred == pytest.approx({"shortest C–O": 1.25, "O···O": 2.4, "enol H asymmetry": 0.0})
    assert acac_frames.enol_geometry(frame(-0.2))["enol H asymmetry"] == pytest.approx(0.4)


def test_a_frame_without_two_oxygens_is_refused():
    water = Structure(numbers=np.array([8, 1, 1]), positions=np.eye(3), cell=np.zeros((3, 3)), pbc=np.zeros(3, bool))
    with pytest.raises(ValueError, match="2 oxygens"):
        acac_frames.enol_geometry(water)


def test_main_reports_training_extremes_and_the_chosen_frames(tmp_path, capsys):
    acac = ROOT / "data" / "botnet" / "acac"
    ase.io.write(tmp_path / "train.xyz", ase.io.read(acac / "train_300K.xyz", ":50"))
    ase.io.write(tmp_path / "test.xyz", [ase.io.read(acac / "train_600K.xyz", i) for i in (0, 189)])
    acac_frames.main([str(tmp_path / "train.xyz"), str(tmp_path / "test.xyz"), "1", "--checkpoint", str(ROOT / "checkpoints" / "organic")])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"{tmp_path / 'train.xyz'} (50 frames): smallest shortest C–O ")
    frame = lines[-1]
    assert frame.startswith("frame 1: ")
    asymmetry = float(re.search(r"enol H asymmetry ([0-9.]+) Å", frame).group(1))
    assert asymmetry < 0.1  # frame 189 of the 600 K file: the proton mid transfer
    assert len(re.findall(r"[A-Z][a-z]?\d+ [0-9.]+ eV/Å", frame)) == 3


def test_a_frame_outside_the_test_file_is_refused(tmp_path):
    acac = ROOT / "data" / "botnet" / "acac"
    ase.io.write(tmp_path / "frames.xyz", ase.io.read(acac / "train_600K.xyz", ":2"))
    with pytest.raises(SystemExit, match="frames: 5 is not a frame"):
        acac_frames.main([str(tmp_path / "frames.xyz"), str(tmp_path / "frames.xyz"), "5"])


def test_open_counts_the_frames_with_a_broken_hydrogen_bond_and_splits_their_error(tmp_path, capsys):
    acac = ROOT / "data" / "botnet" / "acac"
    ase.io.write(tmp_path / "train.xyz", ase.io.read(acac / "train_300K.xyz", ":50"))
    # frame 73 of the 600 K file has its O-H turned away: O...O 3.19 Å, beyond any 300 K frame (2.87 Å)
    ase.io.write(tmp_path / "test.xyz", [ase.io.read(acac / "train_600K.xyz", i) for i in (0, 73, 5)])
    acac_frames.main([str(tmp_path / "train.xyz"), str(tmp_path / "test.xyz"), "--open", "--checkpoint", str(ROOT / "checkpoints" / "organic")])
    lines = capsys.readouterr().out.splitlines()
    count = next(line for line in lines if "longer O···O" in line)
    assert re.search(r"1 of 3 frames have a longer O···O than the training file's longest, [0-9.]+ Å: 1$", count)
    shares = {}
    for line in lines:
        if match := re.search(r": (open|the rest): energy RMSE ([0-9.]+) meV, force RMSE ([0-9.]+) meV/Å, ([0-9.]+) % of", line):
            shares[match.group(1)] = [float(x) for x in match.groups()[1:]]
    assert set(shares) == {"open", "the rest"}
    assert shares["open"][2] + shares["the rest"][2] == pytest.approx(100.0, abs=0.11)
    assert shares["open"][1] > shares["the rest"][1]  # the broken hydrogen bond is the larger force error


def test_the_open_split_pools_energy_and_force_errors_per_group():
    def frame(energy, forces):
        return Structure(
            numbers=np.array([1, 1]), positions=np.eye(2, 3), cell=np.zeros((3, 3)), pbc=np.zeros(3, bool),
            labels={"energy": energy, "forces": np.asarray(forces, float)},
        )

    structures = [frame(1.0, [[0, 0, 0], [0, 0, 0]]), frame(2.0, [[0, 0, 0], [0, 0, 0]])]
    predictions = [{"energy": 1.003, "forces": np.full((2, 3), 0.001)}, {"energy": 1.996, "forces": np.full((2, 3), 0.003)}]
    # --open pools both frames as one group through support_errors' residuals
    groups, _ = acac_frames.errors_by_support(structures, predictions, [True, True])
    energy_errors, force_errors = groups["outside"]
    energy, force, squared = acac_frames.rmse(energy_errors), acac_frames.rmse(force_errors), float(np.square(force_errors).sum())
    assert energy == pytest.approx(np.sqrt((9 + 16) / 2))
    assert squared == pytest.approx(6 * 1 + 6 * 9)
    assert force == pytest.approx(np.sqrt(60 / 12))
