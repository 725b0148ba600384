"""Typed, validated training configuration (YAML or TOML). Every option and its default:

```yaml
seed: 0                      # split, shuffling and initialisation
dtype: float32               # float32 | float64
device: auto                 # auto (cuda when available, else cpu) | cpu | cuda | cuda:N
backend: auto                # kernel backend: auto (the fused C++ kernel on CPU when it compiles,
                             # with a fused double backward for the force loss; else reference)
                             # | reference | cpu | cueq | triton | e3nn; --resume continues
                             # on the backend the saved epochs ran on
run_dir: runs/my-model       # state.pt (resume), metrics.jsonl, parity plots; `atomistic
                             # train --run-dir DIR` replaces it, and output with DIR/best
output: checkpoints/my-model # best model (EMA weights), written as training goes (--output)
epochs: 100
batch_size: 4                # structures per optimisation step
data:
  train:                     # extxyz or mlearn JSON files, each with a loss weight; the
                             # optional energy_weight / forces_weight / stress_weight replace
                             # `weight` on that loss term for the file (null: `weight`);
                             # valid_fraction replaces data.valid_fraction for the file (0: all
                             # of it trains, e.g. an auxiliary file kept out of model selection);
                             # max_structures keeps a seeded random subset of the file (file
                             # order kept; null: all of it)
    - {path: data/mlearn/Si/training.json, weight: 1.0}
  valid: []                  # separate validation files; if empty, a split of train
  valid_fraction: 0.1        # seeded split of each training file
  stratify_by: []            # structure info keys (e.g. [group, temperature_k] for mlearn
                             # files, [config_type] for extxyz): each file's split takes
                             # valid_fraction of every group of structures sharing their
                             # values; empty: one seeded permutation of the file
  info_weights: {}           # loss-weight multipliers by structure info, e.g.
                             #   {group: {Surface: 4.0}} (as MACE's config_type_weights): a
                             # training structure whose info[key] equals a listed value has every
                             # loss weight of its file multiplied by the factor (the factors of
                             # several keys multiply); validation metrics stay unweighted
  isolated_atoms: null       # extxyz of single atoms: E0s from it (else least squares)
  label_keys: {}             # where the extxyz files (isolated_atoms included) keep their labels,
                             # e.g. {energy: REF_energy, forces: REF_forces, stress: REF_stress}
                             # (MACE's convention); an unlisted label keeps ASE's name (energy in
                             # info, forces in arrays, stress in info); mlearn JSON ignores it
model:                       # with --init, the checkpoint's architecture (the run's log names the
                             # fields below that differ from it); only species_cutoffs,
                             # widen_channels, refit_e0s, energy_head and tensor_heads act on it
  encoder: mace              # the encoder; its fields below (see MACEConfig); nequip only with
                             # --init of a NequIP-class checkpoint (an imported SevenNet model)
  cutoff: 5.0
  channels: 16
  max_ell: 2
  hidden_lmax: 1
  num_layers: 2
  correlation: 3
  num_bessel: 8
  envelope_exponent: 6
  radial_hidden: [32, 32]
  species_radial: false      # element-dependent radial functions (radial MLP reads the species)
  species_cutoffs: {}        # a cutoff (Å, at most `cutoff`) per element, e.g. {Li: 6.0, Mo: 5.0};
                             # an a-b edge reaches (r_a + r_b) / 2; unlisted elements: `cutoff`;
                             # with --init, the listed elements of the checkpoint take the new
                             # cutoff and the others keep theirs (weights carried over)
  widen_channels: null       # with --init: widen the checkpoint's encoder to this many channels,
                             # keeping its function (weights that read the new channels start
                             # at zero, the rest fresh); null: keep its width
  refit_e0s: false           # with --init: add to the checkpoint's per-element reference energies
                             # (E0s) the least-squares fit of this data's training energies minus
                             # its predictions, so that a model trained on another DFT setup (a
                             # pretrained universal model) starts at this data's energy zero;
                             # with data.isolated_atoms, each element is first shifted so that
                             # the model's isolated atom has that file's energy (one composition,
                             # one molecule, cannot separate the elements); false: keep them
  energy_mlp_hidden: 16
  energy_head: true          # energy head (forces, stress by autograd); false for tensor-only models
  per_species_scale: false   # energy readout scale per element (its own force RMS) instead of
                             # one for all (the pooled force RMS)
  tensor_heads: {}           # crystal-tensor heads by output, e.g.
                             #   elastic_tensor: {basis: cartesian, channels: 8, hidden: 32}
                             # outputs: dielectric_tensor | piezoelectric_tensor | elastic_tensor;
                             # basis: cartesian (CEITNet) | spherical (e3nn irreps baseline, lmax: 4);
                             # pairs: many-body products of the Cartesian dielectric and elastic heads (1)
loss:
  energy: 10.0               # weight of the energy-per-atom term (eV/atom)
  forces: 1.0                # weight of the force term (eV/Å)
  stress: 0.05               # weight of the stress term (units of 0.01 eV/Å³)
  tensors: 1.0               # weight of each crystal-tensor term (in units of the head's data scale)
  kind: mse                  # mse | huber
  huber_delta: 0.01
  weight_normalisation: batch  # how per-file weights act: batch (a weighted mean within each
                             # batch; a batch from one file counts in full whatever its weight)
                             # | dataset (divide by the batch's item count times the training
                             # set's mean weight: weights rebalance files or elements)
stage_two:                   # a final stage with other loss weights (as MACE's second stage,
                             # usually a heavier energy weight as the rate anneals)
  start_epoch: null          # the stage starts after this many epochs (null: no second stage);
  energy: null               # weights left null keep their loss value; the learning-rate
                             # schedule runs on unchanged
  forces: null
  stress: null
  tensors: null
optimizer:
  learning_rate: 0.01
  weight_decay: 5.0e-7
  ema_decay: 0.99
  grad_clip: 10.0
  amsgrad: false             # AdamW's AMSGrad variant (MACE trains with it): the step size never
                             # grows when gradient moments shrink, which damps loss spikes
schedule:
  kind: cosine               # cosine (with warm-up) | plateau
  warmup_epochs: 2
  min_lr_ratio: 0.02         # cosine floor, as a fraction of learning_rate
  plateau_factor: 0.5        # plateau: multiply the rate by this ...
  plateau_patience: 5        # ... after this many epochs without improvement
early_stopping_patience: 30  # stop after this many epochs without a better validation score
```
"""

