"""scripts/support_errors.py: errors inside and outside a training file's distance support."""

import importlib.util
import re

import ase.io
import numpy as np
import pytest

from atomistic.data.convert import Structure
from tests.paths import ROOT

spec = importlib.util.spec_from_file_location("support_errors", ROOT / "scripts" / "support_errors.py")
support_errors = importlib.util.module_from_spec(spec)
spec.loader.exec_module(support_errors)


def molecule(symbols_positions):
    numbers = np.array([{"H": 1, "O": 8}[s] for s, _ in symbols_positions])
    positions = np.array([p for _, p in symbols_positions], dtype=float)
    return Structure(numbers=numbers, positions=positions, cell=np.zeros((3, 3)), pbc=np.zeros(3, bool))


def water(oh_1, oh_2):
    return molecule([("O", (0.0, 0.0, 0.0)), ("H", (oh_1, 0.0, 0.0)), ("H", (0.0, oh_2, 0.0))])


def test_shortest_distances_per_element_pair():
    shortest = support_errors.shortest_pair_distances(water(0.97, 1.01))
    assert shortest == pytest.approx({(1, 8): 0.97, (1, 1): np.hypot(0.97, 1.01)})


def test_outside_the_support_is_a_shorter_bond_or_an_unseen_pair():
    support = support_errors.training_support([water(0.96, 1.00), water(0.98, 0.99)])
    assert support[(1, 8)] == pytest.approx(0.96)
    assert support_errors.outside_pairs(water(0.97, 1.02), support) == []
    assert support_errors.outside_pairs(water(0.90, 1.10), support) == [(1, 8)]  # H–H 1.45 Å: inside
    oxygen_pair = molecule([("O", (0.0, 0.0, 0.0)), ("O", (1.2, 0.0, 0.0))])
    assert support_errors.outside_pairs(oxygen_pair, support) == [(8, 8)]


def test_a_pair_missing_from_the_training_file_is_named(tmp_path, capsys):
    acac = ROOT / "data" / "botnet" / "acac"
    hydrogen = ase.Atoms("H", positions=[[0.0, 0.0, 0.0]])
    hydrogen.info["energy"] = -13.0
    hydrogen.arrays["forces"] = np.zeros((1, 3))
    ase.io.write(tmp_path / "train.xyz", [hydrogen])  # one atom: no pair at all
    ase.io.write(tmp_path / "test.xyz", ase.io.read(acac / "train_600K.xyz", "0"))
    support_errors.main([str(tmp_path / "train.xyz"), str(tmp_path / "test.xyz"), str(ROOT / "checkpoints" / "organic")])
    printed = capsys.readouterr().out
    assert printed.startswith("1 test structures, 1 outside")
    assert "C–O not in the training file: 1" in printed


def test_periodic_structures_are_refused():
    crystal = Structure(numbers=np.array([1]), positions=np.zeros((1, 3)), cell=np.eye(3) * 3.0, pbc=np.ones(3, bool))
    with pytest.raises(ValueError, match="periodic"):
        support_errors.shortest_pair_distances(crystal)


def _pools_within_rounding(whole: float, inside: float, outside: float, half_unit: float = 0.05) -> bool:
    """Whether RMSEs printed to one decimal can be ``whole² = (inside² + outside²) / 2``.

    Each printed figure stands for a value within ``half_unit`` of it, so the check asks whether
    the interval of possible ``whole²`` meets the interval of possible mean squares.
    """
    def low(x: float) -> float:
        return max(x - half_unit, 0.0) ** 2

    def high(x: float) -> float:
        return (x + half_unit) ** 2

    return low(whole) <= (high(inside) + high(outside)) / 2 and high(whole) >= (low(inside) + low(outside)) / 2


