from __future__ import annotations

import json

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