from __future__ import annotations

import dataclasses
import functools
import json
import tomllib
from pathlib import Path
from typing import Any

import torch
import yaml

from atomistic.data.convert import LabelKeys
from atomistic.kernels import available_backends
from atomistic.keys import TENSOR_KEYS
from atomistic.training.losses import TERM_WEIGHT_NAMES, WEIGHT_NORMALISATIONS

TENSOR_HEAD_OPTIONS = {"basis", "channels", "hidden", "lmax", "pairs"}


class ConfigError(ValueError):
    """A training configuration that is malformed; the message names the field."""


@dataclasses.dataclass(frozen=True)
class DataFile:
    path: str
    weight: float = 1.0
    energy_weight: float | None = None  # the file's weight on the energy term (null: weight)
    forces_weight: float | None = None
    stress_weight: float | None = None
    valid_fraction: float | None = None  # this file's validation fraction (null: data.valid_fraction)
    max_structures: int | None = None  # a seeded random subset of this many structures (null: all)

    def split_fraction(self, default: float) -> float:
        """The fraction of this file split off for validation: its own ``valid_fraction``, else ``default``."""
        return default if self.valid_fraction is None else self.valid_fraction

    def term_weights(self) -> dict[str, float]:
        """The file's loss weight per term, ``{"energy", "forces", "stress"}``: the term's own
        weight where one is set, else ``weight``."""
        return {
            term: self.weight if getattr(self, f"{term}_weight") is None else getattr(self, f"{term}_weight")
            for term in TERM_WEIGHT_NAMES
        }


