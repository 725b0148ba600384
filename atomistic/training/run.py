"""``atomistic train CONFIG``: data → statistics → model → resumable training → checkpoint."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from ase.data import chemical_symbols

from atomistic.data.convert import LabelKeys, Structure, missing_labels_message
from atomistic.data.datasets import read_labelled, stratified_split
from atomistic.training.config import ConfigError, TrainConfig
from atomistic.training.loop import Trainer, TrainingConfig
from atomistic.training.losses import LossWeights
from atomistic.training.statistics import (
    average_num_neighbors,
    energy_fit_structures,
    force_rms,
    force_rms_per_species,
    least_squares_e0s,
    mean_interaction_energy,
    tensor_scale,
)


def _read_files(
    files,
    seed: int,
    valid_fraction: float | None,
    stratify_by: tuple[str, ...] = (),
    info_factor=None,
    label_keys: LabelKeys | None = None,
    section: str = "train",
) -> tuple[list[Structure], list[Structure]]:
    """Read files (their labels under ``label_keys``) with their loss weights (per term; each
    multiplied by ``info_factor(info)`` of the structure when given), each cut to its
    ``max_structures`` (a seeded subset in file order); split each one (seeded, the same generator
    state for every file; stratified by the info keys ``stratify_by`` when given) when a fraction
    is given: the file's own ``valid_fraction`` when it has one, else ``valid_fraction``. A file
    with no labelled structure is a :class:`ConfigError` (``data.<section>[k]``)."""
    train, valid = [], []
    for k, entry in enumerate(files):
        weights = {"loss_weight": entry.weight, **{f"loss_weight_{term}": w for term, w in entry.term_weights().items()}}
        read = read_labelled(entry.path, label_keys)
        if missing := missing_labels_message(entry.path, read, label_keys):
            raise ConfigError(f"data.{section}[{k}]: {missing} (set data.label_keys, e.g. {{energy: REF_energy, forces: REF_forces}})")
        structures = []
        for s in read:
            factor = 1.0 if info_factor is None else info_factor(s.info)
            structures.append(dataclasses.replace(s, info={**s.info, **{k: w * factor for k, w in weights.items()}}))
        if entry.max_structures is not None and entry.max_structures < len(structures):
            keep = np.sort(np.random.default_rng(seed).choice(len(structures), entry.max_structures, replace=False))
            structures = [structures[i] for i in keep]
        file_fraction = None if valid_fraction is None else entry.split_fraction(valid_fraction)
        if file_fraction:
            absent = [key for key in stratify_by if not any(key in s.info for s in structures)]
            if absent:
                raise ConfigError(f"data.stratify_by: no structure of '{entry.path}' carries the info key(s) {absent}")
            file_train, file_valid = stratified_split(structures, file_fraction, seed, stratify_by)
            train += file_train
            valid += file_valid
        else:
            train += structures
    return train, valid


def isolated_atom_energies(path: str, label_keys: LabelKeys | None = None) -> dict[int, float]:
    """E0 per element from a file of single-atom structures with energies (eV)."""
    energies = {}
    for s in read_labelled(path, label_keys):
        if len(s) == 1 and "energy" in s.labels:
            energies[int(s.numbers[0])] = float(s.labels["energy"])
    if not energies:
        raise ConfigError(f"data.isolated_atoms: '{path}' holds no single-atom structures with energies")
    return energies


def species_cutoffs(config: TrainConfig, species: tuple[int, ...]) -> tuple[float, ...] | None:
    """``model.species_cutoffs`` in species-index order (unlisted elements: ``model.cutoff``),
    or ``None`` when the config sets none."""
    by_number = config.model.species_cutoffs_by_number()
    if not by_number:
        return None
    return tuple(by_number.get(z, config.model.cutoff) for z in species)


# the model fields that a checkpoint given to --init fixes (its architecture is kept)
INIT_FIXED_MODEL_FIELDS = (
    "cutoff", "channels", "max_ell", "hidden_lmax", "num_layers", "correlation", "num_bessel",
    "envelope_exponent", "radial_hidden", "species_radial",
)


def model_options_overridden_by_init(config: TrainConfig, potential) -> list[str]:
    """With ``--init``: the config's ``model`` fields that differ from the fine-tuned model's
    architecture (which wins), as ``"field: config value -> model value"``."""
    architecture = potential.metadata.architecture
    encoder = architecture["encoder"]
    if encoder["name"] != config.model.encoder:
        return [f"encoder: {config.model.encoder} -> {encoder['name']}"]
    differences = []
    for field in INIT_FIXED_MODEL_FIELDS:
        if field == "channels" and config.model.widen_channels is not None:
            continue  # widen_channels sets the width
        ours, theirs = getattr(config.model, field), encoder["config"].get(field)
        ours = list(ours) if isinstance(ours, tuple) else ours  # as the architecture stores it
        if theirs is not None and ours != theirs:
            differences.append(f"{field}: {ours} -> {theirs}")
    energy = architecture["heads"].get("energy")
    if energy is not None and energy.get("mlp_hidden", config.model.energy_mlp_hidden) != config.model.energy_mlp_hidden:
        differences.append(f"energy_mlp_hidden: {config.model.energy_mlp_hidden} -> {energy['mlp_hidden']}")
    return differences


def held_out_key(config: TrainConfig) -> tuple:
    """What decides which structures a run holds out: its validation files (each with its subset
    size), or else each training file split with a share (path, share, subset size) and the
    stratification; and the seed. Each file is split by its own seeded draw, so a training file
    added with no validation share leaves the held-out set as it was: runs with equal keys are
    scored on the same structures."""
    data = config.data
    if data.valid:
        held_out = ("files", tuple((f.path, f.max_structures) for f in data.valid))
    else:
        split = tuple((f.path, data.fraction_of(f), f.max_structures) for f in data.train if data.fraction_of(f))
        held_out = ("split", split, tuple(data.stratify_by))
    return (*held_out, config.seed)


def validation_split_key(config: TrainConfig) -> tuple:
    """:func:`held_out_key` with every training file, ``valid_fraction`` and ``stratify_by``
    besides: runs with equal keys hold out the same structures from the same files, so one's
    validation set is never in another's training set and their errors on it may be compared or
    combined."""
    data = config.data
    return (held_out_key(config), [f.path for f in data.train], data.valid_fraction, list(data.stratify_by))


def validation_split_mismatches(configs: Mapping[str, TrainConfig]) -> list[str]:
    """The names of the runs in ``configs`` (name → config) whose validation split differs from
    the first run's (:func:`validation_split_key`)."""
    keys = {name: validation_split_key(config) for name, config in configs.items()}
    first = next(iter(keys.values()), None)
    return [name for name, key in keys.items() if key != first]


