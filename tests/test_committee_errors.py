"""scripts/committee_errors.py: held-out errors of checkpoints and of their mean prediction."""

import importlib.util
import re
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from atomistic.cli import app
from tests.conftest import tiny_training_config
from tests.paths import ROOT

spec = importlib.util.spec_from_file_location("committee_errors", ROOT / "scripts" / "committee_errors.py")
committee_errors = importlib.util.module_from_spec(spec)
spec.loader.exec_module(committee_errors)


def test_committee_mean_averages_every_property():
    a = {"energy": -3.0, "forces": np.array([[1.0, 0.0, 2.0]])}
    b = {"energy": -1.0, "forces": np.array([[3.0, 2.0, 0.0]])}
    mean = committee_errors.committee_mean([a, b])
    assert mean["energy"] == -2.0
    np.testing.assert_array_equal(mean["forces"], [[2.0, 1.0, 1.0]])


def test_committee_of_two_runs_on_one_split_and_refusal_of_another_split(tmp_path, capsys):
    runs = {
        "a": tiny_training_config(tmp_path, "a", epochs=1),
        "b": tiny_training_config(tmp_path, "b", epochs=1, extra="optimizer: {learning_rate: 0.002}"),
        "other_split": tiny_training_config(tmp_path, "other_split", epochs=1),
    }
    other = Path(runs["other_split"])
    other.write_text(other.read_text().replace("seed: 3", "seed: 4"))
    for config in runs.values():
        result = CliRunner().invoke(app, ["train", config])
        assert result.exit_code == 0, result.output
    out = tmp_path / "out"
    committee_errors.main([str(out / "a"), str(out / "b")])
    printed = capsys.readouterr().out
    assert "| model | Li | Si |" in printed
    rows = {line.split(" | ")[0].lstrip("| "): line for line in printed.splitlines() if line.startswith("| ") and line.count("|") == 4}
    assert {str(out / "a"), str(out / "b"), "committee (mean)"} <= set(rows)
    energies = {name: [float(x) for x in re.findall(r"([0-9.]+) / [0-9.]+", row)] for name, row in rows.items() if name != "model"}
    # two different models, and a committee whose energy MAE is at most the members' mean MAE
    # (|(e_a + e_b) / 2| <= (|e_a| + |e_b|) / 2 for every structure; 0.01: the printed rounding)
    assert energies[str(out / "a")] != energies[str(out / "b")]
    for k in range(2):
        assert energies["committee (mean)"][k] <= (energies[str(out / "a")][k] + energies[str(out / "b")][k]) / 2 + 0.01
    # the spread table: one row per source, a rank correlation in [-1, 1]
    spread_rows = [line.split(" | ") for line in printed.splitlines() if line.startswith(("| Li | ", "| Si | ")) and line.count("|") == 6]
    assert len(spread_rows) == 2 and all(-1.0 <= float(row[2]) <= 1.0 for row in spread_rows)
    with pytest.raises(SystemExit):
        committee_errors.main([str(out / "a"), str(out / "other_split")])
    assert "another validation split" in capsys.readouterr().err


def test_forces_spread_matches_the_committee_model():
    """The script's spread is the committee checkpoint's forces_spread at equal weights."""
    from ase.build import bulk

    from atomistic.models.committee import Committee
    from tests.conftest import small_mace

    members = [small_mace(seed=1), small_mace(seed=2)]
    atoms = bulk("Si", "diamond", a=5.43, cubic=True)
    atoms.rattle(0.05, seed=1)
    predictions = [m.predict(atoms, properties=["forces"])[0] for m in members]
    (committee,) = Committee(members).predict(atoms, properties=["forces_spread"])
    np.testing.assert_allclose(committee_errors.forces_spread(predictions), committee["forces_spread"], rtol=0, atol=1e-12)