@dataclasses.dataclass(frozen=True)
class DataConfig:
    train: tuple[DataFile, ...]
    valid: tuple[DataFile, ...] = ()
    valid_fraction: float = 0.1
    stratify_by: tuple[str, ...] = ()
    info_weights: dict = dataclasses.field(default_factory=dict)  # {info key: {value: factor}}
    isolated_atoms: str | None = None
    label_keys: dict = dataclasses.field(default_factory=dict)  # {energy|forces|stress: key in the file}

    @property
    def labels(self) -> LabelKeys:
        """``label_keys`` as the reader takes them (unlisted labels under ASE's names)."""
        return LabelKeys(**self.label_keys)

    @functools.cached_property
    def info_weights_by_text(self) -> dict[str, dict[str, float]]:
        """``info_weights`` with each value as text, the form values are matched in (YAML reads an
        unquoted 300 as an int, a structure's info may hold 300 or "300")."""
        return {key: {str(v): float(w) for v, w in by_value.items()} for key, by_value in self.info_weights.items()}

    def info_factor(self, info: dict[str, Any]) -> float:
        """The loss-weight multiplier of a structure with metadata ``info``: the product of the
        ``info_weights`` factors whose key it carries with a listed value (compared as text, see
        ``info_weights_by_text``); 1 when none applies."""
        factor = 1.0
        for key, by_text in self.info_weights_by_text.items():
            if key in info:
                factor *= by_text.get(str(info[key]), 1.0)
        return factor

    def fraction_of(self, entry: DataFile) -> float:
        """The validation fraction split off the training file ``entry``: its own, else ``valid_fraction``."""
        return entry.split_fraction(self.valid_fraction)


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    encoder: str = "mace"
    cutoff: float = 5.0
    channels: int = 16
    max_ell: int = 2
    hidden_lmax: int = 1
    num_layers: int = 2
    correlation: int = 3
    num_bessel: int = 8
    envelope_exponent: int = 6
    radial_hidden: tuple[int, ...] = (32, 32)
    species_radial: bool = False
    species_cutoffs: dict[str, float] = dataclasses.field(default_factory=dict)
    widen_channels: int | None = None
    refit_e0s: bool = False
    energy_mlp_hidden: int = 16
    energy_head: bool = True
    per_species_scale: bool = False
    tensor_heads: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)

    def species_cutoffs_by_number(self) -> dict[int, float]:
        """``species_cutoffs`` keyed by atomic number (keys may be symbols or numbers).
        Raises ``ConfigError`` naming an entry that is no element or no cutoff in
        ``(0, cutoff]``."""
        from ase.data import atomic_numbers

        if not isinstance(self.species_cutoffs, dict):
            raise ConfigError("model.species_cutoffs: expected a mapping of element to cutoff (Å)")
        by_number = {}
        for element, radius in self.species_cutoffs.items():
            number = element if isinstance(element, int) and not isinstance(element, bool) else atomic_numbers.get(str(element))
            if number is None or not 0 < number < len(atomic_numbers):
                raise ConfigError(f"model.species_cutoffs.{element}: not an element symbol or atomic number")
            if isinstance(radius, bool) or not isinstance(radius, int | float) or not 0 < radius <= self.cutoff:
                raise ConfigError(f"model.species_cutoffs.{element}: must be a cutoff in (0, model.cutoff = {self.cutoff}] Å, got {radius!r}")
            by_number[int(number)] = float(radius)
        return by_number


@dataclasses.dataclass(frozen=True)
class LossConfig:
    energy: float = 10.0
    forces: float = 1.0
    stress: float = 0.05
    tensors: float = 1.0
    kind: str = "mse"
    huber_delta: float = 0.01
    weight_normalisation: str = "batch"


