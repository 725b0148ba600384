"""scripts/compare_runs.py: matched-epoch comparison of `atomistic train` metrics logs."""

import importlib.util
import json

import pytest

from tests.paths import ROOT

spec = importlib.util.spec_from_file_location("compare_runs", ROOT / "scripts" / "compare_runs.py")
compare_runs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compare_runs)


def write_run(directory, rows):
    """A run directory whose metrics.jsonl holds one line per (epoch, energy MAE, force MAE)."""
    directory.mkdir()
    lines = []
    for epoch, energy, force in rows:
        valid = {
            "energy_mae_mev_per_atom": energy,
            "energy_rmse_mev_per_atom": 2 * energy,
            "force_mae_ev_per_ang": force,
            "force_rmse_ev_per_ang": 2 * force,
        }
        lines.append(json.dumps({"epoch": epoch, "valid": valid, "seconds": 36.0}))
    (directory / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    return directory


def test_matched_epochs_ratio_missing_epochs_and_resumed_lines(tmp_path, capsys):
    first = write_run(tmp_path / "first", [(1, 10.0, 0.2), (2, 8.0, 0.1), (3, 6.0, 0.08)])
    # epoch 2 logged twice: the later line counts
    second = write_run(tmp_path / "second", [(1, 9.0, 0.1), (2, 7.0, 0.09), (2, 5.0, 0.05)])
    compare_runs.main([str(first), str(second), "--epochs", "1", "2", "3", "--atoms", "15", "--metric", "rmse"])
    out = capsys.readouterr().out
    assert "| 1 | 300.00 / 0.4000 | 270.00 / 0.2000 | 0.500 |" in out
    assert "| 2 | 240.00 / 0.2000 | 150.00 / 0.1000 | 0.500 |" in out
    assert "| 3 | 180.00 / 0.1600 | - | - |" in out
    assert "second: 2 epochs validated (last 2, 0.02 h summed epoch time); lowest force RMSE at epoch 2" in out


def test_not_a_run_directory_names_the_path(tmp_path):
    with pytest.raises(SystemExit, match="no metrics.jsonl"):
        compare_runs.main([str(tmp_path)])


def test_tensor_only_run_is_refused_with_its_path(tmp_path, capsys):
    run = tmp_path / "dielectric"
    run.mkdir()
    (run / "metrics.jsonl").write_text(json.dumps({"epoch": 1, "valid": {"dielectric_fnorm": 10.1}}) + "\n")
    with pytest.raises(SystemExit):
        compare_runs.main([str(run)])
    assert "logs no energy/force validation errors" in capsys.readouterr().err


def test_epochs_without_validation_are_skipped(tmp_path, capsys):
    run = write_run(tmp_path / "every_other", [(2, 8.0, 0.1)])
    with open(run / "metrics.jsonl", "r+") as fh:  # eval_every: 2 -- epoch 1 has no validation
        lines = fh.read()
        fh.seek(0)
        fh.write(json.dumps({"epoch": 1, "train": {"total": 1.0}, "seconds": 36.0}) + "\n" + lines)
    compare_runs.main([str(run), "--epochs", "1", "2"])
    out = capsys.readouterr().out
    assert "| 1 | - |" in out
    assert "| 2 | 8.00 / 0.1000 |" in out
    assert "every_other: 1 epochs validated (last 2, 0.02 h summed epoch time)" in out  # both epochs' time


def test_one_source_compares_its_own_metrics_and_names_what_a_run_logs(tmp_path, capsys):
    old = write_run(tmp_path / "old", [(1, 10.0, 0.2)])  # logged before per-source metrics existed
    new = write_run(tmp_path / "new", [(1, 10.0, 0.2), (2, 8.0, 0.1)])
    records = [json.loads(line) for line in (new / "metrics.jsonl").read_text().splitlines()]
    records[1]["valid"]["by_source"] = {
        "Ge": {"energy_mae_mev_per_atom": 3.0, "force_mae_ev_per_ang": 0.05},
        "Mo": {"energy_mae_mev_per_atom": 13.0, "force_mae_ev_per_ang": 0.15},
    }
    (new / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in records) + "\n")
    compare_runs.main([str(new), "--source", "Mo", "--epochs", "1", "2"])
    out = capsys.readouterr().out
    assert "| 1 | - |" in out and "| 2 | 13.00 / 0.1500 |" in out
    with pytest.raises(SystemExit, match="no validation metrics for source 'Si' \\(it logs Ge, Mo\\)"):
        compare_runs.main([str(new), "--source", "Si"])
    with pytest.raises(SystemExit, match="logs no validation metrics for source 'Ge' \\(it logs none per source\\)"):
        compare_runs.main([str(old), "--source", "Ge"])


def test_runs_that_hold_out_different_structures_are_flagged(tmp_path, capsys):
    recorded = json.loads((ROOT / "docs" / "runs" / "organic_w128s" / "config.json").read_text())
    first = write_run(tmp_path / "first", [(1, 10.0, 0.2)])
    same = write_run(tmp_path / "same", [(1, 9.0, 0.1)])
    more_data = write_run(tmp_path / "more_data", [(1, 9.0, 0.1)])
    (first / "config.json").write_text(json.dumps(recorded))
    # a file added with no validation share leaves the held-out set as it was
    extra = {**recorded, "data": {**recorded["data"], "train": [*recorded["data"]["train"], {"path": "data/botnet/3BPA/train_300K.xyz", "valid_fraction": 0.0}]}}
    (same / "config.json").write_text(json.dumps(extra))
    (more_data / "config.json").write_text(json.dumps({**recorded, "data": {**recorded["data"], "valid_fraction": 0.05}}))
    compare_runs.main([str(first), str(same), str(more_data), "--epochs", "1"])
    warnings = [line for line in capsys.readouterr().out.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and str(more_data) in warnings[0] and "different validation set" in warnings[0]