def test_main_splits_the_rmse_into_inside_and_outside(tmp_path, capsys):
    acac = ROOT / "data" / "botnet" / "acac"
    ase.io.write(tmp_path / "train.xyz", ase.io.read(acac / "train_300K.xyz", ":"))
    # frame 463 of the 600 K file holds an O-H bond (0.888 Å) shorter than any at 300 K
    ase.io.write(tmp_path / "test.xyz", [ase.io.read(acac / "train_600K.xyz", i) for i in (0, 463)])
    support_errors.main([str(tmp_path / "train.xyz"), str(tmp_path / "test.xyz"), str(ROOT / "checkpoints" / "organic"), "--worst", "1"])
    printed = capsys.readouterr().out
    assert printed.startswith("2 test structures, ")
    assert "H–O" in printed
    row = next(line for line in printed.splitlines() if line.startswith(f"| {ROOT / 'checkpoints' / 'organic'}"))
    energy, force = ([float(x) for x in re.findall(r"[0-9.]+|nan", cell)] for cell in row.split(" | ")[1:3])
    n_outside = int(re.search(r"(\d+) outside", printed).group(1))
    assert n_outside == 1  # frame 0 lies inside the whole 300 K file's support
    # the whole-file RMSE pools the inside and outside ones (one structure each)
    assert _pools_within_rounding(*energy)
    assert _pools_within_rounding(*force)
    assert force[2] > force[1]  # the compressed O-H bond is the larger error
    worst = [line for line in printed.splitlines() if ": structure " in line and "force RMSE" in line]
    assert len(worst) == 1 and "structure 1: force RMSE" in worst[0] and "H–O" in worst[0]
    share_line = next(line for line in printed.splitlines() if ": these 1 carry " in line and "force" in line)
    assert re.search(r"force RMSE of the other 1: [0-9.]+ meV/Å", share_line)
    # the structure of largest energy error, its share of the squared energy error and the other's
    (worst_energy,) = [line for line in printed.splitlines() if ": structure " in line and "energy error" in line]
    largest = abs(float(re.search(r"energy error ([-+][0-9.]+) meV", worst_energy).group(1)))
    energy_share = next(line for line in printed.splitlines() if ": these 1 carry " in line and "energy" in line)
    share, other = (float(x) for x in re.search(r"carry ([0-9.]+) % .* other 1: ([0-9.]+) meV", energy_share).groups())
    assert largest >= other - 0.05
    assert abs(share / 100 - largest**2 / (largest**2 + other**2)) < 0.01 + 0.1 / max(largest, 0.1)
    assert abs(np.sqrt((largest**2 + other**2) / 2) - energy[0]) <= 0.1


def test_a_further_training_file_widens_the_support(tmp_path, capsys):
    acac = ROOT / "data" / "botnet" / "acac"
    ase.io.write(tmp_path / "train.xyz", ase.io.read(acac / "train_300K.xyz", ":"))
    # frame 420's only compressed pair is its O-H bond, which the ethanol file (500 K MD) covers;
    # frame 463 also holds an O...O distance no ethanol geometry has (one oxygen each)
    ase.io.write(tmp_path / "test.xyz", [ase.io.read(acac / "train_600K.xyz", i) for i in (420, 463)])
    args = [str(tmp_path / "train.xyz"), str(tmp_path / "test.xyz"), str(ROOT / "checkpoints" / "organic")]
    support_errors.main(args)
    assert capsys.readouterr().out.startswith("2 test structures, 2 outside the training support (H–O < 0.936 Å: 2, O–O")
    support_errors.main([*args, "--also-trained-on", str(ROOT / "data" / "botnet" / "ethanol" / "train.xyz")])
    printed = capsys.readouterr().out
    assert printed.startswith("2 test structures, 1 outside the training support (O–O < 2.380 Å: 1)")


def test_the_worst_structures_share_of_the_squared_force_error():
    # two structures of 3 atoms (9 components) at 2 and 1 meV/Å, one of 1 atom (3) at 4 meV/Å
    force_rmse, n_components = [2.0, 1.0, 4.0], [9, 9, 3]
    # squared sums per structure: 4 × 9 = 36, 1 × 9 = 9, 16 × 3 = 48; 93 in all
    share, rest = support_errors.worst_share(force_rmse, n_components, [2])
    assert share == pytest.approx(48 / 93)
    assert rest == pytest.approx(np.sqrt((36 + 9) / 18))
    share, rest = support_errors.worst_share(force_rmse, n_components, [2, 0])
    assert share == pytest.approx((48 + 36) / 93) and rest == pytest.approx(1.0)