@dataclasses.dataclass(frozen=True)
class StageTwoConfig:
    start_epoch: int | None = None
    energy: float | None = None
    forces: float | None = None
    stress: float | None = None
    tensors: float | None = None

    def overrides(self) -> dict[str, float]:
        """The loss weights this stage sets (those not left null)."""
        return {k: getattr(self, k) for k in ("energy", "forces", "stress", "tensors") if getattr(self, k) is not None}

    def weights(self, loss: LossConfig) -> LossConfig:
        """The stage's loss: ``loss`` with the weights this stage sets."""
        return dataclasses.replace(loss, **self.overrides())


@dataclasses.dataclass(frozen=True)
class OptimizerConfig:
    learning_rate: float = 0.01
    weight_decay: float = 5e-7
    ema_decay: float = 0.99
    grad_clip: float = 10.0
    amsgrad: bool = False


@dataclasses.dataclass(frozen=True)
class ScheduleConfig:
    kind: str = "cosine"
    warmup_epochs: int = 2
    min_lr_ratio: float = 0.02
    plateau_factor: float = 0.5
    plateau_patience: int = 5


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    data: DataConfig
    seed: int = 0
    dtype: str = "float32"
    device: str = "auto"
    backend: str = "auto"
    run_dir: str = "runs/model"
    output: str = "checkpoints/model"
    epochs: int = 100
    batch_size: int = 4
    model: ModelConfig = dataclasses.field(default_factory=ModelConfig)
    loss: LossConfig = dataclasses.field(default_factory=LossConfig)
    stage_two: StageTwoConfig = dataclasses.field(default_factory=StageTwoConfig)
    optimizer: OptimizerConfig = dataclasses.field(default_factory=OptimizerConfig)
    schedule: ScheduleConfig = dataclasses.field(default_factory=ScheduleConfig)
    early_stopping_patience: int = 30

    def resolved_device(self) -> str:
        """The device to train on: ``device``, with ``auto`` resolved on this machine."""
        if self.device == "auto":
            return "cuda" if torch.cuda.is_available() else "cpu"
        return self.device

    def to_dict(self) -> dict[str, Any]:
        return json.loads(json.dumps(dataclasses.asdict(self)))


_SECTIONS = {"data": DataConfig, "model": ModelConfig, "loss": LossConfig, "stage_two": StageTwoConfig, "optimizer": OptimizerConfig, "schedule": ScheduleConfig}


_SCALAR_TYPES = {"bool": (bool,), "int": (int,), "float": (int, float), "str": (str,)}


def _typed(value: Any, annotation: str, field: str) -> Any:
    """``value`` checked against a field's annotation (``float``, ``int | None``,
    ``tuple[int, ...]`` …); a float written as ``1e-3`` (a string to YAML 1.1) becomes a float.
    Raises ``ConfigError`` naming the field and what it expected."""
    optional = annotation.endswith(" | None")
    base = annotation.removesuffix(" | None")
    if value is None:
        if optional:
            return None
        raise ConfigError(f"{field}: must not be null")
    if base == "float" and isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    if base in _SCALAR_TYPES:
        if isinstance(value, _SCALAR_TYPES[base]) and (base == "bool" or not isinstance(value, bool)):
            return float(value) if base == "float" else value
        raise ConfigError(f"{field}: expected {'true or false' if base == 'bool' else base}, got {value!r}")
    if base == "tuple[int, ...]":
        if isinstance(value, list | tuple) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            return tuple(value)
        raise ConfigError(f"{field}: expected a list of integers, got {value!r}")
    if base == "tuple[str, ...]":
        if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
            return tuple(value)
        raise ConfigError(f"{field}: expected a list of strings, got {value!r}")
    return tuple(value) if isinstance(value, list) else value


