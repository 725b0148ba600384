"""Write MODEL_CARD.md for a checkpoint trained by `atomistic train`, with held-out metrics
measured here on its validation split and the published comparison tables.

    python scripts/write_model_card.py checkpoints/mlearn --bar mlearn
    python scripts/write_model_card.py checkpoints/organic --bar organic
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import numpy as np
from ase.data import chemical_symbols

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from atomistic import load_potential  # noqa: E402
from atomistic.checkpoint import COMMITTEE, checkpoints_dir, resolve_recorded  # noqa: E402
from atomistic.data.datasets import read_labelled  # noqa: E402
from atomistic.training.config import config_from_dict  # noqa: E402
from atomistic.training.loop import METRICS_LOG, read_metrics_log, training_hours  # noqa: E402
from atomistic.training.metrics import ErrorAccumulator, source_group  # noqa: E402
from atomistic.training.run import prepare, validation_split_mismatches  # noqa: E402

MLEARN_BAR = {  # Zuo et al., J. Phys. Chem. A 124, 731 (2020): test-set MAE, best of GAP and MTP
    "Li": (0.49, 0.01),
    "Mo": (2.24, 0.09),
    "Si": (2.21, 0.06),
    "Ge": (1.79, 0.05),
}
TRANSFER_600K = Path("data/botnet/acac/train_600K.xyz")
TRANSFER_600K_LABEL = f"acac 600 K ({TRANSFER_600K.name}, all)"  # its row in the organic card
ORGANIC_BAR = """| acac RMSE (published, official test sets) | E 300 K (meV/molecule) | F 300 K (meV/Å) | E 600 K | F 600 K |
|---|---|---|---|---|
| MACE (Batatia et al. 2022, Table 3) | 0.9 | 5.1 | 4.6 | 22.4 |
| NequIP | 0.81 | 5.90 | 6.04 | 27.8 |"""


DATA_README = ROOT / "data" / "README.md"
# How the card names the encoder settings (keys of the checkpoint's encoder config); a key not
# listed here is shown as it is spelled in the config.
ENCODER_LABELS = {
    "species": "elements",
    "cutoff": "cutoff (Å)",
    "species_cutoffs": "cutoff per element (Å)",
    "cutoff_on": "cutoff switching starts at (Å)",
    "cutoff_function": "cutoff function",
    "num_bessel": "radial Bessel functions",
    "envelope_exponent": "cutoff envelope exponent",
    "max_ell": "edge spherical harmonics, l ≤",
    "sh_lmax": "edge spherical harmonics, l ≤",
    "channels": "channels",
    "hidden_lmax": "hidden features, l ≤",
    "irreps_layers": "node features per layer (irreps)",
    "num_layers": "message-passing layers",
    "correlation": "correlation order of the symmetric contraction",
    "radial_hidden": "radial MLP hidden widths",
    "radial_activation": "radial MLP activation",
    "avg_num_neighbors": "average neighbour count (message normalisation)",
    "conv_denominator": "message normalisation per layer",
    "species_radial": "radial functions per element pair",
    "parity": "parity-aware features",
    "self_connection": "self-connection",
    "scalar_activation": "scalar activation (by parity: e even, o odd)",
    "gate_activation": "gate activation (by parity)",
}


NORMALISATION_TEXT = {  # loss.weight_normalisation
    "batch": "per-file weights averaged within each batch",
    "dataset": "per-file weights normalised over the whole training set",
}


def data_sources(readme: Path = DATA_README) -> dict[str, str]:
    """Path prefix under ``data/`` → its "source and licence" cell, from the tables of
    ``data/README.md`` (first cell the folder or file in backticks, last cell its source and
    licence; a ``{Si,Ge}`` pattern in the first cell matches every file under the part before it)."""
    sources = {}
    for line in readme.read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0].startswith("`"):
            sources[cells[0].strip("`").split("{")[0]] = cells[-1]
    return sources


def source_of(path: str, sources: dict[str, str]) -> str:
    """The source and licence of a training file (``data/...``) from the ``data_sources`` table:
    the entry with the longest matching prefix, or a dash for a file that is not bundled."""
    relative = Path(path).as_posix().removeprefix("data/")
    matches = [prefix for prefix in sources if relative.startswith(prefix)]
    return sources[max(matches, key=len)] if matches else "-"


def weight_text(entry: dict) -> str:
    """A training file's loss weights: its weight, and each term's own weight where it has one."""
    terms = [f"{term} {entry[f'{term}_weight']:g}" for term in ("energy", "forces", "stress") if entry.get(f"{term}_weight") is not None]
    return f"{entry['weight']:g}" + (f" ({', '.join(terms)})" if terms else "")


def data_table(training_data: list[dict], train: list, valid: list) -> str:
    """One row per training file: the structures trained on and held out, its loss weights and
    where it comes from, with its licence (``data/README.md``)."""
    sources = data_sources()

    def count(structures: list, path: str) -> int:
        return sum(Path(s.info.get("source", "")) == Path(path) for s in structures)

    lines = ["| file | trained on | held out | loss weight | source and licence |", "|---|---|---|---|---|"]
    lines += [
        f"| `{entry['path']}` | {count(train, entry['path'])} | {count(valid, entry['path'])} | {weight_text(entry)} | {source_of(entry['path'], sources)} |"
        for entry in training_data
    ]
    return "\n".join(lines)


def encoder_value(key: str, value) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if key == "species":
        return " ".join(chemical_symbols[z] for z in value)
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list | tuple):
        return ", ".join(encoder_value("", item) for item in value)
    if isinstance(value, dict):
        return ", ".join(f"{k} {encoder_value('', v)}" for k, v in value.items())
    return str(value).replace("|", "/")


def encoder_table(encoder: dict, n_parameters: int) -> str:
    """The encoder's settings as a two-column table, with its parameter count."""
    lines = ["| encoder | |", "|---|---|", f"| parameters | {n_parameters:,} |".replace(",", " ")]
    for key, value in encoder.items():
        if key == "species_cutoffs" and len(value) == len(encoder.get("species", ())):
            value = {chemical_symbols[z]: radius for z, radius in zip(encoder["species"], value, strict=True)}
        lines.append(f"| {ENCODER_LABELS.get(key, key)} | {encoder_value(key, value)} |")
    return "\n".join(lines)