def prepare(config: TrainConfig) -> tuple[list[Structure], list[Structure], dict[str, Any]]:
    data = config.data
    train, valid = _read_files(
        data.train, config.seed, None if data.valid else data.valid_fraction, data.stratify_by, data.info_factor,
        label_keys=data.labels,
    )
    if data.valid:
        valid, _ = _read_files(data.valid, config.seed, None, label_keys=data.labels, section="valid")
    for key, by_text in data.info_weights_by_text.items():  # a typo would otherwise weigh nothing
        present = sorted({str(s.info[key]) for s in train if key in s.info})
        absent = [value for value in by_text if value not in present]
        if absent:
            raise ConfigError(
                f"data.info_weights.{key}: no training structure has {key} = {absent[0]!r}"
                + (f"; the values present: {present[:20]}" if present else f"; none carries the info key '{key}'")
            )
    # every element of the data, validation included: an element seen only there keeps its
    # initial embedding (its error is then an honest measure of transfer)
    species = tuple(sorted({int(z) for s in [*train, *valid] for z in s.numbers}))
    for key in config.model.tensor_heads:
        if not any(key in s.labels for s in train):
            raise ConfigError(f"model.tensor_heads.{key}: no training structure carries a '{key}' label")
    stats: dict[str, Any] = {
        "species": species,
        "avg_num_neighbors": average_num_neighbors(train, config.model.cutoff, config.model.species_cutoffs_by_number()),
        "tensor_scales": {key: tensor_scale(train, key) for key in config.model.tensor_heads},
    }
    if config.model.energy_head:
        labelled = energy_fit_structures(train)  # the energies the E0s and the shift may read
        if data.isolated_atoms:
            table = isolated_atom_energies(data.isolated_atoms, data.labels)
            missing = [z for z in species if z not in table]
            if missing:
                raise ConfigError(f"data.isolated_atoms: no energy for atomic numbers {missing}")
            stats["e0s"] = np.array([table[z] for z in species])
            stats["e0_method"] = f"isolated atoms ({data.isolated_atoms})"
        else:
            if not labelled:
                raise ConfigError(
                    "data.isolated_atoms: no training structure has an energy with a non-zero energy weight, "
                    "so the E0s cannot be fitted by least squares; give isolated-atom energies"
                )
            stats["e0s"] = least_squares_e0s(labelled, species)
            stats["e0_method"] = "least squares on training energies"
        stats["shift"] = mean_interaction_energy(labelled, species, stats["e0s"])
        stats["scale"] = force_rms_per_species(train, species) if config.model.per_species_scale else force_rms(train)
    return train, valid, stats