def _build(cls, raw: Any, where: str):
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a mapping, got {type(raw).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(raw) - set(fields))
    if unknown:
        raise ConfigError(f"{where}: unknown option(s) {unknown}; allowed: {sorted(fields)}")
    values = {}
    for name, value in raw.items():
        if cls is TrainConfig and name in _SECTIONS:
            values[name] = _build(_SECTIONS[name], value, name)
        elif cls is DataConfig and name in ("train", "valid"):
            if not isinstance(value, list):
                raise ConfigError(f"data.{name}: expected a list of files")
            files = []
            for k, item in enumerate(value):
                item = {"path": item} if isinstance(item, str) else item
                files.append(_build(DataFile, item, f"data.{name}[{k}]"))
            values[name] = tuple(files)
        else:
            values[name] = _typed(value, fields[name].type, f"{where}.{name}" if where else name)
    try:
        return cls(**values)
    except TypeError as err:
        raise ConfigError(f"{where or 'config'}: {err}") from None


def _check(config: TrainConfig) -> TrainConfig:
    backends = available_backends()
    rules = [
        (config.dtype in ("float32", "float64"), "dtype", "must be float32 or float64"),
        (
            config.device in ("auto", "cpu") or (config.device.startswith("cuda") and torch.cuda.is_available()),
            "device",
            "must be auto, cpu, or cuda[:N] on a machine with CUDA",
        ),
        (config.backend == "auto" or config.backend in backends, "backend", f"must be auto or one available here: {list(backends)}"),
        (config.epochs >= 1, "epochs", "must be >= 1"),
        (config.batch_size >= 1, "batch_size", "must be >= 1"),
        (len(config.data.train) >= 1, "data.train", "needs at least one file"),
        (0.0 <= config.data.valid_fraction < 1.0, "data.valid_fraction", "must be in [0, 1)"),
        (
            config.model.encoder in ("mace", "nequip"),
            "model.encoder",
            "must be mace (or nequip, to fine-tune a NequIP-class checkpoint with --init)",
        ),
        (config.loss.kind in ("mse", "huber"), "loss.kind", "must be mse or huber"),
        (
            config.loss.weight_normalisation in WEIGHT_NORMALISATIONS,
            "loss.weight_normalisation",
            f"must be {' or '.join(WEIGHT_NORMALISATIONS)}",
        ),
        (config.schedule.kind in ("cosine", "plateau"), "schedule.kind", "must be cosine or plateau"),
        (config.optimizer.learning_rate > 0, "optimizer.learning_rate", "must be positive"),
        (all(f.weight >= 0 for f in config.data.train), "data.train[].weight", "must be >= 0"),
        (
            config.stage_two.start_epoch is None or 0 <= config.stage_two.start_epoch < config.epochs,
            "stage_two.start_epoch",
            "must be null or an epoch in [0, epochs)",
        ),
        (
            all(w >= 0 for w in config.stage_two.overrides().values()),
            "stage_two",
            "loss weights must be null or >= 0",
        ),
    ]
    for ok, field, reason in rules:
        if not ok:
            raise ConfigError(f"{field}: {reason}")
    for k, entry in enumerate(config.data.train):
        for term in TERM_WEIGHT_NAMES:
            value = getattr(entry, f"{term}_weight")
            if value is not None and value < 0:
                raise ConfigError(f"data.train[{k}].{term}_weight: must be null or >= 0")
        if entry.valid_fraction is not None:
            if config.data.valid:
                raise ConfigError(f"data.train[{k}].valid_fraction: applies only when data.valid is empty (no split is made)")
            if not 0.0 <= entry.valid_fraction < 1.0:
                raise ConfigError(f"data.train[{k}].valid_fraction: must be null or in [0, 1)")
    if not isinstance(config.data.label_keys, dict):
        raise ConfigError("data.label_keys: expected a mapping such as {energy: REF_energy, forces: REF_forces}")
    labels = [field.name for field in dataclasses.fields(LabelKeys)]
    for label, key in config.data.label_keys.items():
        if label not in labels:
            raise ConfigError(f"data.label_keys.{label}: unknown label; allowed: {', '.join(labels)}")
        if not isinstance(key, str) or not key:
            raise ConfigError(f"data.label_keys.{label}: expected the name of an info or arrays key, got {key!r}")
    if not isinstance(config.data.info_weights, dict):
        raise ConfigError("data.info_weights: expected a mapping of info key to {value: factor}")
    for key, by_value in config.data.info_weights.items():
        if not isinstance(by_value, dict) or not by_value:
            raise ConfigError(f"data.info_weights.{key}: expected a non-empty mapping of value to factor, got {by_value!r}")
        for value, factor in by_value.items():
            if isinstance(factor, bool) or not isinstance(factor, int | float) or factor < 0:
                raise ConfigError(f"data.info_weights.{key}.{value}: the factor must be a number >= 0, got {factor!r}")
    for section in ("train", "valid"):
        for k, entry in enumerate(getattr(config.data, section)):
            if entry.max_structures is not None and entry.max_structures < 1:
                raise ConfigError(f"data.{section}[{k}].max_structures: must be null or >= 1")
            if section == "valid" and entry.valid_fraction is not None:
                raise ConfigError(f"data.valid[{k}].valid_fraction: a validation file is not split; remove it")
    heads = config.model.tensor_heads
    if not isinstance(heads, dict):
        raise ConfigError("model.tensor_heads: expected a mapping of output name to options")
    for key, options in heads.items():
        if key not in TENSOR_KEYS:
            raise ConfigError(f"model.tensor_heads: unknown output '{key}'; choose from {list(TENSOR_KEYS)}")
        if not isinstance(options, dict) or set(options) - TENSOR_HEAD_OPTIONS:
            raise ConfigError(f"model.tensor_heads.{key}: options must be a mapping with keys from {sorted(TENSOR_HEAD_OPTIONS)}")
        basis = options.get("basis", "cartesian")
        if basis not in ("cartesian", "spherical"):
            raise ConfigError(f"model.tensor_heads.{key}.basis: must be cartesian or spherical")
        if "lmax" in options and basis != "spherical":
            raise ConfigError(f"model.tensor_heads.{key}.lmax: applies to the spherical basis only")
        if "pairs" in options and (basis != "cartesian" or key == "piezoelectric_tensor"):
            raise ConfigError(f"model.tensor_heads.{key}.pairs: applies to the cartesian dielectric and elastic heads only")
        if "pairs" in options and (not isinstance(options["pairs"], int) or options["pairs"] < 1):
            raise ConfigError(f"model.tensor_heads.{key}.pairs: must be an integer ≥ 1")
    config.model.species_cutoffs_by_number()  # raises ConfigError naming a bad entry
    widen = config.model.widen_channels
    if widen is not None and (isinstance(widen, bool) or not isinstance(widen, int) or widen < 1):
        raise ConfigError(f"model.widen_channels: must be a number of channels ≥ 1 or null, got {widen!r}")
    if config.model.refit_e0s and not config.model.energy_head:
        raise ConfigError("model.refit_e0s: re-fits the energy head's E0s; model.energy_head is false")
    if not config.model.energy_head and not heads:
        raise ConfigError("model: a model needs an energy head or at least one tensor head")
    if not config.data.valid and not any(config.data.fraction_of(entry) > 0 for entry in config.data.train):
        raise ConfigError("data.valid_fraction: must be > 0 (for the file, or some file's own) when no data.valid files are given")
    return config


def load_config(path: str | Path) -> TrainConfig:
    """Read and validate a YAML (``.yaml``/``.yml``) or TOML (``.toml``) training config."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"no such config file: '{path}'")
    text = path.read_text()
    if path.suffix == ".toml":
        raw = tomllib.loads(text)
    elif path.suffix in (".yaml", ".yml"):
        raw = yaml.safe_load(text) or {}
    else:
        raise ConfigError(f"'{path}': config must be .yaml, .yml or .toml")
    return config_from_dict(raw)


def config_from_dict(raw: dict[str, Any]) -> TrainConfig:
    """Validate a config given as a mapping (e.g. the copy stored in a checkpoint's provenance)."""
    if "data" not in raw:
        raise ConfigError("data: section is required")
    return _check(_build(TrainConfig, raw, ""))