HEAD_LABELS = {  # keys of a crystal-tensor head's config, as the card names them
    "hidden": "hidden width of the channel mixing",
    "pairs": "many-body products (pairs)",
    "scale": "output scale (units of the tensor)",
}


def tensor_head_table(heads: dict[str, dict]) -> str:
    """The crystal-tensor heads' settings as a two-column table; empty for an energy-only model."""
    lines = []
    for key, head in heads.items():
        if key != "energy":
            lines.append(f"| output | `{key}` |")
            lines += [f"| {HEAD_LABELS.get(name, name)} | {encoder_value(name, value)} |" for name, value in head.items()]
    return "\n".join(["| tensor head | |", "|---|---|", *lines]) if lines else ""


def training_table(config: dict) -> str:
    """The training recipe (optimiser, schedule, loss) as a two-column table; ``config`` is a whole
    training config (every option present, as ``dataclasses.asdict`` of a ``TrainConfig`` gives)."""
    optimizer, schedule, loss, stage_two = config["optimizer"], config["schedule"], config["loss"], config.get("stage_two") or {}
    if schedule["kind"] == "cosine":
        schedule_text = (f"cosine from {optimizer['learning_rate']:g} after {schedule['warmup_epochs']} warm-up epoch{'' if schedule['warmup_epochs'] == 1 else 's'}, "
                         f"down to {schedule['min_lr_ratio']:g} × the peak")
    else:
        schedule_text = (f"{schedule['kind']} from {optimizer['learning_rate']:g} (factor {schedule['plateau_factor']:g}, "
                         f"patience {schedule['plateau_patience']} epochs)")
    kind = "MSE" if loss["kind"] == "mse" else f"{loss['kind'].capitalize()} (δ {loss['huber_delta']:g})"
    model = config.get("model") or {}
    weights = f"energy per atom {loss['energy']:g}, forces {loss['forces']:g}, stress {loss['stress']:g}"
    if model.get("tensor_heads"):  # a tensor-only model has no energy, forces or stress to weigh
        weights = (f"{weights}, " if model.get("energy_head", True) else "") + f"crystal tensors {loss['tensors']:g}"
    second = [f"{term} {stage_two[term]:g}" for term in ("energy", "forces", "stress", "tensors") if stage_two.get(term) is not None]
    rows = [
        ("epochs", f"{config['epochs']} (best validation epoch kept)"),
        ("batch size", f"{config['batch_size']} structures"),
        ("precision", config["dtype"]),
        ("optimiser", f"AdamW{' (AMSGrad)' if optimizer['amsgrad'] else ''}, weight decay {optimizer['weight_decay']:g}"),
        ("learning rate", schedule_text),
        ("EMA of weights", f"decay {optimizer['ema_decay']:g}"),
        ("gradient clipping", f"norm {optimizer['grad_clip']:g}"),
        ("loss", f"{kind}; weights {weights}; {NORMALISATION_TEXT.get(loss['weight_normalisation'], loss['weight_normalisation'])}"),
    ]
    if stage_two.get("start_epoch") is not None and second:
        rows.append(("second stage", f"from epoch {stage_two['start_epoch']}: {', '.join(second)}"))
    rows += [("early stopping", f"after {config['early_stopping_patience']} epochs without a lower validation loss"), ("seed", str(config["seed"]))]
    return "\n".join(["| training | |", "|---|---|", *(f"| {name} | {value} |" for name, value in rows)])