def add_tensor_heads(potential, config: TrainConfig, stats: dict[str, Any]) -> None:
    """Fine-tuning (``--init``): put the config's tensor heads that the checkpoint lacks on its
    encoder (fresh weights, data scale from ``stats``), and drop its energy head when
    ``model.energy_head`` is false."""
    from atomistic.models.builders import HEADS, default_dtype

    architecture = potential.metadata.architecture
    for key, options in config.model.tensor_heads.items():
        if key in potential.heads:
            continue
        options = {**options, "scale": round(float(stats["tensor_scales"][key]), 6)}
        with default_dtype(potential.dtype):
            potential.heads[key] = HEADS[key](potential.encoder, **options).to(potential.device)
        architecture.setdefault("heads", {"energy": {}})[key] = options
    if not config.model.energy_head and "energy" in potential.heads:
        del potential.heads["energy"]
        architecture["heads"].pop("energy", None)


def build_model(
    config: TrainConfig, stats: dict[str, Any], init: str | None, train: list[Structure] | None = None, resuming: bool = False
):
    """The model to train: ``config.model`` built fresh with the data statistics ``stats``, or,
    with ``init``, that checkpoint changed as the config's transfer options say (``train``, the
    training structures, is needed only by ``model.refit_e0s``; ``resuming``: a saved state
    will overwrite the weights, so the refit's prediction pass is skipped)."""
    from atomistic.checkpoint import load_potential
    from atomistic.models.builders import build_potential, mace_architecture
    from atomistic.models.encoders.mace import MACEConfig
    from atomistic.models.potential import Potential

    dtype = torch.float32 if config.dtype == "float32" else torch.float64
    name = Path(config.output).name
    if init is not None:
        from atomistic.training.transfer import change_species_cutoffs, extend_species

        potential = load_potential(init, dtype=dtype, device=config.resolved_device(), backend=config.backend)
        if not isinstance(potential, Potential):
            raise ConfigError(f"--init {init}: a committee is not fine-tuned as one model; pass one of its members")
        new = sorted(set(stats["species"]) - set(potential.atomic_numbers))
        if new:  # new elements start fresh, with E0s from this data
            # E0s of the new elements from this data; zeros when the energy head is dropped anyway
            e0s = stats["e0s"] if "e0s" in stats else np.zeros(len(stats["species"]))
            e0_by_number = dict(zip(stats["species"], e0s, strict=True))
            potential = extend_species(potential, new, {z: e0_by_number[z] for z in new})
        if config.model.species_cutoffs:  # listed elements take their new cutoff; the others keep theirs
            try:
                potential = change_species_cutoffs(potential, config.model.species_cutoffs_by_number())
            except ValueError as error:
                raise ConfigError(f"model.species_cutoffs (with --init {init}): {error}") from None
        if config.model.widen_channels is not None:  # more channels, the same function to start from
            from atomistic.training.transfer import widen_channels

            try:
                potential = widen_channels(potential, config.model.widen_channels)
            except ValueError as error:
                raise ConfigError(f"model.widen_channels (with --init {init}): {error}") from None
        add_tensor_heads(potential, config, stats)
        if config.model.refit_e0s and not resuming:  # this data's energy zero (another DFT setup's model)
            from atomistic.training.transfer import refit_reference_energies

            try:
                isolated = read_labelled(config.data.isolated_atoms, config.data.labels) if config.data.isolated_atoms else ()
                stats["e0_shift"] = refit_reference_energies(potential, energy_fit_structures(train or []), isolated)
            except ValueError as error:
                raise ConfigError(f"model.refit_e0s (with --init {init}): {error}") from None
        if config.model.refit_e0s:
            anchor = f" after matching the isolated atoms of {config.data.isolated_atoms}" if config.data.isolated_atoms else ""
            stats["e0_method"] = f"the checkpoint's, shifted by a least-squares fit of the training energies' residuals{anchor}"
        elif config.model.energy_head:  # the checkpoint's E0s (new elements' from this data), not this data's
            stats["e0_method"] = f"the checkpoint's (--init {init})" + (f"; new elements: {stats['e0_method']}" if new else "")
        for p in potential.parameters():
            p.requires_grad_(True)
        potential.train()
        potential.metadata.name = name
        return potential
    m = config.model
    if m.encoder != "mace":
        raise ConfigError(f"model.encoder: a new model is MACE-class; '{m.encoder}' is for --init of such a checkpoint")
    if m.refit_e0s:
        raise ConfigError("model.refit_e0s: re-fits the E0s of the checkpoint given to --init; a new model fits its own")
    if m.widen_channels is not None:
        raise ConfigError("model.widen_channels: widens the checkpoint given to --init; a new model takes model.channels")
    head_fields = (
        "encoder", "energy_mlp_hidden", "energy_head", "per_species_scale", "tensor_heads", "widen_channels", "refit_e0s",
    )
    encoder_options = {k: v for k, v in dataclasses.asdict(m).items() if k not in head_fields}
    encoder_options["species_cutoffs"] = species_cutoffs(config, stats["species"])
    encoder_config = MACEConfig(
        species=stats["species"], avg_num_neighbors=round(float(stats["avg_num_neighbors"]), 4), **encoder_options
    )
    architecture = mace_architecture(encoder_config, m.energy_mlp_hidden)
    if not m.energy_head:
        del architecture["heads"]["energy"]
    for key, options in m.tensor_heads.items():  # the data's scale is part of the architecture
        architecture["heads"][key] = {**options, "scale": round(float(stats["tensor_scales"][key]), 6)}
    torch.manual_seed(config.seed)
    potential = build_potential(architecture, name=name, dtype=dtype, device=config.resolved_device(), backend=config.backend)
    if m.energy_head:
        head = potential.heads["energy"]
        head.e0s.copy_(torch.as_tensor(stats["e0s"], dtype=head.e0s.dtype))
        head.scale.copy_(torch.as_tensor(stats["scale"], dtype=head.scale.dtype).expand_as(head.scale))
        head.shift.fill_(float(stats["shift"]))
    return potential


