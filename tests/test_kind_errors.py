"""scripts/kind_errors.py: per-kind errors on both splits, and the file-mix estimates weighted by
each kind's share of the file (atoms for forces, structures for energies)."""

import importlib.util
import sys

import numpy as np
import pytest

from atomistic.training.metrics import ErrorAccumulator
from tests.paths import ROOT


@pytest.fixture(scope="module")
def kind_errors():
    sys.path.insert(0, str(ROOT / "scripts"))  # it imports its sibling write_model_card
    try:
        spec = importlib.util.spec_from_file_location("kind_errors", ROOT / "scripts" / "kind_errors.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(str(ROOT / "scripts"))


def _kind(force_errors: list[list[float]], energy_errors_mev_per_atom: list[float]) -> ErrorAccumulator:
    """Residuals of one kind: each structure's force components (eV/Å; three per atom) and energy (meV/atom)."""
    return ErrorAccumulator(
        energy_per_atom=[e / 1000.0 for e in energy_errors_mev_per_atom],
        force_components=[np.array(f) for f in force_errors],
        n_structures=len(energy_errors_mev_per_atom),
    )


def test_estimates_weight_each_kind_by_its_share_of_the_file(kind_errors):
    # hot: 1 training + 1 validation structure of 2 atoms; cold: 2 training structures of 4 atoms
    # (absent from validation, so it takes its training error)
    train = {"AIMD-NVT 3000 K": _kind([[0.1] * 6], [2.0]), "Elastic": _kind([[0.01] * 12, [0.03] * 12], [1.0, 3.0])}
    valid = {"AIMD-NVT 3000 K": _kind([[0.4] * 6], [6.0])}
    table = kind_errors.kind_table("Mo", train, valid)

    assert "| Elastic | 2 | 8 (67%) | 0 (0%) | 0.020 / 2.00 | - * |" in table
    assert "| AIMD-NVT 3000 K | 2 | 4 (33%) | 2 (100%) | 0.100 / 2.00 | 0.400 / 6.00 |" in table
    force = 0.4 * 4 / 12 + 0.02 * 8 / 12  # by atoms in the file
    energy = 6.0 * 2 / 4 + 2.0 * 2 / 4  # by structures in the file
    assert f"validation: F 0.400 eV/Å, E 6.00 meV/atom; weighted by the file's mix of kinds: F {force:.3f} eV/Å, E {energy:.2f} meV/atom" in table
    assert "take their training error" in table


def test_no_missing_kind_note_when_every_kind_is_in_the_split(kind_errors):
    train = {"Elastic": _kind([[0.01] * 3], [1.0])}
    valid = {"Elastic": _kind([[0.02] * 3], [2.0])}
    table = kind_errors.kind_table("Li", train, valid)
    assert "weighted by the file's mix of kinds: F 0.020 eV/Å, E 2.00 meV/atom" in table
    assert "take their training error" not in table


def test_main_reports_each_element_of_a_trained_checkpoint(kind_errors, tmp_path, capsys):
    from typer.testing import CliRunner

    from atomistic.cli import app
    from tests.conftest import tiny_training_config

    config = tiny_training_config(tmp_path, "kinds", epochs=1)  # <element>/training.json files
    result = CliRunner().invoke(app, ["train", str(config)])
    assert result.exit_code == 0, result.output
    capsys.readouterr()

    kind_errors.main([str(tmp_path / "out" / "kinds"), "--element", "Si"])
    printed = capsys.readouterr().out
    assert printed.startswith("Si: force MAE (eV/Å) / energy MAE (meV/atom) by kind")
    assert "Li:" not in printed
    assert "weighted by the file's mix of kinds" in printed