def run_training_hours(run_dir: Path) -> float | None:
    """Hours of training recorded in ``run_dir/metrics.jsonl`` (each epoch once), or in the run's
    kept record ``docs/runs/<run name>/metrics.jsonl`` where ``run_dir`` is gone; ``None`` if neither."""
    for directory in (ROOT / run_dir, ROOT / "docs" / "runs" / run_dir.name):
        if (directory / METRICS_LOG).exists():
            return training_hours(read_metrics_log(directory))
    return None


def recorded_training_hours(provenance: dict) -> float | None:
    """Hours of training of a checkpoint: from its run's metrics log (``run_training_hours``), else
    as its manifest recorded them when the log was there (``provenance["training_hours"]``)."""
    hours = run_training_hours(Path(provenance["config"]["run_dir"]))
    return hours if hours is not None else provenance.get("training_hours")


def structure_kind(structure) -> str:
    """The mlearn configuration kind (``group``: AIMD-NVT, Elastic, Surface, Vacancy) with the
    temperature of the MD run it was sampled from, when the reader found one in its description
    (``info["temperature_k"]``; "... AIMD NVT simulation at 3000 K" → ``AIMD-NVT 3000 K``)."""
    kind = str(structure.info.get("group", "-"))
    temperature = structure.info.get("temperature_k")
    return f"{kind} {temperature} K" if temperature is not None else kind


def _kind_order(kind: str) -> tuple[str, int]:
    name, _, temperature = kind.partition(" ")
    return name, int(temperature.removesuffix(" K")) if temperature else 0


def kind_errors(predicted: dict[str, list]) -> list[tuple[str, str, int, float, float]]:
    """Held-out (element, kind, structures, energy MAE meV/atom, force MAE eV/Å) per mlearn
    configuration kind and MD temperature, from the (structure, prediction) pairs of each element."""
    rows = []
    for element, pairs in predicted.items():
        kinds: dict[str, list] = {}
        for pair in pairs:
            kinds.setdefault(structure_kind(pair[0]), []).append(pair)
        for kind, members in sorted(kinds.items(), key=lambda item: _kind_order(item[0])):
            m = ErrorAccumulator.of(members).summary()
            rows.append((element, kind, len(members), m["energy_mae_mev_per_atom"], m["force_mae_ev_per_ang"]))
    return rows


def kind_table(kinds: list[tuple[str, str, int, float, float]]) -> str:
    """The rows of ``kind_errors`` (held-out MAE by element, mlearn configuration kind and MD
    temperature) as a Markdown table."""
    lines = ["| element | kind | structures | energy MAE (meV/atom) | force MAE (eV/Å) |", "|---|---|---|---|---|"]
    lines += [f"| {element} | {kind} | {n} | {e:.2f} | {f:.3f} |" for element, kind, n, e, f in kinds]
    return "\n".join(lines)


ENCODER_CLASS = {"mace": "MACE-class", "nequip": "NequIP-class"}


