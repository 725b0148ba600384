"""scripts/organic_card_note.py: the `organic` card's training history from the lineage table,
and the table against the shipped checkpoint and the kept run logs."""

import importlib.util
import json
import sys

import pytest

from atomistic.training.loop import read_metrics_log, training_hours
from tests.paths import ROOT

spec = importlib.util.spec_from_file_location("organic_card_note", ROOT / "scripts" / "organic_card_note.py")
organic_card_note = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = organic_card_note  # its dataclass looks its module up
spec.loader.exec_module(organic_card_note)

HEADER = (
    "name,stage_hours,paused,validation_energy,validation_force,hot_energy,hot_force,"
    "outside_acac_force,inside_acac_force,outside_all_force,inside_all_force,remark\n"
)


def write_table(path, lines):
    path.write_text(HEADER + "".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def small_lineage(tmp_path):
    return write_table(
        tmp_path / "lineage.csv",
        [
            'organic_v3,,,2.0,10.9,7.3,51.2,,,,,"32 channels, l ≤ 1"',
            "organic_v6,2.2,,,,,,,,,,",
            "organic_w128,1.5,yes,1.1,7.1,5.8,30.0,47.7,24.4,77.9,24.6,",
            "organic_w128b,1.9,,1.1,6.8,5.6,29.4,46.9,23.9,76.9,24.0,",
            "organic_w128c,2.3,,1.04,6.64,5.6,29.1,46.5,23.6,76.3,23.7,",
            "organic_w128d,,,,,,,,,,,a 60-epoch cycle",
            "organic_w128e,1.7,yes,0.96,6.44,5.449,28.66,45.7,23.2,75.2,23.4,",
        ],
    )


def table_rows(note):
    """The lineage table's rows of a note, by model name: the cells after the name."""
    rows = {}
    for line in note.splitlines():
        if line.startswith("| `") or line.startswith("| **`"):
            cells = [cell.strip() for cell in line.strip("|").split("|")]
            rows[cells[0].strip("*`")] = cells[1:]
    return rows


def test_note_lists_ranges_hours_and_figures(tmp_path):
    note = organic_card_note.organic_note(organic_card_note.read_lineage(small_lineage(tmp_path)))
    assert note.startswith(
        "`organic_w128e`: the last of three warm restarts of `organic_w128`, `organic_w128b` to `organic_w128c` "
        "and `organic_w128e` (`organic_w128d`, a 60-epoch cycle, was not kept), each "
    )
    assert "(for this one `--run-dir runs/organic_w128e --init runs/organic_w128c/best`)" in note
    assert (
        "Training time in all: 9.6 h over 5 stages (sums of epoch times; for `organic_w128` and "
        "`organic_w128e` less the time their metrics logs count inside an epoch paused for a test run)"
    ) in note
    rows = table_rows(note)
    assert list(rows) == ["organic_v3", "organic_v6", "organic_w128", "organic_w128b", "organic_w128c", "organic_w128d", "organic_w128e"]
    # figures as recorded (one decimal, or three where recorded finer), a dash where not measured
    assert rows["organic_v3"] == ["–", "2.0 / 10.9", "7.3 / 51.2", "–", "–", "32 channels, l ≤ 1"]
    assert rows["organic_v6"] == ["2.2", "–", "–", "–", "–", ""]
    assert rows["organic_w128c"] == ["2.3", "1.040 / 6.640", "5.6 / 29.1", "46.5 / 23.6", "76.3 / 23.7", "shipped as `organic` before this one"]
    assert rows["organic_w128d"] == ["–", "–", "–", "–", "–", "a 60-epoch cycle; not kept"]
    assert rows["organic_w128e"] == ["1.7", "0.960 / 6.440", "5.449 / 28.660", "45.7 / 23.2", "75.2 / 23.4", "this model"]
    assert "| **`organic_w128e`** |" in note  # the model itself stands out
    assert "on them this model's force RMSE is 75.2 meV/Å against 23.4 on the rest" in note


def test_stage_never_shipped_is_not_named_as_the_shipped_one(tmp_path):
    path = write_table(
        tmp_path / "lineage.csv",
        [
            "organic_w128,1.5,,1.1,7.1,5.8,30.0,47.7,24.4,77.9,24.6,",
            "organic_w128b,1.9,,1.1,6.8,5.6,29.4,46.9,23.9,76.9,24.0,",
            "organic_w128c,1.4,,1.0,6.7,5.7,29.5,47.0,23.8,77.0,23.9,not shipped: its 600 K figures did not improve",
            "organic_w128d,1.4,,1.0,6.6,5.6,29.3,46.8,23.7,76.8,23.8,",
        ],
    )
    note = organic_card_note.organic_note(organic_card_note.read_lineage(path))
    # the run still starts from the stage before it, but the one published before it is named
    assert "(for this one `--run-dir runs/organic_w128d --init runs/organic_w128c/best`)" in note
    assert "three warm restarts of `organic_w128`, `organic_w128b` to `organic_w128d`, each" in note
    rows = table_rows(note)
    assert rows["organic_w128b"][-1] == "shipped as `organic` before this one"
    assert rows["organic_w128c"][-1] == "not shipped: its 600 K figures did not improve"


def test_stages_option_lists_the_kept_restarts_and_their_configs(tmp_path, capsys):
    organic_card_note.main(["--lineage", str(small_lineage(tmp_path)), "--stages"])
    restart = organic_card_note.RESTART_CONFIG
    assert capsys.readouterr().out.splitlines() == [f"organic_w128b {restart}", f"organic_w128c {restart}", f"organic_w128e {restart}"]


def lineage_with_configs(tmp_path, last_config):
    path = tmp_path / "lineage.csv"
    path.write_text(
        HEADER.replace(",remark\n", ",remark,config\n")
        + "organic_w128,1.5,,1.1,7.1,5.8,30.0,47.7,24.4,77.9,24.6,,\n"
        + "organic_w128b,1.9,,1.1,6.8,5.6,29.4,46.9,23.9,76.9,24.0,,\n"
        + f"organic_w128c,2.0,,0.9,6.5,5.5,29.0,46.0,23.5,76.0,23.6,validation on 25 of the 50,{last_config}\n",
        encoding="utf-8",
    )
    return path


def test_a_stage_may_name_its_own_config(tmp_path, capsys):
    other = "scripts/configs/organic_w128_more_data_restart.yaml"
    path = lineage_with_configs(tmp_path, other)
    organic_card_note.main(["--lineage", str(path), "--stages"])
    assert capsys.readouterr().out.splitlines() == [f"organic_w128b {organic_card_note.RESTART_CONFIG}", f"organic_w128c {other}"]
    note = organic_card_note.organic_note(organic_card_note.read_lineage(path))
    assert f"on the same data; `organic_w128c` with `{other}`, as its remark says (config" in note
    assert table_rows(note)["organic_w128c"][-1] == "validation on 25 of the 50; this model"


def test_stages_that_share_a_config_are_named_together(tmp_path):
    other = "scripts/configs/organic_w128_more_data_restart.yaml"
    path = lineage_with_configs(tmp_path, other)
    with path.open("a", encoding="utf-8") as table:
        table.write(f"organic_w128d,1.9,,0.9,6.4,5.5,28.9,45.9,23.4,75.9,23.5,the same 25,{other}\n")
    note = organic_card_note.organic_note(organic_card_note.read_lineage(path))
    assert f"on the same data; `organic_w128c` and `organic_w128d` with `{other}`, as their remarks say (config" in note


def test_a_config_that_is_not_a_file_is_refused(tmp_path):
    with pytest.raises(SystemExit, match="row organic_w128c: column config names scripts/configs/nonexistent.yaml"):
        organic_card_note.read_lineage(lineage_with_configs(tmp_path, "scripts/configs/nonexistent.yaml"))


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (["organic_w128,1.5,,1.1,7.1,5.8,30.0,,,,,", "organic_w128b,fast,,1.1,6.8,5.6,29.4,,,,,"], "column stage_hours is 'fast'"),
        (["organic_w128,1.5,maybe,,,,,,,,,"], "column paused is 'maybe'"),
        (["organic_w128b,1.5,,,,,,,,,,", "organic_v3,,,2.0,10.9,7.3,51.2,,,,,"], "the last row must be"),
    ],
)
def test_bad_table_names_row_and_column(tmp_path, lines, message):
    with pytest.raises(SystemExit, match=message):
        organic_card_note.read_lineage(write_table(tmp_path / "bad.csv", lines))


