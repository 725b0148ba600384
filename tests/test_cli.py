from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from atomistic.cli import app

runner = CliRunner()


def test_predict_examples_json():
    result = runner.invoke(app, ["predict", "--json"])
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in result.output.strip().splitlines()]
    assert len(records) == 3
    assert {"energy", "forces", "stress", "formula"} <= set(records[0])


def test_predict_table_and_models():
    result = runner.invoke(app, ["predict"])
    assert result.exit_code == 0 and "eV/atom" in result.output
    result = runner.invoke(app, ["models"])
    assert result.exit_code == 0 and "default" in result.output


def test_predict_bad_model_fails_cleanly():
    result = runner.invoke(app, ["predict", "--model", "nonexistent"])
    assert result.exit_code == 2
    assert "error: no model named 'nonexistent'" in result.output


def test_predict_bad_structure_names_it(tmp_path):
    bad = tmp_path / "bad.xyz"
    bad.write_text("2\n\nOg 0 0 0\nOg 0 0 3\n")
    result = runner.invoke(app, ["predict", str(bad)])
    assert result.exit_code == 2
    assert "structure 0: field 'numbers'" in result.output and "Og" in result.output


def test_models_lists_aliases():
    result = runner.invoke(app, ["models"])
    assert result.exit_code == 0 and "sevennet-0" in result.output and "default" in result.output


def test_eval_json_per_file_and_missing_labels(tmp_path):
    import numpy as np

    from atomistic import load_potential
    from atomistic.data import read_mlearn_json

    from .paths import DATA

    records = json.loads((DATA / "mlearn" / "Li" / "training.json").read_text())[:3]
    sample = tmp_path / "li.json"
    sample.write_text(json.dumps(records))
    unlabeled = Path(__file__).resolve().parent.parent / "atomistic" / "examples" / "structures.extxyz"
    result = runner.invoke(app, ["eval", "mlearn-small", str(sample), str(unlabeled), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert f"warning: '{unlabeled}' holds no labels" in result.stderr
    keys = {"energy_mae_mev_per_atom", "energy_rmse_mev_per_atom", "force_mae_ev_per_ang",
            "force_rmse_ev_per_ang", "stress_mae_gpa", "n_structures"}
    assert keys <= set(report) and set(report["per_file"]) == {str(sample), str(unlabeled)}
    assert report["per_file"][str(unlabeled)]["energy_mae_mev_per_atom"] is None  # no labels: skipped
    assert report["n_structures"] == 6
    structures = read_mlearn_json(sample)
    predictions = load_potential("mlearn-small").predict(structures)
    expected = 1000 * np.mean([abs(p["energy"] - s.labels["energy"]) / len(s) for s, p in zip(structures, predictions, strict=True)])
    assert report["energy_mae_mev_per_atom"] == pytest.approx(expected, rel=1e-9)


def test_eval_table_shows_whole_file_paths(tmp_path):
    from .paths import DATA

    records = json.loads((DATA / "mlearn" / "Li" / "training.json").read_text())[:2]
    sample = tmp_path / "a_directory_with_a_long_name" / "another_long_directory_name" / "li_training_sample.json"
    sample.parent.mkdir(parents=True)
    sample.write_text(json.dumps(records))
    result = runner.invoke(app, ["eval", "mlearn-small", str(sample)])
    assert result.exit_code == 0, result.output
    file_cells = [line.split("│")[1].strip() for line in result.stdout.splitlines() if line.startswith("│")]
    assert str(sample) in "".join(file_cells)  # wrapped over lines where it is long, never cut


def test_eval_reads_labels_under_the_keys_given(tmp_path):
    from .conftest import write_acac_with_ref_keys

    plain, renamed = write_acac_with_ref_keys(tmp_path, 3)
    expected = runner.invoke(app, ["eval", "organic", str(plain), "--json"])
    assert expected.exit_code == 0, expected.output
    result = runner.invoke(app, ["eval", "organic", str(renamed), "--json", "--energy-key", "REF_energy", "--forces-key", "REF_forces"])
    assert result.exit_code == 0, result.output
    got, want = json.loads(result.stdout), json.loads(expected.stdout)
    for key in ("energy_mae_mev_per_atom", "force_rmse_ev_per_ang"):
        assert got[key] == pytest.approx(want[key], rel=1e-12) and got[key] is not None
    # without the keys the file has no labels: said on stderr, the JSON on stdout stays valid
    unkeyed = runner.invoke(app, ["eval", "organic", str(renamed), "--json"])
    assert unkeyed.exit_code == 0, unkeyed.output
    assert json.loads(unkeyed.stdout)["energy_mae_mev_per_atom"] is None
    assert "holds no labels" in unkeyed.stderr and "'REF_energy'" in unkeyed.stderr and "--energy-key" in unkeyed.stderr


def test_predict_output_files_and_properties(tmp_path):
    from atomistic.data import read_structures

    out = tmp_path / "results.extxyz"
    result = runner.invoke(app, ["predict", "--model", "mlearn-small", "-o", str(out)])
    assert result.exit_code == 0, result.output
    frames = read_structures(out)
    assert len(frames) == 3 and {"energy", "forces", "stress"} <= set(frames[0].labels)
    out = tmp_path / "results.jsonl"
    result = runner.invoke(app, ["predict", "--model", "mlearn-small", "--properties", "energy", "-o", str(out)])
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 3 and "energy" in records[0] and "forces" not in records[0]