def backend_of_saved_run(config: TrainConfig, run_dir: Path) -> TrainConfig:
    """``config`` with the kernel backend that ``run_dir``'s saved epochs ran on.

    A resumed run continues on that backend: the backends sum in different orders (so only
    the same one continues the run bit for bit) and some hold their weights under other names
    (so the saved optimizer state would not fit). ``auto`` takes the saved backend; another
    explicit one, or a saved backend that cannot run here, is a ``ConfigError`` (fine-tune the
    best checkpoint with ``--init`` to carry the model to another backend)."""
    from atomistic.kernels import resolve_backend

    recorded = torch.load(run_dir / "state.pt", weights_only=True, map_location="cpu").get("backend")
    if recorded is None or recorded == config.backend:
        return config
    if config.backend != "auto":
        raise ConfigError(
            f"backend: the saved epochs of '{run_dir}' ran on '{recorded}'; resume with backend: {recorded} "
            f"(or auto), or start a new run with --init from its best checkpoint"
        )
    try:
        resolve_backend(recorded, config.resolved_device())
    except ValueError as error:
        raise ConfigError(
            f"backend: the saved epochs of '{run_dir}' ran on '{recorded}', which cannot run here ({error}); "
            f"start a new run with --init from its best checkpoint instead"
        ) from None
    return dataclasses.replace(config, backend=recorded)