def reach_text(species: str, encoder: dict) -> str:
    """One encoder's cutoffs and depth, e.g. ``a 5 Å cutoff, 3 message-passing layers (receptive
    field 3 × cutoff)``."""
    cutoffs = encoder.get("species_cutoffs")
    if cutoffs:
        reach = ", ".join(f"{symbol} {radius:g} Å" for symbol, radius in zip(species.split(), cutoffs, strict=True))
        reach = f"cutoffs per element ({reach})"
    else:
        reach = f"a {encoder['cutoff']:g} Å cutoff"
    # MACE-class: num_layers; NequIP-class: the embedding irreps, then one entry per layer
    depth = encoder.get("num_layers", len(encoder.get("irreps_layers", [None, None])) - 1)
    return f"{reach}, {depth} message-passing layers (receptive field {depth} × cutoff)"


def limits_text(species: str, encoders: dict[str, dict], train: list, kinds: list[tuple[str, str, int, float, float]], measured: dict, bar: str) -> str:
    """The card's known limits, from the model's own configuration (``encoders``: the encoder
    config of each member by name, one for a single model), its training data and the
    held-out errors measured for the card (``kinds``: the rows of ``kind_errors``, empty for a
    card without them; ``measured``: the metrics of each card row); nothing is typed in by hand."""
    if len(encoders) == 1:
        reach = reach_text(species, next(iter(encoders.values())))
    else:
        reach = "; ".join(f"`{name}`: {reach_text(species, encoder)}" for name, encoder in encoders.items())
    lines = [
        f"- Elements: {species} only; a structure with any other element is rejected with an error naming the element.",
        f"- Short-ranged: {reach}; no explicit long-range electrostatics or dispersion beyond it.",
    ]
    by_source: dict[str, list] = {}
    for structure in train:  # mlearn files are <element>/training.json: named by their directory
        source = Path(structure.info["source"])
        by_source.setdefault(source.parent.name if bar == "mlearn" else f"{source.parent.name}/{source.name}", []).append(structure)
    coverage = []
    for source, structures in sorted(by_source.items()):
        groups = sorted({str(s.info.get("group", "-")) for s in structures} - {"-"})
        temperatures = [s.info["temperature_k"] for s in structures if s.info.get("temperature_k") is not None]
        detail = [", ".join(groups)] if groups else []
        detail += [f"MD snapshots {min(temperatures)}–{max(temperatures)} K"] if temperatures else []
        coverage.append(f"{source} {len(structures)} structures" + (f" ({'; '.join(detail)})" if detail else ""))
    lines.append(f"- Training data: {'; '.join(coverage)}. Outside these conditions (other phases, compositions, pressures "
                 "or temperatures) its errors are not measured.")
    if bar == "mlearn":
        worst = sorted((row for row in kinds if row[2] >= 2), key=lambda row: -row[4])[:3]
        if worst:
            lines.append("- Largest held-out force errors by kind (at least two structures): "
                         + "; ".join(f"{element} {kind} {f:.3f} eV/Å ({n} structures)" for element, kind, n, _, f in worst) + ".")
    elif TRANSFER_600K_LABEL in measured:
        m = measured[TRANSFER_600K_LABEL]
        lines.append(f"- Hotter than its training data, on {TRANSFER_600K_LABEL}: force RMSE {m['force_rmse_mev_per_ang']:.1f} meV/Å, "
                     f"energy RMSE {m['energy_rmse_mev_per_structure']:.1f} meV/molecule.")
    lines.append("- Trained on 2 CPU cores; see the tables above for where it stands against published potentials.")
    return "\n".join(lines) + "\n"


def card_members(directory: Path, manifest: dict) -> dict[str, tuple[float, dict]]:
    """Name → (weight, manifest) of each member of a committee checkpoint, or of the one model.
    Exits where a member was trained on another validation split than the first (its training
    set would hold the others' held-out structures)."""
    spec = manifest["architecture"].get(COMMITTEE)
    if spec is None:
        return {directory.name: (1.0, manifest)}
    members = {}
    for relative, weight in zip(spec["members"], spec["weights"], strict=True):
        members[Path(relative).name] = (weight, json.loads((directory / relative / "manifest.json").read_text()))
    if validation_split_mismatches({name: config_from_dict(m["provenance"]["config"]) for name, (_, m) in members.items()}):
        sys.exit(f"{directory}: its members were trained on different validation splits ({', '.join(members)})")
    return members


def encoder_class(manifest: dict) -> str:
    return ENCODER_CLASS.get(manifest["architecture"]["encoder"]["name"], "Equivariant")


