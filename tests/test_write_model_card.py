"""scripts/write_model_card.py: the model card's held-out table is measured on the run's own
validation split, per element, with the published bar beside it."""

import importlib.util
import json

from typer.testing import CliRunner

from atomistic import load_potential
from atomistic.cli import app
from atomistic.training.config import load_config
from atomistic.training.metrics import evaluate
from atomistic.training.run import prepare
from tests.conftest import tiny_training_config
from tests.paths import ROOT

spec = importlib.util.spec_from_file_location("write_model_card", ROOT / "scripts" / "write_model_card.py")
write_model_card = importlib.util.module_from_spec(spec)
spec.loader.exec_module(write_model_card)


def test_card_rows_are_the_validation_errors_per_element(tmp_path, capsys):
    config = tiny_training_config(tmp_path, "card", epochs=1)  # <element>/training.json: grouped by element
    result = CliRunner().invoke(app, ["train", str(config)])
    assert result.exit_code == 0, result.output

    write_model_card.main([str(tmp_path / "out" / "card"), "--bar", "mlearn", "--note", "a fine-tune of nothing"])
    card = (tmp_path / "out" / "card" / "MODEL_CARD.md").read_text()
    capsys.readouterr()

    train, valid, _ = prepare(load_config(config))
    potential = load_potential(tmp_path / "out" / "card", dtype="float64")
    for element, (bar_energy, bar_force) in (("Li", (0.49, 0.01)), ("Si", (2.21, 0.06))):
        members = [s for s in valid if f"/{element}/" in s.info["source"]]
        m = evaluate(potential, members).summary()
        row = (
            f"| {element} | {len(members)} | {m['energy_mae_mev_per_atom']:.2f} | {bar_energy} | {m['force_mae_ev_per_ang']:.3f} "
            f"| {bar_force} | no | {m['stress_mae_gpa']:.3f} |"
        )
        assert row in card
    assert "## Training history\na fine-tune of nothing" in card
    for path, weight in ((tmp_path / "Li" / "training.json", "1"), (tmp_path / "Si" / "training.json", "2")):
        n_train = sum(s.info["source"] == str(path) for s in train)
        n_valid = sum(s.info["source"] == str(path) for s in valid)
        assert n_train and n_valid
        assert f"| `{path}` | {n_train} | {n_valid} | {weight} | - |" in card  # not a bundled file: no source
    assert f"| parameters | {sum(w.numel() for w in potential.parameters()):,} |".replace(",", " ") in card
    assert "| optimiser | AdamW, weight decay 5e-07 |" in card
    assert "| loss | MSE; weights energy per atom 10, forces 1, stress 0.05;" in card
    assert "trained from scratch" in card
    limits = card[card.index("## Limits"):]
    assert "- Elements: Li Si only; a structure with any other element is rejected" in limits
    for element in ("Li", "Si"):
        count = sum(f"/{element}/" in s.info["source"] for s in train)
        assert f"{element} {count} structures (" in limits  # the training data's size and kinds, per element
    kind_rows = [line.split(" | ") for line in card.splitlines() if line.startswith(("| Li | ", "| Si | ")) and line.count("|") == 6]
    repeated = [(float(row[4].rstrip(" |")), row[0].lstrip("| "), row[1], int(row[2])) for row in kind_rows if int(row[2]) >= 2]
    if repeated:  # the worst kind seen at least twice is named first, with its force MAE from the kind table
        force, element, kind, n = max(repeated)
        assert f"(at least two structures): {element} {kind} {force:.3f} eV/Å ({n} structures)" in limits
    else:
        assert "Largest held-out force errors" not in limits
    manifest = json.loads((tmp_path / "out" / "card" / "manifest.json").read_text())
    assert set(manifest["metrics"]["validation_by_group"]) == {"Li", "Si"}