def train(
    config: TrainConfig,
    *,
    resume: bool = False,
    init: str | None = None,
    stop_after_epochs: int | None = None,
    max_hours: float | None = None,
    log=print,
    on_step=None,
) -> dict[str, Any]:
    """Run (or resume) training; returns the last validation metrics. ``log`` takes a line
    per event (epoch summaries); ``on_step(epoch, step, steps, loss)`` is called after every
    optimisation step."""
    from atomistic.checkpoint import load_potential, save_checkpoint
    from atomistic.training.plots import parity_plots

    run_dir = Path(config.run_dir)
    if (run_dir / "state.pt").exists() and not resume:
        raise ConfigError(f"run_dir '{run_dir}' already holds a run; pass --resume to continue it or choose another run_dir")
    if resume and not (run_dir / "state.pt").exists() and not (run_dir / "config.json").exists():
        raise ConfigError(f"--resume: no run in '{run_dir}' to resume")
    resuming = resume and (run_dir / "state.pt").exists()  # from saved epochs, not from the start
    if resuming:
        config = backend_of_saved_run(config, run_dir)
    torch.manual_seed(config.seed)
    train_set, valid_set, stats = prepare(config)
    potential = build_model(config, stats, init, train_set, resuming=resuming)
    loop_config = TrainingConfig(
        epochs=config.epochs,
        batch_size=config.batch_size,
        learning_rate=config.optimizer.learning_rate,
        weight_decay=config.optimizer.weight_decay,
        warmup_epochs=config.schedule.warmup_epochs,
        min_lr_ratio=config.schedule.min_lr_ratio,
        ema_decay=config.optimizer.ema_decay,
        grad_clip=config.optimizer.grad_clip,
        amsgrad=config.optimizer.amsgrad,
        seed=config.seed,
        loss=LossWeights(**dataclasses.asdict(config.loss)),
        stage_two_start=config.stage_two.start_epoch,
        stage_two_loss=LossWeights(**dataclasses.asdict(config.stage_two.weights(config.loss))),
        schedule=config.schedule.kind,
        plateau_factor=config.schedule.plateau_factor,
        plateau_patience=config.schedule.plateau_patience,
        early_stopping_patience=config.early_stopping_patience,
        max_hours=max_hours,
    )
    trainer = Trainer(potential, train_set, valid_set, loop_config, run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.json").write_text(json.dumps(config.to_dict(), indent=2) + "\n")
    if resume:
        if trainer.load_state():
            log(f"resumed at epoch {trainer.epoch}")
        else:  # killed before its first epoch was saved
            log("no epoch of this run was saved yet; starting it from the beginning")
    trainer.drop_unsaved_records()
    if init is not None and (overridden := model_options_overridden_by_init(config, potential)):
        log(f"--init {init}: the model keeps its architecture; not used from the config: {'; '.join(overridden)}")
    # the model's own count: a fine-tuned model keeps the one it was trained with
    avg_num_neighbors = potential.metadata.architecture["encoder"]["config"].get("avg_num_neighbors", stats["avg_num_neighbors"])
    log(
        f"{len(train_set)} training / {len(valid_set)} validation structures; species {list(stats['species'])}; "
        f"avg neighbours {avg_num_neighbors:.2f}; parameters {sum(p.numel() for p in potential.parameters())}; "
        f"kernel backend {potential.metadata.backend}"
    )
    if "e0_shift" in stats and not resume:
        shifts = ", ".join(f"{chemical_symbols[z]} {1000 * delta:+.1f}" for z, delta in stats["e0_shift"].items())
        log(f"model.refit_e0s: E0s shifted by (meV) {shifts}")
    started = time.time()

    def on_best(model, metrics):
        provenance = {
            "training_data": [dataclasses.asdict(f) for f in config.data.train],
            "validation": "seeded split" if not config.data.valid else [dataclasses.asdict(f) for f in config.data.valid],
            "n_train": len(train_set),
            "n_valid": len(valid_set),
            "e0s_method": stats.get("e0_method"),
            "config": config.to_dict(),
            "init": init,
            "epoch": trainer.epoch,
            "trained": time.strftime("%Y-%m-%d"),
        }
        save_checkpoint(model, config.output, provenance=provenance, metrics={"validation": metrics})

    last = trainer.fit(on_best=on_best, log=log, stop_after_epochs=stop_after_epochs, on_step=on_step)
    if trainer.epoch >= config.epochs or trainer.epochs_since_best >= config.early_stopping_patience:
        best = load_potential(config.output, dtype=config.dtype, device=config.resolved_device())
        for path in parity_plots(best, valid_set, run_dir):
            log(f"wrote {path}")
    log(f"{time.time() - started:.0f} s this run; best model in {config.output}")
    return last