def test_newest_model_without_support_figures_is_refused(tmp_path):
    path = write_table(
        tmp_path / "lineage.csv",
        ["organic_w128b,1.9,,1.1,6.8,5.6,29.4,46.9,23.9,76.9,24.0,", "organic_w128c,2.3,,1.0,6.6,5.6,29.1,,,,,"],
    )
    with pytest.raises(SystemExit, match="organic_w128c has no support figures"):
        organic_card_note.organic_note(organic_card_note.read_lineage(path))


def test_shipped_table_matches_the_checkpoint_and_the_kept_run_logs():
    rows = organic_card_note.read_lineage()
    restarts = organic_card_note.kept_restarts(rows)
    newest, previous = restarts[-1], restarts[-2]
    manifest = json.loads((ROOT / "checkpoints" / "organic-mace" / "manifest.json").read_text())
    assert manifest["provenance"]["config"]["run_dir"] == f"runs/{newest.name}"
    # the previous stage's best weights, from its run directory or as published when the run began
    assert manifest["provenance"]["init"] in (f"runs/{previous.name}/best", "checkpoints/organic")
    validation = manifest["metrics"]["validation_by_group"]["acac"]
    assert validation["energy_rmse_mev_per_structure"] == pytest.approx(newest.figures["validation_energy"], abs=5e-4)
    assert validation["force_rmse_mev_per_ang"] == pytest.approx(newest.figures["validation_force"], abs=5e-4)
    for row in rows:
        run = ROOT / "docs" / "runs" / row.name
        if not row.is_stage or not (run / "metrics.jsonl").exists():
            continue
        hours = training_hours(read_metrics_log(run))
        if row.paused:  # the recorded hours leave out a pause the log counts
            assert row.stage_hours <= round(hours, 1), row.name
        else:
            assert row.stage_hours == round(hours, 1), row.name
    assert all((ROOT / "docs" / "runs" / row.name / "config.json").exists() for row in restarts)


