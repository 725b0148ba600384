from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from typer.testing import CliRunner

from atomistic.cli import app
from atomistic.training.config import ConfigError, load_config
from atomistic.training.loop import training_hours
from atomistic.training.run import prepare

from .conftest import tiny_training_config as _config
from .paths import DATA, ROOT

runner = CliRunner()


def _assert_same_training(tmp_path, first: str, second: str, epochs: int) -> None:
    """Two runs of ``_config`` ended at ``epochs`` with bit-identical weights, training state
    and best checkpoints."""
    a = torch.load(tmp_path / "runs" / first / "state.pt", weights_only=True)
    b = torch.load(tmp_path / "runs" / second / "state.pt", weights_only=True)
    assert a["epoch"] == b["epoch"] == epochs
    for key in a["model"]:
        assert torch.equal(a["model"][key], b["model"][key]), key
    wa = load_file(str(tmp_path / "out" / first / "weights.safetensors"))
    wb = load_file(str(tmp_path / "out" / second / "weights.safetensors"))
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


STAGE_TWO = "stage_two: {start_epoch: 1, energy: 0.0, forces: 0.0, stress: 2.0}\noptimizer: {amsgrad: true}"


def test_resume_matches_uninterrupted_run(tmp_path):
    # the interruption falls on the switch to stage two: the resumed run must pick it up
    straight = _config(tmp_path, "straight", extra=STAGE_TWO)
    result = runner.invoke(app, ["train", straight])
    assert result.exit_code == 0, result.output
    interrupted = _config(tmp_path, "interrupted", extra=STAGE_TWO)
    result = runner.invoke(app, ["train", interrupted, "--stop-after-epochs", "1"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["train", interrupted])
    assert result.exit_code == 2 and "--resume" in result.output  # refuses to overwrite a run
    result = runner.invoke(app, ["train", interrupted, "--resume"])
    assert result.exit_code == 0, result.output
    _assert_same_training(tmp_path, "straight", "interrupted", epochs=2)
    state = torch.load(tmp_path / "runs" / "interrupted" / "state.pt", weights_only=True)
    assert state["optimizer"]["param_groups"][0]["amsgrad"] is True
    assert all("max_exp_avg_sq" in moments for moments in state["optimizer"]["state"].values())
    lines = (tmp_path / "runs" / "straight" / "metrics.jsonl").read_text().strip().splitlines()
    assert len(lines) == 2 and "valid" in json.loads(lines[-1])
    first, second = (json.loads(line) for line in lines)
    assert first["stage"] == 1 and {"energy", "forces", "stress"} <= set(first["train"])
    # validation metrics per source folder (Li/, Si/), which together make up the pooled ones
    valid = second["valid"]
    by_source = valid["by_source"]
    assert set(by_source) == {"Li", "Si"}
    assert sum(group["n_structures"] for group in by_source.values()) == valid["n_structures"]
    pooled = sum(group["n_structures"] * group["energy_mae_mev_per_atom"] for group in by_source.values())
    assert pooled / valid["n_structures"] == pytest.approx(valid["energy_mae_mev_per_atom"], rel=1e-6)
    assert min(g["force_mae_ev_per_ang"] for g in by_source.values()) <= valid["force_mae_ev_per_ang"]
    assert valid["force_mae_ev_per_ang"] <= max(g["force_mae_ev_per_ang"] for g in by_source.values())
    # stage two trains on the stress term alone, at weight 2
    assert second["stage"] == 2 and set(second["train"]) == {"stress", "total"}
    assert second["train"]["total"] == pytest.approx(2.0 * second["train"]["stress"])
    # the worst step of each epoch names its batch: source#frame of 1..batch_size training structures
    for record in (first, second):
        worst = record["worst_step"]
        assert worst["loss"] >= record["train"]["total"] and 1 <= worst["step"] <= 3
        assert 1 <= len(worst["structures"]) <= 4
        assert all(name.rsplit("#", 1)[0].endswith(("Li/training.json", "Si/training.json")) for name in worst["structures"])
    assert (tmp_path / "runs" / "straight" / "parity_forces.png").exists()
    result = runner.invoke(app, ["eval", str(tmp_path / "out" / "straight"), str(tmp_path / "Li" / "training.json"), "--json"])
    assert result.exit_code == 0 and json.loads(result.output)["n_structures"] == 8


def test_dataset_weight_normalisation_trains_another_model(tmp_path):
    # the tiny config weights Si 2 and Li 1: the two normalisations differ on every batch whose
    # weights do not average to the training set's mean weight, so the runs part ways
    by_batch = _config(tmp_path, "by_batch", epochs=1)
    by_dataset = _config(tmp_path, "by_dataset", epochs=1, extra="loss: {weight_normalisation: dataset}")
    for path in (by_batch, by_dataset):
        result = runner.invoke(app, ["train", path])
        assert result.exit_code == 0, result.output
    a = torch.load(tmp_path / "runs" / "by_batch" / "state.pt", weights_only=True)["model"]
    b = torch.load(tmp_path / "runs" / "by_dataset" / "state.pt", weights_only=True)["model"]
    assert any(not torch.equal(a[key], b[key]) for key in a)
    record = json.loads((tmp_path / "runs" / "by_dataset" / "metrics.jsonl").read_text().splitlines()[-1])
    assert all(np.isfinite(value) for value in record["train"].values())


def test_per_file_term_weights_reach_the_loss(tmp_path):
    # Si weighs 2 in the tiny config: an energy weight of 2 on it is the same run, bit for bit;
    # an energy weight of 0 leaves Si's forces and stress in the loss but not its energies
    paths = {}
    for name, si_entry in (("plain", None), ("same", "energy_weight: 2.0"), ("no_si_energy", "energy_weight: 0.0")):
        path = Path(_config(tmp_path, name, epochs=1, extra="loss: {weight_normalisation: dataset}"))
        if si_entry:
            text = path.read_text().replace("weight: 2.0}", f"weight: 2.0, {si_entry}}}")
            assert si_entry in text
            path.write_text(text)
        result = runner.invoke(app, ["train", str(path)])
        assert result.exit_code == 0, result.output
        paths[name] = tmp_path / "runs" / name / "state.pt"
    states = {name: torch.load(path, weights_only=True)["model"] for name, path in paths.items()}
    assert all(torch.equal(states["plain"][k], states["same"][k]) for k in states["plain"])
    assert any(not torch.equal(states["plain"][k], states["no_si_energy"][k]) for k in states["plain"])


def test_resume_runs_on_the_backend_of_the_saved_epochs(tmp_path, monkeypatch):
    # `auto` can resolve differently when a run is resumed (another machine, a kernel build that
    # failed once): the resumed epochs run on the backend the saved ones ran on
    import atomistic.models.builders as builders

    straight = _config(tmp_path, "straight", extra="backend: e3nn")
    result = runner.invoke(app, ["train", straight])
    assert result.exit_code == 0 and "kernel backend e3nn" in result.output, result.output
    interrupted = _config(tmp_path, "interrupted")
    resolve = builders.resolve_backend
    with monkeypatch.context() as patch:  # `auto` means e3nn for the first epoch only
        patch.setattr(builders, "resolve_backend", lambda name, *a, **k: resolve("e3nn" if name == "auto" else name, *a, **k))
        result = runner.invoke(app, ["train", interrupted, "--stop-after-epochs", "1"])
    assert result.exit_code == 0 and "kernel backend e3nn" in result.output, result.output
    assert builders.resolve_backend("auto") != "e3nn"
    result = runner.invoke(app, ["train", interrupted, "--resume"])
    assert result.exit_code == 0 and "kernel backend e3nn" in result.output, result.output
    _assert_same_training(tmp_path, "straight", "interrupted", epochs=2)
    # another explicit backend cannot continue the saved epochs: a clear error, not a crash
    other = _config(tmp_path, "interrupted", epochs=3, extra="backend: reference")
    result = runner.invoke(app, ["train", other, "--resume"])
    assert result.exit_code == 2 and "backend: the saved epochs" in result.output and "ran on 'e3nn'" in result.output, result.output


CONFIG_ERRORS = [
    ("epochs: 0", "epochs: must be >= 1"),
    ("learning_rate: 1", r"unknown option\(s\) \['learning_rate'\]"),
    ("loss: {kind: l1}", "loss.kind"),
    ("epochs: 5\nstage_two: {start_epoch: 5}", r"stage_two.start_epoch: must be null or an epoch in \[0, epochs\)"),
    ("stage_two: {start_epoch: 1, energy: -1}", "stage_two: loss weights"),
    ("optimizer: {amsgrad: yes please}", "optimizer.amsgrad: expected true or false, got 'yes please'"),
    ("epochs: ten", "epochs: expected int, got 'ten'"),
    ("model: {radial_hidden: [8, wide]}", "model.radial_hidden: expected a list of integers"),
    ("model: {cutoff: 5.0, species_cutoffs: {Li: 6.0}}", r"model.species_cutoffs.Li: must be a cutoff in \(0, model.cutoff = 5.0\]"),
    ("model: {species_cutoffs: {Xx: 4.0}}", "model.species_cutoffs.Xx: not an element"),
    ("model: {species_cutoffs: [4.0]}", "model.species_cutoffs: expected a mapping"),
    ("model: {encoder: allegro}", r"model.encoder: must be mace \(or nequip"),
    ("model: {refit_e0s: 1}", "model.refit_e0s: expected true or false, got 1"),
    ("model: {refit_e0s: true, energy_head: false, tensor_heads: {dielectric_tensor: {}}}",
     "model.refit_e0s: re-fits the energy head's E0s; model.energy_head is false"),
    # entries that begin with `data:` replace the default data section
    ("data: {train: [a.json], info_weights: [group]}", "data.info_weights: expected a mapping"),
    ("data: {train: [a.json], label_keys: [REF_energy]}", "data.label_keys: expected a mapping"),
    ("data: {train: [a.json], label_keys: {virials: REF_virials}}", "data.label_keys.virials: unknown label; allowed: energy, forces, stress"),
    ("data: {train: [a.json], label_keys: {energy: 3}}", "data.label_keys.energy: expected the name of an info or arrays key, got 3"),
    ("data: {train: [a.json], info_weights: {group: Surface}}",
     "data.info_weights.group: expected a non-empty mapping of value to factor, got 'Surface'"),
    ("data: {train: [a.json], info_weights: {group: {Surface: -1}}}",
     "data.info_weights.group.Surface: the factor must be a number >= 0, got -1"),
    ("data: {train: [a.json], info_weights: {group: {Surface: heavy}}}",
     "data.info_weights.group.Surface: the factor must be a number >= 0, got 'heavy'"),
]


def test_stratify_by_is_checked_against_the_config_and_the_data(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("data: {train: [a.json], stratify_by: [group, 3]}\n")
    with pytest.raises(ConfigError, match=r"data.stratify_by: expected a list of strings, got \['group', 3\]"):
        load_config(path)
    config = load_config(_config(tmp_path, "typo", extra=""))
    typo = dataclasses.replace(config, data=dataclasses.replace(config.data, stratify_by=("groups",)))
    with pytest.raises(ConfigError, match=r"data.stratify_by: no structure of '.*Li/training.json' carries the info key\(s\) \['groups'\]"):
        prepare(typo)
    stratified = dataclasses.replace(config, data=dataclasses.replace(config.data, stratify_by=("group", "temperature_k")))
    train, valid, _ = prepare(stratified)
    assert len(valid) == 4 and len(train) == 12  # 25 % of each 8-structure file


def test_info_weights_multiply_the_loss_weights_of_matching_training_structures(tmp_path):
    config = load_config(_config(tmp_path, "info", extra=""))
    plain_train, plain_valid, _ = prepare(config)

    def with_weights(info_weights):
        return dataclasses.replace(config, data=dataclasses.replace(config.data, info_weights=info_weights))

    groups = sorted({s.info["group"] for s in plain_train})
    temperatures = {s.info.get("temperature_k") for s in plain_train} - {None}
    assert groups and temperatures, "the tiny files carry mlearn groups and MD temperatures"
    group, temperature = groups[0], sorted(temperatures)[0]
    # YAML reads an unquoted 300 as an int: values match as text, so 300 and "300" both apply
    weights = {"group": {group: 4.0}, "temperature_k": {str(temperature): 0.5}}
    train, valid, _ = prepare(with_weights(weights))
    assert [s.info["frame"] for s in valid] == [s.info["frame"] for s in plain_valid]  # the split is unchanged
    factors = set()
    for before, after in zip(plain_train, train, strict=True):
        factor = (4.0 if before.info["group"] == group else 1.0) * (0.5 if before.info.get("temperature_k") == temperature else 1.0)
        factors.add(factor)
        for key in ("loss_weight", "loss_weight_energy", "loss_weight_forces", "loss_weight_stress"):
            assert after.info[key] == pytest.approx(before.info[key] * factor), key
    assert factors == {2.0, 4.0}  # both keys acted, and their factors multiplied
    # a key or value no training structure carries is a typo, not a silent no-op
    with pytest.raises(ConfigError, match=r"data.info_weights.groups: .*none carries the info key 'groups'"):
        prepare(with_weights({"groups": {group: 4.0}}))
    with pytest.raises(ConfigError, match=rf"data.info_weights.group: no training structure has group = 'surfaces'; the values present: \['{group}'\]"):
        prepare(with_weights({"group": {"surfaces": 4.0}}))


def test_label_keys_read_labels_stored_under_other_names(tmp_path):
    from .conftest import write_acac_with_ref_keys

    plain, renamed = write_acac_with_ref_keys(tmp_path, 6)  # the reference labels as REF_* only
    config = load_config(_config(tmp_path, "keys", extra=""))

    def with_file(path, **label_keys):
        data = dataclasses.replace(config.data, train=(dataclasses.replace(config.data.train[0], path=str(path)),), label_keys=label_keys)
        return dataclasses.replace(config, data=data)

    expected_train, expected_valid, _ = prepare(with_file(plain))
    train, valid, _ = prepare(with_file(renamed, energy="REF_energy", forces="REF_forces"))
    for got, want in zip([*train, *valid], [*expected_train, *expected_valid], strict=True):
        assert got.labels["energy"] == want.labels["energy"]
        np.testing.assert_array_equal(got.labels["forces"], want.labels["forces"])
    # without the keys nothing is labelled: an error that names the file, the keys and a candidate
    with pytest.raises(ConfigError, match=r"data.train\[0\]: '.*ref.xyz' holds no labels: no energy under info\['energy'\].*'REF_energy'.*data.label_keys"):
        prepare(with_file(renamed))


def test_per_file_valid_fraction_and_max_structures(tmp_path):
    config = load_config(_config(tmp_path, "files", extra=""))
    li, si = config.data.train
    # Si trains whole (an auxiliary file kept out of validation); Li keeps its 25 % split
    aux = dataclasses.replace(config, data=dataclasses.replace(config.data, train=(li, dataclasses.replace(si, valid_fraction=0.0))))
    train, valid, _ = prepare(aux)
    assert len(valid) == 2 and all(set(s.numbers) == {3} for s in valid)
    assert sum(set(s.numbers) == {14} for s in train) == 8
    _, plain_valid, _ = prepare(config)  # Li's split does not depend on the other file's options
    assert [s.positions.tolist() for s in valid] == [s.positions.tolist() for s in plain_valid if set(s.numbers) == {3}]
    # a seeded subset of 5 of Si's 8 structures, in file order, before the split
    subset = dataclasses.replace(config, data=dataclasses.replace(config.data, train=(li, dataclasses.replace(si, max_structures=5, valid_fraction=0.0))))
    train, _, _ = prepare(subset)
    kept = [s for s in train if set(s.numbers) == {14}]
    everything = [s for s in prepare(aux)[0] if set(s.numbers) == {14}]
    assert len(kept) == 5
    positions = [s.positions.tolist() for s in everything]
    order = [positions.index(s.positions.tolist()) for s in kept]
    assert order == sorted(order) and prepare(subset)[0][-1].positions.tolist() == kept[-1].positions.tolist()
    path = tmp_path / "bad.yaml"
    for text, message in [
        ("data: {train: [{path: a.json, valid_fraction: 1.0}]}", r"data.train\[0\].valid_fraction: must be null or in \[0, 1\)"),
        ("data: {train: [{path: a.json, valid_fraction: 0.0}], valid_fraction: 0.0}", "data.valid_fraction: must be > 0"),
        ("data: {train: [{path: a.json, valid_fraction: 0.0}]}", "data.valid_fraction: must be > 0"),
        ("data: {train: [{path: a.json, valid_fraction: 0.2}], valid: [b.json]}", r"data.train\[0\].valid_fraction: applies only when data.valid is empty"),
        ("data: {train: [a.json], valid: [{path: b.json, valid_fraction: 0.2}]}", r"data.valid\[0\].valid_fraction: a validation file is not split"),
        ("data: {train: [{path: a.json, max_structures: 0}]}", r"data.train\[0\].max_structures: must be null or >= 1"),
        ("data: {train: [{path: a.json, max_structures: 2.5}]}", r"data.train\[0\].max_structures: expected int"),
    ]:
        path.write_text(text + "\n")
        with pytest.raises(ConfigError, match=message):
            load_config(path)
    path.write_text("data: {train: [a.json, {path: b.json, valid_fraction: 0.0}], valid_fraction: 0.0}\n")
    with pytest.raises(ConfigError, match="data.valid_fraction: must be > 0"):
        load_config(path)
    path.write_text("data: {train: [{path: a.json, valid_fraction: 0.3}, {path: b.json, valid_fraction: 0.0}], valid_fraction: 0.0}\n")
    assert [load_config(path).data.fraction_of(f) for f in load_config(path).data.train] == [0.3, 0.0]


def test_files_without_energy_weight_leave_the_energy_statistics_alone():
    """Ethanol's energies sit on another atomic zero (its isolated C and O lie 1.6 and 2.2 eV
    above acac's); trained on with ``energy_weight: 0`` they must not move the least-squares
    E0s or the readout shift fitted to acac."""
    from atomistic.training.config import ConfigError, config_from_dict
    from atomistic.training.run import prepare

    acac = {"path": str(DATA / "botnet" / "acac" / "train_300K.xyz"), "max_structures": 40}
    ethanol = {"path": str(DATA / "botnet" / "ethanol" / "train.xyz"), "max_structures": 40, "valid_fraction": 0.0}
    model = {"channels": 4, "max_ell": 1, "num_layers": 1, "correlation": 2, "radial_hidden": [8]}
    _, _, alone = prepare(config_from_dict({"data": {"train": [acac]}, "model": model}))
    _, _, ignored = prepare(config_from_dict({"data": {"train": [acac, {**ethanol, "energy_weight": 0.0}]}, "model": model}))
    _, _, mixed = prepare(config_from_dict({"data": {"train": [acac, ethanol]}, "model": model}))
    assert ignored["shift"] == pytest.approx(alone["shift"], abs=1e-12)
    # acac alone is one composition: the least-squares E0s are its minimum-norm solution
    np.testing.assert_allclose(ignored["e0s"], alone["e0s"], atol=1e-9)
    assert np.abs(mixed["e0s"] - alone["e0s"]).max() > 0.1  # the weighted ethanol energies do count (eV)

    bad = config_from_dict({"data": {"train": [{**ethanol, "energy_weight": 0.0, "valid_fraction": 0.1}]}, "model": model})
    with pytest.raises(ConfigError, match="data.isolated_atoms: no training structure has an energy"):
        prepare(bad)


def test_config_errors_name_the_field(tmp_path):
    path = tmp_path / "bad.yaml"
    for extra, message in CONFIG_ERRORS:
        data = "" if extra.startswith("data:") else "data: {train: [a.json]}\n"
        path.write_text(f"{data}{extra}\n")
        with pytest.raises(ConfigError, match=message):
            load_config(path)
    path.write_text("data: {train: [{path: a.json, weight: heavy}]}\n")
    with pytest.raises(ConfigError, match=r"data.train\[0\].weight: expected float"):
        load_config(path)
    # YAML 1.1 reads 1e-3 (no dot) as a string: it still means the number
    path.write_text("data: {train: [a.json]}\noptimizer: {learning_rate: 1e-3, weight_decay: 0}\n")
    optimizer = load_config(path).optimizer
    assert optimizer.learning_rate == 1e-3 and isinstance(optimizer.weight_decay, float)
    if not torch.cuda.is_available():
        path.write_text("data: {train: [a.json]}\ndevice: cuda\n")
        with pytest.raises(ConfigError, match="device: must be auto, cpu, or cuda"):
            load_config(path)
    toml = tmp_path / "ok.toml"
    toml.write_text('epochs = 3\n[data]\ntrain = [{path = "a.json", weight = 0.5}]\n')
    config = load_config(toml)
    assert config.epochs == 3 and config.data.train[0].weight == 0.5


def test_energy_shift_is_the_mean_interaction_energy_per_atom():
    from atomistic.data.convert import Structure
    from atomistic.training.config import config_from_dict
    from atomistic.training.run import build_model, prepare
    from atomistic.training.statistics import mean_interaction_energy

    e0s = np.array([-1.5, -7.0])  # H, O
    cell = np.zeros((3, 3))
    water = Structure(numbers=np.array([8, 1, 1]), positions=np.array([[0, 0, 0], [0.96, 0, 0], [-0.24, 0.93, 0]]), cell=cell,
                      pbc=np.zeros(3, bool), labels={"energy": -10.0 - 3 * 0.4})
    hydrogen = Structure(numbers=np.array([1, 1]), positions=np.array([[0, 0, 0], [0.74, 0, 0]]), cell=cell,
                         pbc=np.zeros(3, bool), labels={"energy": -3.0 - 2 * 0.1})
    # per atom: -0.4 and -0.1 eV below the isolated atoms
    assert mean_interaction_energy([water, hydrogen], (1, 8), e0s) == pytest.approx(-0.25)

    config = config_from_dict({"data": {"train": [str(DATA / "botnet" / "acac" / "train_300K.xyz")]},
                               "model": {"channels": 4, "max_ell": 1, "num_layers": 1, "correlation": 2, "radial_hidden": [8]}})
    config = dataclasses.replace(config, data=dataclasses.replace(config.data, isolated_atoms=str(DATA / "botnet" / "acac" / "isolated_atoms.xyz")))
    train, _, stats = prepare(config)
    assert stats["shift"] == pytest.approx(mean_interaction_energy(train, stats["species"], stats["e0s"]))
    assert stats["shift"] < -4.0  # minus acetylacetone's atomisation energy per atom, eV
    head = build_model(config, stats, init=None).heads["energy"]
    assert float(head.shift) == pytest.approx(stats["shift"])


def test_extend_species_keeps_old_predictions():
    from ase import Atoms

    from atomistic.testing import random_periodic_structure
    from atomistic.training.transfer import extend_species

    from .conftest import small_mace

    potential = small_mace(2, 1, 3, 2)
    potential.heads["energy"].scale.copy_(torch.tensor([0.2, 0.9, 0.6, 1.5], dtype=torch.float64))
    grown = extend_species(potential, [8, 1], {8: -4.9, 1: -1.1})
    assert grown.atomic_numbers == (3, 14, 32, 42, 8, 1)
    # per-species scales carried over; the new elements start at the old ones' mean
    assert grown.heads["energy"].scale.tolist() == pytest.approx([0.2, 0.9, 0.6, 1.5, 0.8, 0.8])
    old_only = random_periodic_structure((3, 14, 32, 42), n_atoms=6, seed=2)
    (a,), (b,) = potential.predict(old_only), grown.predict(old_only)
    assert abs(a["energy"] - b["energy"]) < 1e-10
    assert abs(a["forces"] - b["forces"]).max() < 1e-10
    (water,) = grown.predict(Atoms("OH2", positions=[[0, 0, 0], [0.96, 0, 0], [-0.24, 0.93, 0]]))
    assert water["forces"].shape == (3, 3)
    assert grown.reference_energy(8) == pytest.approx(-4.9)


def test_per_species_scale_is_each_elements_force_rms(tmp_path):
    from atomistic.checkpoint import load_potential
    from atomistic.training.run import prepare
    from atomistic.training.statistics import force_rms, force_rms_per_species

    path = _config(tmp_path, "scaled", epochs=1, model_options="per_species_scale: true")
    result = runner.invoke(app, ["train", path])
    assert result.exit_code == 0, result.output
    train, _, stats = prepare(load_config(path))
    by_element = {}
    for s in train:
        for z, f in zip(s.numbers, np.asarray(s.labels["forces"]), strict=True):
            by_element.setdefault(int(z), []).append(f)
    expected = [np.sqrt(np.mean(np.square(by_element[z]))) for z in stats["species"]]
    assert force_rms_per_species(train, stats["species"]) == pytest.approx(expected, rel=1e-12)
    assert expected[0] < 0.5 * expected[1]  # Li's forces are much softer than Si's
    scale = load_potential(tmp_path / "out" / "scaled", dtype=torch.float64).heads["energy"].scale
    assert scale.tolist() == pytest.approx(expected, rel=1e-6)  # checkpoints hold float32
    # an element without force labels takes the pooled value
    no_forces = [dataclasses.replace(s, labels={k: v for k, v in s.labels.items() if k != "forces"}) for s in train if 3 in s.numbers]
    others = [s for s in train if 3 not in s.numbers]
    pooled = force_rms(others)
    assert force_rms_per_species(no_forces + others, (3, 14))[0] == pytest.approx(pooled)


def test_species_cutoffs_reach_the_model_and_its_neighbour_count(tmp_path):
    from atomistic.checkpoint import load_potential
    from atomistic.training.run import prepare
    from atomistic.training.statistics import average_num_neighbors

    path = _config(tmp_path, "pairs", epochs=1, model_options="species_cutoffs: {Si: 3.0}")
    result = runner.invoke(app, ["train", path])
    assert result.exit_code == 0, result.output
    potential = load_potential(tmp_path / "out" / "pairs", dtype=torch.float64)
    assert potential.encoder.config.species_cutoffs == (4.0, 3.0)  # Li unlisted: model.cutoff
    assert potential.encoder.pair_cutoffs.tolist() == [[4.0, 3.5], [3.5, 3.0]]
    train, _, stats = prepare(load_config(path))
    plain = average_num_neighbors(train, 4.0)
    assert stats["avg_num_neighbors"] < plain
    # the count by hand: Li-Li within 4 Å, Si-Si within 3 Å (the files hold no Li-Si pairs)
    from atomistic.data.neighbors import neighbor_list

    by_hand = 0
    for s in train:
        *_, d = neighbor_list(s.positions, s.cell, s.pbc, 4.0, with_distances=True)
        by_hand += int(np.count_nonzero(d < (4.0 if s.numbers[0] == 3 else 3.0)))
    assert stats["avg_num_neighbors"] == pytest.approx(by_hand / sum(len(s) for s in train))
    assert potential.encoder.config.avg_num_neighbors == pytest.approx(stats["avg_num_neighbors"], abs=1e-4)


def test_extend_species_gives_new_elements_the_graph_cutoff():
    from atomistic.training.transfer import extend_species

    from .conftest import small_mace

    potential = small_mace(1, 1, 2, 1, species_cutoffs=(3.0, 3.5, 4.0, 2.5))
    grown = extend_species(potential, [8], {8: -4.9})
    assert grown.encoder.config.species_cutoffs == (3.0, 3.5, 4.0, 2.5, 4.0)


def test_change_species_cutoffs_keeps_the_unchanged_elements():
    from atomistic.testing import assert_potential_physics, random_periodic_structure
    from atomistic.training.transfer import change_species_cutoffs

    from .conftest import small_mace

    potential = small_mace(1, 1, 2, 1)  # 4 Å for every element
    changed = change_species_cutoffs(potential, {3: 5.0, 32: 3.5})
    assert changed.encoder.config.cutoff == 5.0
    assert changed.encoder.config.species_cutoffs == (5.0, 4.0, 3.5, 4.0)
    for numbers in ((14,), (42,), (14, 42)):  # elements whose cutoff did not change
        atoms = random_periodic_structure(numbers, n_atoms=6, seed=4)
        (a,), (b,) = potential.predict(atoms), changed.predict(atoms)
        assert abs(a["energy"] - b["energy"]) < 1e-10
        assert abs(a["forces"] - b["forces"]).max() < 1e-10 and abs(a["stress"] - b["stress"]).max() < 1e-12
    lithium = random_periodic_structure((3,), n_atoms=6, seed=4, density=0.08)
    (a,), (b,) = potential.predict(lithium), changed.predict(lithium)
    assert abs(a["energy"] - b["energy"]) > 1e-3  # Li now sees Li-Li pairs between 4 and 5 Å
    assert_potential_physics(changed, lithium)
    # and back: the original cutoffs give the original model's numbers
    (c,) = change_species_cutoffs(changed, {3: 4.0, 32: 4.0}).predict(lithium)
    assert abs(a["energy"] - c["energy"]) < 1e-10 and abs(a["forces"] - c["forces"]).max() < 1e-10
    assert change_species_cutoffs(potential, {14: 4.0}) is potential
    with pytest.raises(ValueError, match=r"does not have: \[8\]"):
        change_species_cutoffs(potential, {8: 4.0})


@pytest.mark.parametrize("backend", ["reference", "cpu"])
@pytest.mark.parametrize(
    ("shape", "options"),
    [((2, 1, 3, 2), {}), ((3, 2, 3, 2), {}), ((2, 1, 2, 3), {"species_radial": True, "species_cutoffs": (4.0, 3.5, 4.0, 3.0)})],
)
def test_widen_channels_keeps_predictions(shape, options, backend):
    from atomistic.testing import random_periodic_structure
    from atomistic.training.transfer import widen_channels

    from .conftest import small_mace

    potential = small_mace(*shape, backend=backend, **options)
    wide = widen_channels(potential, 9)
    assert wide.encoder.config.channels == 9 and wide.metadata.backend == potential.metadata.backend
    assert sum(p.numel() for p in wide.parameters()) > 2 * sum(p.numel() for p in potential.parameters())
    structure = random_periodic_structure((3, 14, 32, 42), n_atoms=6, seed=2)
    (a,), (b,) = potential.predict(structure), wide.predict(structure)
    assert abs(a["energy"] - b["energy"]) < 1e-10
    assert abs(a["forces"] - b["forces"]).max() < 1e-10 and abs(a["stress"] - b["stress"]).max() < 1e-12
    # the new channels compute features; only the weights that read them start at zero
    readout = wide.heads["energy"].linear_readout.weight.view(shape[3], 9)
    assert torch.all(readout[:, 4:] == 0) and torch.all(readout[:, :4] != 0)
    assert widen_channels(potential, 4) is potential
    with pytest.raises(ValueError, match="cannot narrow"):
        widen_channels(potential, 3)


def _fine_tune_of_a_base_run(tmp_path, name: str, model_options: str):
    """Train the tiny config as ``base`` (once per ``tmp_path``), then fine-tune it with
    ``--init`` under ``name`` with ``model_options``; returns the CLI result."""
    if not (tmp_path / "out" / "base").exists():
        assert runner.invoke(app, ["train", _config(tmp_path, "base", epochs=1)]).exit_code == 0
    fine_tune = _config(tmp_path, name, epochs=1, model_options=model_options)
    return runner.invoke(app, ["train", fine_tune, "--init", str(tmp_path / "out" / "base")])


def test_init_with_species_cutoffs_changes_only_the_listed_elements(tmp_path):
    from atomistic.checkpoint import load_potential

    result = _fine_tune_of_a_base_run(tmp_path, "longer", "cutoff: 5.0, species_cutoffs: {Li: 5.0}")
    assert result.exit_code == 0, result.output
    assert "not used from the config" not in result.output  # the model section matches the fine-tuned model
    potential = load_potential(tmp_path / "out" / "longer", dtype=torch.float64)
    assert potential.encoder.config.cutoff == 5.0
    assert potential.encoder.config.species_cutoffs == (5.0, 4.0)  # Si unlisted: its own 4 Å
    assert potential.encoder.config.avg_num_neighbors == load_potential(tmp_path / "out" / "base").encoder.config.avg_num_neighbors
    result = _fine_tune_of_a_base_run(tmp_path, "unknown", "species_cutoffs: {O: 3.0}")
    assert result.exit_code == 2 and "model.species_cutoffs" in result.output and "[8]" in result.output


def test_refit_e0s_recovers_a_constant_per_element_offset(tmp_path):
    """A model whose E0s are off by a constant per element (another DFT setup's energy zero)
    is moved back onto the labels exactly by the least-squares refit, and ``--init`` applies it
    (a new model or one without energy head is refused)."""
    from atomistic.checkpoint import load_potential
    from atomistic.data.datasets import read_labelled
    from atomistic.training.transfer import refit_reference_energies

    assert runner.invoke(app, ["train", _config(tmp_path, "base", epochs=1)]).exit_code == 0
    potential = load_potential(tmp_path / "out" / "base", dtype=torch.float64)
    structures = [*read_labelled(tmp_path / "Li" / "training.json"), *read_labelled(tmp_path / "Si" / "training.json")]
    labelled = [
        dataclasses.replace(s, labels={"energy": p["energy"]})
        for s, p in zip(structures, potential.predict(structures, properties=["energy"]), strict=True)
    ]
    index = {z: k for k, z in enumerate(potential.atomic_numbers)}
    offset = {3: 0.3, 14: -0.2}  # eV per atom
    with torch.no_grad():
        for z, value in offset.items():
            potential.heads["energy"].e0s[index[z]] += value
    shifts = refit_reference_energies(potential, labelled)
    assert shifts == pytest.approx({3: -0.3, 14: 0.2}, abs=1e-9)
    refit = potential.predict(labelled, properties=["energy"])
    assert [p["energy"] for p in refit] == pytest.approx([s.labels["energy"] for s in labelled], abs=1e-9)

    result = _fine_tune_of_a_base_run(tmp_path, "refit", "refit_e0s: true")
    assert result.exit_code == 0, result.output
    assert "model.refit_e0s: E0s shifted by (meV) Li " in result.output and ", Si " in result.output
    assert load_potential(tmp_path / "out" / "refit").metadata.provenance["e0s_method"].startswith("the checkpoint's, shifted")
    result = runner.invoke(app, ["train", _config(tmp_path, "fresh", epochs=1, model_options="refit_e0s: true")])
    assert result.exit_code == 2 and "model.refit_e0s" in result.output and "--init" in result.output
    result = runner.invoke(app, ["train", _config(tmp_path, "fresh_nequip", epochs=1, model_options="encoder: nequip")])
    assert result.exit_code == 2 and "model.encoder" in result.output and "--init" in result.output


def test_refit_e0s_anchors_each_element_on_its_isolated_atom(tmp_path):
    """Data of one composition cannot tell the elements' energy zeros apart (least squares
    alone spreads the offset by the minimum norm); isolated-atom energies fix them, and the
    least-squares fit then adds only what the isolated atoms leave over."""
    from atomistic.checkpoint import load_potential
    from atomistic.data.convert import Structure
    from atomistic.training.transfer import refit_reference_energies

    assert runner.invoke(app, ["train", _config(tmp_path, "base", epochs=1)]).exit_code == 0
    potential = load_potential(tmp_path / "out" / "base", dtype=torch.float64)
    # one composition: Li–Si dimers at four bond lengths
    dimers = [
        Structure(numbers=np.array([3, 14]), positions=np.array([[0.0, 0, 0], [2.3 + 0.1 * k, 0, 0]]), cell=np.zeros((3, 3)),
                  pbc=np.zeros(3, bool))
        for k in range(4)
    ]
    atoms = [Structure(numbers=np.array([z]), positions=np.zeros((1, 3)), cell=np.zeros((3, 3)), pbc=np.zeros(3, bool))
             for z in (3, 14)]
    offset = {3: 1.5, 14: -4.0}  # eV per atom: this data's zero minus the model's
    binding = 0.25  # eV per dimer that the isolated atoms do not account for
    predicted = potential.predict([*atoms, *dimers], properties=["energy"])
    atoms = [dataclasses.replace(a, labels={"energy": p["energy"] + offset[int(a.numbers[0])]})
             for a, p in zip(atoms, predicted[:2], strict=True)]
    dimers = [dataclasses.replace(d, labels={"energy": p["energy"] + offset[3] + offset[14] + binding})
              for d, p in zip(dimers, predicted[2:], strict=True)]
    before = potential.heads["energy"].e0s.clone()
    shifts = refit_reference_energies(potential, dimers, isolated_atoms=atoms)
    assert shifts == pytest.approx({3: offset[3] + binding / 2, 14: offset[14] + binding / 2}, abs=1e-9)  # minimum norm
    after = potential.predict([*atoms, *dimers], properties=["energy"])
    assert [p["energy"] for p in after[2:]] == pytest.approx([d.labels["energy"] for d in dimers], abs=1e-9)
    assert [p["energy"] for p in after[:2]] == pytest.approx([a.labels["energy"] + binding / 2 for a in atoms], abs=1e-9)

    with torch.no_grad():
        potential.heads["energy"].e0s.copy_(before)
    alone = refit_reference_energies(potential, dimers)  # without the anchor: only the sum is fixed
    assert alone[3] + alone[14] == pytest.approx(offset[3] + offset[14] + binding, abs=1e-9)
    assert alone[3] == pytest.approx(alone[14], abs=1e-9)
    oxygen = dataclasses.replace(atoms[0], numbers=np.array([8]))
    with pytest.raises(ValueError, match=r"elements the potential lacks: \[8\]"):
        refit_reference_energies(potential, dimers, isolated_atoms=[oxygen])


def test_resumed_refit_fine_tune_matches_an_uninterrupted_one(tmp_path, monkeypatch):
    """``model.refit_e0s`` runs once per run: a resumed run takes the refitted E0s from its saved
    state (no second prediction pass) and ends bit-identical to an uninterrupted run."""
    assert runner.invoke(app, ["train", _config(tmp_path, "base", epochs=1)]).exit_code == 0
    base = ["--init", str(tmp_path / "out" / "base")]
    straight = _config(tmp_path, "straight", epochs=2, model_options="refit_e0s: true")
    assert runner.invoke(app, ["train", straight, *base]).exit_code == 0
    interrupted = _config(tmp_path, "interrupted", epochs=2, model_options="refit_e0s: true")
    first = runner.invoke(app, ["train", interrupted, *base, "--stop-after-epochs", "1"])
    assert first.exit_code == 0 and "model.refit_e0s: E0s shifted" in first.output
    from atomistic.training import transfer

    refits = []
    refit = transfer.refit_reference_energies
    monkeypatch.setattr(transfer, "refit_reference_energies", lambda *args: refits.append(1) or refit(*args))
    resumed = runner.invoke(app, ["train", interrupted, *base, "--resume"])
    assert resumed.exit_code == 0, resumed.output
    assert "resumed at epoch 1" in resumed.output and not refits
    _assert_same_training(tmp_path, "straight", "interrupted", epochs=2)


def test_init_with_widen_channels_trains_the_new_channels(tmp_path):
    from atomistic.checkpoint import load_potential

    result = _fine_tune_of_a_base_run(tmp_path, "widened", "widen_channels: 6")
    assert result.exit_code == 0, result.output
    assert "not used from the config" not in result.output  # widen_channels, not channels, sets the width
    base = load_potential(tmp_path / "out" / "base", dtype=torch.float64)
    widened = load_potential(tmp_path / "out" / "widened", dtype=torch.float64)
    assert widened.encoder.config.channels == 6 and base.encoder.config.channels == 4
    readout = widened.heads["energy"].linear_readout.weight.view(6)
    assert torch.all(readout[4:] != 0)  # the zero-initialised weights that read new channels trained
    result = _fine_tune_of_a_base_run(tmp_path, "narrower", "widen_channels: 2")
    assert result.exit_code == 2 and "model.widen_channels" in result.output and "cannot narrow" in result.output
    result = runner.invoke(app, ["train", _config(tmp_path, "fresh", epochs=1, model_options="widen_channels: 6")])
    assert result.exit_code == 2 and "model.widen_channels" in result.output and "--init" in result.output


def test_init_says_which_model_options_the_checkpoint_overrides(tmp_path):
    result = _fine_tune_of_a_base_run(tmp_path, "wider", "channels: 8, radial_hidden: [8, 8]")
    assert result.exit_code == 0, result.output
    assert "not used from the config: channels: 8 -> 4; radial_hidden: [8, 8] -> [8]" in result.output


def test_init_onto_new_elements_via_cli(tmp_path):
    li_only = _config(tmp_path, "li", epochs=1)
    text = (tmp_path / "li.yaml").read_text()
    text = "\n".join(line for line in text.splitlines() if "Si/training.json" not in line)
    (tmp_path / "li.yaml").write_text(text)
    assert runner.invoke(app, ["train", li_only]).exit_code == 0
    both = _config(tmp_path, "both", epochs=1)
    result = runner.invoke(app, ["train", both, "--init", str(tmp_path / "out" / "li")])
    assert result.exit_code == 0, result.output
    manifest = json.loads((tmp_path / "out" / "both" / "manifest.json").read_text())
    assert manifest["species"] == [3, 14] and manifest["provenance"]["init"].endswith("li")


def test_resume_after_kill_matches_uninterrupted_run(tmp_path):
    """SIGKILL at an arbitrary point after the first epoch's record, then ``--resume``."""
    import os
    import signal
    import subprocess
    import sys
    import time

    straight = _config(tmp_path, "straight", epochs=3)
    assert runner.invoke(app, ["train", straight]).exit_code == 0
    killed = _config(tmp_path, "killed", epochs=3)
    command = [sys.executable, "-m", "atomistic.cli", "train", killed]
    process = subprocess.Popen(command, env={**os.environ, "OMP_NUM_THREADS": str(torch.get_num_threads())}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    metrics = tmp_path / "runs" / "killed" / "metrics.jsonl"
    deadline = time.time() + 240
    while not (metrics.exists() and metrics.read_text().count("\n") >= 1):
        assert process.poll() is None, process.stderr.read().decode()
        assert time.time() < deadline, "no epoch finished in time"
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    process.wait()
    result = runner.invoke(app, ["train", killed, "--resume"])
    assert result.exit_code == 0, result.output
    _assert_same_training(tmp_path, "straight", "killed", epochs=3)
    records = [json.loads(line) for line in metrics.read_text().splitlines()]
    assert [r["epoch"] for r in records] == [1, 2, 3]


def test_max_minutes_stops_resumably_after_an_epoch(tmp_path):
    config = _config(tmp_path, "timed", epochs=3)
    result = runner.invoke(app, ["train", config, "--max-minutes", "0"])
    assert result.exit_code == 0, result.output
    assert "time budget reached" in result.output
    state = torch.load(tmp_path / "runs" / "timed" / "state.pt", weights_only=True)
    assert state["epoch"] == 1


def test_run_dir_option_lets_one_config_serve_several_runs(tmp_path):
    config = _config(tmp_path, "shared", epochs=1)
    for name in ("first", "second"):
        run_dir = tmp_path / "runs" / name
        result = runner.invoke(app, ["train", config, "--run-dir", str(run_dir)])
        assert result.exit_code == 0, result.output
        assert json.loads((run_dir / "config.json").read_text())["run_dir"] == str(run_dir)
        assert (run_dir / "state.pt").exists() and (run_dir / "best" / "weights.safetensors").exists()
    assert not (tmp_path / "runs" / "shared").exists() and not (tmp_path / "out" / "shared").exists()
    result = runner.invoke(app, ["train", config, "--run-dir", str(tmp_path / "runs" / "first")])
    assert result.exit_code == 2 and "--resume" in result.output  # the replaced run_dir is guarded too
    elsewhere = tmp_path / "elsewhere"
    result = runner.invoke(app, ["train", config, "--run-dir", str(tmp_path / "runs" / "third"), "--output", str(elsewhere)])
    assert result.exit_code == 0, result.output
    assert (elsewhere / "weights.safetensors").exists() and not (tmp_path / "runs" / "third" / "best").exists()


def test_training_hours_counts_each_epoch_once():
    # epoch 2 logged twice (an interrupted run's log): its later line counts, not both
    records = [{"epoch": 1, "seconds": 3600.0}, {"epoch": 2, "seconds": 1800.0}, {"epoch": 2, "seconds": 3600.0}]
    assert training_hours(records) == pytest.approx(2.0)
    assert training_hours([]) == 0.0


@pytest.mark.parametrize("path", sorted((ROOT / "scripts" / "configs").rglob("*.yaml")), ids=lambda p: p.stem)
def test_every_shipped_training_config_validates(path):
    config = load_config(path)
    assert all((ROOT / entry.path).exists() for entry in config.data.train), "a training file it names is missing"


def test_validation_metrics_by_source_match_an_independent_evaluation(tmp_path):
    from atomistic.data.datasets import read_labelled
    from atomistic.training.loop import Trainer, TrainingConfig
    from atomistic.training.metrics import evaluate, source_group

    from .conftest import small_mace

    potential = small_mace(max_ell=1, correlation=2, num_layers=1)
    by_element = {element: read_labelled(DATA / "mlearn" / element / "training.json")[:3] for element in ("Li", "Si")}
    valid = by_element["Li"] + by_element["Si"]
    trainer = Trainer(potential, valid[:2], valid, TrainingConfig(epochs=1), tmp_path / "run")
    metrics = trainer.evaluate(potential)
    assert {source_group(s) for s in valid} == set(metrics["by_source"]) == {"Li", "Si"}
    for element, structures in by_element.items():
        expected = evaluate(potential, structures).summary()
        measured = metrics["by_source"][element]
        assert measured["n_structures"] == 3
        for name in ("energy_mae_mev_per_atom", "energy_rmse_mev_per_atom", "force_mae_ev_per_ang", "force_rmse_ev_per_ang", "stress_mae_gpa"):
            assert measured[name] == pytest.approx(expected[name], rel=1e-8, abs=1e-12), (element, name)
    # one source: no breakdown
    assert "by_source" not in trainer.evaluate(potential, trainer.valid_graphs[:3], ["Li"] * 3)


def test_ema_and_optimizer_steps_match_their_per_tensor_formulas(tmp_path):
    """The multi-tensor (foreach) AdamW step and EMA update give the per-tensor results."""
    from atomistic.data.datasets import read_labelled
    from atomistic.training.loop import Trainer, TrainingConfig

    from .conftest import small_mace

    potential = small_mace(max_ell=1, correlation=2, num_layers=1).double()
    initial = [p.detach().clone() for p in potential.parameters()]
    structures = read_labelled(DATA / "mlearn" / "Li" / "training.json")[:4]
    trainer = Trainer(potential, structures, structures[:1], TrainingConfig(epochs=1, batch_size=4), tmp_path / "run")
    trainer.train_epoch()  # one step: the batch is the whole training set

    per_tensor = [p0.clone().requires_grad_() for p0 in initial]
    for p_ref, p in zip(per_tensor, potential.parameters(), strict=True):
        p_ref.grad = p.grad.detach().clone()
    c = trainer.config
    lr = trainer.optimizer.param_groups[0]["lr"]
    torch.optim.AdamW(per_tensor, lr=lr, weight_decay=c.weight_decay, amsgrad=c.amsgrad, foreach=False).step()
    decay = min(c.ema_decay, 1 / 10)  # the first step's
    for p_ref, p, p0, p_ema in zip(per_tensor, potential.parameters(), initial, trainer.ema.parameters(), strict=True):
        torch.testing.assert_close(p.detach(), p_ref.detach(), rtol=1e-12, atol=1e-14)
        torch.testing.assert_close(p_ema, decay * p0 + (1 - decay) * p.detach(), rtol=1e-12, atol=1e-14)


def test_restrict_species_keeps_predictions_and_refuses_the_dropped_elements(tmp_path):
    """A universal model cut down to the elements it was fine-tuned on predicts exactly as
    before on them and names a dropped element in its error."""
    from ase.build import bulk, molecule

    from atomistic.checkpoint import load_potential
    from atomistic.data.convert import StructureError
    from atomistic.training.transfer import restrict_species

    universal = load_potential("sevennet-0", dtype=torch.float64)
    restricted = restrict_species(universal, [3, 14, 32, 42])
    assert sorted(restricted.atomic_numbers) == [3, 14, 32, 42]
    crystal = bulk("Si", "diamond", 5.43, cubic=True)
    crystal.rattle(0.05, seed=0)
    crystal.symbols[[0, 3]] = "Ge"
    properties = ["energy", "forces", "stress"]
    before, after = universal.predict([crystal], properties=properties)[0], restricted.predict([crystal], properties=properties)[0]
    assert after["energy"] == pytest.approx(before["energy"], abs=1e-10)
    np.testing.assert_allclose(after["forces"], before["forces"], atol=1e-10)
    np.testing.assert_allclose(after["stress"], before["stress"], atol=1e-12)
    with pytest.raises(StructureError, match=r"element\(s\) H, O not supported by this model \(supports Li, Si, Ge, Mo\)"):
        restricted.predict([molecule("H2O")])
    assert restrict_species(universal, universal.atomic_numbers) is universal
    with pytest.raises(ValueError, match=r"no element\(s\) \[118\]"):
        restrict_species(universal, [14, 118])
    assert runner.invoke(app, ["train", _config(tmp_path, "mace", epochs=1)]).exit_code == 0
    with pytest.raises(ValueError, match="NequIP-class"):
        restrict_species(load_potential(tmp_path / "out" / "mace"), [3])