def hyperparameter_text(manifest: dict, n_parameters: int) -> str:
    """The encoder, training recipe, best epoch and training time of one trained checkpoint, and
    its whole training configuration."""
    provenance = manifest["provenance"]
    logged = run_training_hours(Path(provenance["config"]["run_dir"]))
    hours = logged if logged is not None else provenance.get("training_hours")  # as recorded_training_hours, knowing which
    # a fine-tune's architecture is the --init checkpoint's (the encoder table), not the config's model section
    shown_config = {k: v for k, v in provenance["config"].items() if k != "data" and not (k == "model" and provenance.get("init"))}
    source = "sum of the epoch times in the run's metrics log" if logged is not None else "the run's time as its manifest recorded it"
    time_text = f"{hours:.1f} h wall time ({source})" if hours else "training time not recorded"
    heads = tensor_head_table(manifest["architecture"].get("heads", {}))
    return (
        f"{encoder_table(manifest['architecture']['encoder']['config'], n_parameters)}\n\n"
        + (f"{heads}\n\n" if heads else "")
        + f"{training_table(dataclasses.asdict(config_from_dict(provenance['config'])))}\n\n"
        f"Best validation epoch: {provenance['epoch']}; trained {provenance['trained']} on a 2-core CPU; {time_text}.\n\n"
        "<details><summary>Whole training configuration (<code>atomistic train</code>, data section in the Data table)</summary>\n\n"
        f"```json\n{json.dumps(shown_config)}\n```\n</details>"
    )