def test_card_note_of_shipped_organic_mace_is_the_generated_one():
    card = (ROOT / "checkpoints" / "organic-mace" / "MODEL_CARD.md").read_text(encoding="utf-8")
    assert organic_card_note.organic_note(organic_card_note.read_lineage()) in card


def test_first_restart_starts_from_the_widened_model(tmp_path):
    path = write_table(
        tmp_path / "lineage.csv",
        ["organic_w128,1.5,,1.1,7.1,5.8,30.0,47.7,24.4,77.9,24.6,", "organic_w128b,1.9,,1.1,6.8,5.6,29.4,46.9,23.9,76.9,24.0,"],
    )
    note = organic_card_note.organic_note(organic_card_note.read_lineage(path))
    assert note.startswith("`organic_w128b`: ")
    assert "--init runs/organic_w128/best`" in note


def test_several_restarts_not_kept_are_listed_together(tmp_path):
    path = write_table(
        tmp_path / "lineage.csv",
        [
            "organic_w128,1.5,,1.1,7.1,5.8,30.0,47.7,24.4,77.9,24.6,",
            "organic_w128b,1.9,,1.1,6.8,5.6,29.4,46.9,23.9,76.9,24.0,",
            "organic_w128c,,,1.2,6.9,5.7,29.6,,,,,AdamW weight decay 0.01",
            'organic_w128d,,,,,,,,,,,"a plain restart, no better"',
            "organic_w128e,1.7,,0.96,6.44,5.449,28.66,45.7,23.2,75.2,23.4,",
        ],
    )
    note = organic_card_note.organic_note(organic_card_note.read_lineage(path))
    assert note.startswith(
        "`organic_w128e`: the last of two warm restarts of `organic_w128`, `organic_w128b` and `organic_w128e` "
        "(not kept: `organic_w128c`, AdamW weight decay 0.01; `organic_w128d`, a plain restart, no better), each "
    )
    assert "(for this one `--run-dir runs/organic_w128e --init runs/organic_w128b/best`)" in note


def test_restarts_after_z_continue_the_chain(tmp_path):
    path = write_table(
        tmp_path / "lineage.csv",
        [
            "organic_w128,1.5,,1.1,7.1,5.8,30.0,47.7,24.4,77.9,24.6,",
            "organic_w128z,1.9,,1.1,6.8,5.6,29.4,46.9,23.9,76.9,24.0,",
            "organic_w128za,1.8,,1.0,6.7,5.5,29.2,46.5,23.8,76.5,23.9,",
        ],
    )
    note = organic_card_note.organic_note(organic_card_note.read_lineage(path))
    assert note.startswith("`organic_w128za`: the last of two warm restarts of `organic_w128`, `organic_w128z` to `organic_w128za`, each")
    assert "(for this one `--run-dir runs/organic_w128za --init runs/organic_w128z/best`)" in note