def test_committee_is_published_and_carded_on_its_members_shared_split(tmp_path, capsys):
    import pytest

    spec = importlib.util.spec_from_file_location("publish_committee", ROOT / "scripts" / "publish_committee.py")
    publish_committee = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(publish_committee)
    configs = {
        "a": tiny_training_config(tmp_path, "a", epochs=1),
        "b": tiny_training_config(tmp_path, "b", epochs=1, model_options="cutoff: 3.5, channels: 8"),
        "other_split": tiny_training_config(tmp_path, "other_split", epochs=1),
    }
    other = tmp_path / "other_split.yaml"
    other.write_text(other.read_text().replace("seed: 3", "seed: 4"))
    for config in configs.values():
        result = CliRunner().invoke(app, ["train", config])
        assert result.exit_code == 0, result.output
    out, shipped = tmp_path / "out", tmp_path / "shipped"
    (out / "b" / "LICENSE.parent").write_text("the parent's terms")
    with pytest.raises(SystemExit):
        publish_committee.main(["pair", str(out / "a"), str(out / "other_split"), "--checkpoints", str(shipped)])
    assert "different validation splits" in capsys.readouterr().err
    publish_committee.main(["pair", str(out / "a"), str(out / "b"), "--weights", "3", "1", "--checkpoints", str(shipped)])
    assert (shipped / "pair" / "LICENSE.parent").read_text() == "the parent's terms"
    publish_committee.main(["weighed", str(out / "a"), str(out / "b"), "--weigh-by-validation", "--checkpoints", str(shipped)])
    rmse = [json.loads((out / n / "manifest.json").read_text())["metrics"]["validation"]["force_rmse_ev_per_ang"] for n in "ab"]
    weights = json.loads((shipped / "weighed" / "manifest.json").read_text())["architecture"]["committee"]["weights"]
    assert weights == pytest.approx([rmse[1] ** 2 / (rmse[0] ** 2 + rmse[1] ** 2), rmse[0] ** 2 / (rmse[0] ** 2 + rmse[1] ** 2)], abs=1e-4)
    manifest = json.loads((out / "b" / "manifest.json").read_text())
    del manifest["metrics"]
    (out / "b" / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(SystemExit):
        publish_committee.main(["unweighed", str(out / "a"), str(out / "b"), "--weigh-by-validation", "--checkpoints", str(shipped)])
    assert "no held-out force RMSE" in capsys.readouterr().err

    write_model_card.main([str(shipped / "pair"), "--bar", "mlearn"])
    card = (shipped / "pair" / "MODEL_CARD.md").read_text()
    capsys.readouterr()
    assert "Committee of 2 potentials" in card and "`a` (MACE-class, weight 0.75), `b` (MACE-class, weight 0.25)" in card
    assert "### `a`\n| encoder | |" in card and "### `b`\n| encoder | |" in card
    for name in ("a", "b"):  # each member's own parameter count
        count = sum(w.numel() for w in load_potential(out / name).parameters())
        assert f"### `{name}`\n| encoder | |\n|---|---|\n| parameters | {count:,} |".replace(",", " ") in card
    assert "Short-ranged: `a`: a 4 Å cutoff, 1 message-passing layers" in card and "`b`: a 3.5 Å cutoff" in card
    _, valid, _ = prepare(load_config(configs["a"]))
    committee = load_potential(shipped / "pair", dtype="float64")
    for element in ("Li", "Si"):
        members = [s for s in valid if f"/{element}/" in s.info["source"]]
        m = evaluate(committee, members).summary()
        assert f"| {element} | {len(members)} | {m['energy_mae_mev_per_atom']:.2f} | " in card


def test_fine_tuned_from_names_the_start_and_flags_a_start_the_card_now_replaces(tmp_path, monkeypatch):
    published = tmp_path / "checkpoints" / "organic"
    published.mkdir(parents=True)
    (published / "manifest.json").write_text("{}")
    monkeypatch.setenv("ATOMISTIC_CHECKPOINTS", str(tmp_path / "checkpoints"))
    assert write_model_card.init_text(None, published) == "- (trained from scratch)"
    assert write_model_card.init_text("runs/organic_w128c/best", published) == "runs/organic_w128c/best"
    replaced = write_model_card.init_text(str(published), published)
    assert replaced.startswith(str(published)) and "replaced" in replaced
    assert "replaced" in write_model_card.init_text("organic", published)  # --init by model name
    other = tmp_path / "checkpoints" / "organic-mace"
    other.mkdir()
    (other / "manifest.json").write_text("{}")
    # another published model: it may hold a newer model since
    assert write_model_card.init_text("organic", other) == "organic (as published when this run began)"
    assert write_model_card.init_text(str(published), other) == f"{published} (as published when this run began)"


def test_data_sources_come_from_the_data_readme():
    sources = write_model_card.data_sources()
    ethanol = write_model_card.source_of("data/botnet/ethanol/train_methanol.xyz", sources)
    assert "MIT" in ethanol and "BOTNet" in ethanol
    assert "BSD-3-Clause" in write_model_card.source_of("data/mlearn/Mo/training.json", sources)  # a {Si,Ge,Li,Mo} pattern
    assert "CC BY 4.0" in write_model_card.source_of("data/tensors/elastic_mp_cubic.extxyz", sources)
    assert write_model_card.source_of("/elsewhere/train.xyz", sources) == "-"


def test_weight_text_names_each_term_weight():
    assert write_model_card.weight_text({"weight": 0.5, "energy_weight": 0.0, "forces_weight": None}) == "0.5 (energy 0)"
    assert write_model_card.weight_text({"weight": 81.0}) == "81"


def test_training_hours_fall_back_on_the_manifest_when_the_run_log_is_gone(tmp_path):
    provenance = {"config": {"run_dir": str(tmp_path / "runs" / "gone")}}
    assert write_model_card.recorded_training_hours(provenance) is None
    assert write_model_card.recorded_training_hours({**provenance, "training_hours": 1.25}) == 1.25


def shell_assignment(script_text: str, variable: str) -> str:
    """The assignment of ``variable`` in a bash script: its line and the lines it continues onto."""
    start = script_text.index(f"\n{variable}=") + 1
    end = start
    while script_text[end:script_text.index("\n", end)].endswith("\\"):
        end = script_text.index("\n", end) + 1
    return script_text[start:script_text.index("\n", end)]


def test_reproduction_scripts_write_the_shipped_cards_notes():
    """scripts/train_mlearn.sh and scripts/train_organic.sh card each checkpoint with the training
    history its shipped card holds, so a reproduction writes the same card."""
    import subprocess

    for script, notes in (
        ("train_mlearn.sh", {"MLEARN_SMALL_NOTE": "mlearn-small", "MLEARN_COMPACT_NOTE": "mlearn-compact",
                             "MLEARN_MACE_NOTE": "mlearn-mace", "MLEARN_SEVENNET_NOTE": "mlearn-sevennet", "MLEARN_NOTE": "mlearn"}),
        ("train_organic.sh", {"ORGANIC_COMPACT_NOTE": "organic-compact", "ORGANIC_SEVENNET_NOTE": "organic-sevennet",
                              "ORGANIC_SEVENNET_L3_NOTE": "organic-sevennet-l3", "ORGANIC_NOTE": "organic"}),
    ):
        text = (ROOT / "scripts" / script).read_text(encoding="utf-8")
        for variable, name in notes.items():
            assert f'--note "${variable}"' in text
            note = subprocess.run(
                ["bash", "-c", f'{shell_assignment(text, variable)}\nprintf "%s" "${variable}"'],
                capture_output=True, text=True, check=True,
            ).stdout
            card = (ROOT / "checkpoints" / name / "MODEL_CARD.md").read_text(encoding="utf-8")
            assert f"## Training history\n{note}\n\n## Limits" in card, name


def test_published_fine_tune_carries_the_licences_up_its_init_chain(tmp_path, monkeypatch):
    """A restart of a fine-tune of a licensed checkpoint (organic_s7b from organic_s7 from
    SevenNet-0) inherits the licence of the checkpoint at the chain's start."""
    spec = importlib.util.spec_from_file_location("publish_checkpoint", ROOT / "scripts" / "publish_checkpoint.py")
    publish_checkpoint = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(publish_checkpoint)
    monkeypatch.setattr(publish_checkpoint, "ROOT", tmp_path)
    for name, init in (("universal", None), ("first", "universal"), ("restart", "first")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "manifest.json").write_text(json.dumps({"provenance": {"init": init} if init else {}}))
    (tmp_path / "universal" / "LICENSE_UNIVERSAL").write_text("terms")
    licences = publish_checkpoint.inherited_licences({"provenance": {"init": "restart"}})
    assert [path.name for path in licences] == ["LICENSE_UNIVERSAL"]
    assert publish_checkpoint.inherited_licences({"provenance": {"init": "gone"}}) == []
    assert publish_checkpoint.inherited_licences({}) == []
    # --init by model name (no such path here or under the project root), resolved as --init
    # resolves it: the published checkpoint of that name
    shipped = tmp_path / "shipped"
    (shipped / "published-universal").mkdir(parents=True)
    (shipped / "published-universal" / "manifest.json").write_text("{}")
    (shipped / "published-universal" / "LICENSE_SHIPPED").write_text("terms")
    monkeypatch.setenv("ATOMISTIC_CHECKPOINTS", str(shipped))
    licences = publish_checkpoint.inherited_licences({"provenance": {"init": "published-universal"}})
    assert [path.name for path in licences] == ["LICENSE_SHIPPED"]