def init_text(init: str | None, directory: Path) -> str:
    """The card's "fine-tuned from" entry: the ``--init`` checkpoint the run started from (a path,
    from here or from the project root, or a model name, resolved as ``--init`` resolves it), and a
    word when that is the card's own directory, which now holds this model rather than its start,
    or another published checkpoint, which may since hold a newer model."""
    if not init:
        return "- (trained from scratch)"
    published = resolve_recorded(init, ROOT)
    if published is None:
        return init
    published = published.resolve()
    if published == directory.resolve():
        return f"{init} (the model published there before this one, which this one replaced)"
    if published.parent == checkpoints_dir().resolve():
        return f"{init} (as published when this run began)"
    return init


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("checkpoint")
    parser.add_argument("--bar", choices=["mlearn", "organic"], required=True)
    parser.add_argument("--note", default="", help="training history worth knowing (a section of its own)")
    args = parser.parse_args(argv)
    directory = Path(args.checkpoint)
    manifest = json.loads((directory / "manifest.json").read_text())
    members = card_members(directory, manifest)
    provenance = next(iter(members.values()))[1]["provenance"]  # the split is every member's
    config = config_from_dict(provenance["config"])
    train, valid, _ = prepare(config)
    potential = load_potential(directory, dtype="float64")
    by_source: dict[str, list] = {}
    for s in sorted(valid, key=source_group):
        by_source.setdefault(source_group(s), []).append(s)
    if args.bar == "organic":  # never trained on: the 600 K set stands in for the 600 K test set
        by_source[TRANSFER_600K_LABEL] = read_labelled(ROOT / TRANSFER_600K)
    rows = []
    measured = {}
    predicted = {}  # group -> (structure, prediction) pairs: each structure is predicted once
    properties = [p for p in ("energy", "forces", "stress") if p in potential.properties]
    for group, structures in by_source.items():
        pairs = predicted[group] = list(zip(structures, potential.predict(structures, properties=properties), strict=True))
        m = ErrorAccumulator.of(pairs).summary()
        e_mol = np.array([p["energy"] - s.labels["energy"] for s, p in pairs])
        m["energy_rmse_mev_per_structure"] = float(np.sqrt((e_mol**2).mean()) * 1000)
        m["force_rmse_mev_per_ang"] = m["force_rmse_ev_per_ang"] * 1000
        measured[group] = m
        if args.bar == "mlearn":
            bar_e, bar_f = MLEARN_BAR[group]
            verdict = "yes" if m["energy_mae_mev_per_atom"] < bar_e and m["force_mae_ev_per_ang"] < bar_f else "no"
            stress = f"{m['stress_mae_gpa']:.3f}" if m.get("stress_mae_gpa") is not None else "-"
            rows.append(
                f"| {group} | {m['n_structures']} | {m['energy_mae_mev_per_atom']:.2f} | {bar_e} | {m['force_mae_ev_per_ang']:.3f} | {bar_f} "
                f"| {verdict} | {stress} |"
            )
        else:
            rows.append(f"| {group} | {m['n_structures']} | {m['energy_rmse_mev_per_structure']:.2f} | {m['force_rmse_mev_per_ang']:.2f} | {m['energy_mae_mev_per_atom']:.2f} | {m['force_mae_ev_per_ang']:.4f} |")
    kinds = kind_errors(predicted) if args.bar == "mlearn" else []
    share = f"{config.data.valid_fraction * 100:.0f} %"
    if args.bar == "mlearn":
        table = ("| element | structures | energy MAE (meV/atom) | best published | force MAE (eV/Å) | best published | beats both? | stress MAE (GPa) |\n"
                 "|---|---|---|---|---|---|---|---|\n" + "\n".join(rows))
        bar_text = ("Published: test-set MAE of GAP and MTP, Zuo et al., J. Phys. Chem. A 124, 731 (2020); "
                    f"the better of the two is shown. Ours are on a held-out {share} split of the training files"
                    + (f" (stratified by {', '.join(config.data.stratify_by)}: {share} of each kind of configuration)" if config.data.stratify_by else "")
                    + ", not the official test sets.\n\n" + kind_table(kinds))
    else:
        table = ("| set | structures | energy RMSE (meV/molecule) | force RMSE (meV/Å) | energy MAE (meV/atom) | force MAE (eV/Å) |\n"
                 "|---|---|---|---|---|---|\n" + "\n".join(rows))
        bar_text = ORGANIC_BAR + (
            f"\n\nOurs are on a held-out {share} split of the 300 K training file and on the whole 600 K training "
            "file (a hotter, never-seen distribution), not on the official MD test sets."
        )
    species = " ".join(chemical_symbols[z] for z in manifest["species"])
    if len(members) == 1:
        summary = f"{encoder_class(manifest)} potential trained by `atomistic train` for {species}."
        hyperparameters = hyperparameter_text(manifest, sum(w.numel() for w in potential.parameters()))
    else:
        summary = (
            f"Committee of {len(members)} potentials trained by `atomistic train` for {species}: it predicts their weighted mean "
            "and, as `forces_spread` (eV/Å per atom), how far their forces disagree. Members: "
            + ", ".join(f"`{name}` ({encoder_class(m)}, weight {weight:.2f})" for name, (weight, m) in members.items())
            + "."
        )
        # the loaded committee's members come in the manifest's order, as card_members lists them
        hyperparameters = "\n\n".join(
            f"### `{name}`\n{hyperparameter_text(m, sum(w.numel() for w in module.parameters()))}"
            for (name, (_, m)), module in zip(members.items(), potential.members, strict=True)
        )
    fine_tuned = "; ".join(
        f"{name + ': ' if len(members) > 1 else ''}{init_text(m['provenance'].get('init'), directory)}" for name, (_, m) in members.items()
    )
    e0s = "; ".join(f"{name + ': ' if len(members) > 1 else ''}{m['provenance']['e0s_method']}" for name, (_, m) in members.items())
    card = f"""# Model card: `{directory.name}`

{summary}

## Data
{data_table(provenance["training_data"], train, valid)}

Validation: {provenance["validation"]} ({provenance["n_valid"]} structures, never trained on); {provenance["n_train"]} training
structures in all. E0s: {e0s}. Fine-tuned from: {fine_tuned}. Sources and licences in full: `data/README.md`.

## Hyperparameters
{hyperparameters}

## Held-out validation metrics (float64, measured by scripts/write_model_card.py)
{table}

{bar_text}

{f"## Training history{chr(10)}{args.note}{chr(10)}{chr(10)}" if args.note else ""}## Limits
{limits_text(species, {name: m["architecture"]["encoder"]["config"] for name, (_, m) in members.items()}, train, kinds, measured, args.bar)}"""
    (directory / "MODEL_CARD.md").write_text(card)
    manifest["metrics"]["validation_by_group"] = measured
    if len(members) == 1 and (hours := recorded_training_hours(manifest["provenance"])) is not None:
        manifest["provenance"]["training_hours"] = round(hours, 3)  # kept for when the run's log is gone
    (directory / "manifest.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    print(card)


if __name__ == "__main__":
    main()
