"""Compare training runs epoch by epoch from their ``metrics.jsonl`` logs (written by
``atomistic train``): validation energy / force errors at matched epochs, the force-error ratio
against the first run, and each run's best epoch.

    python scripts/compare_runs.py runs/organic_v2 runs/organic_v5 --epochs 6 21 50
    python scripts/compare_runs.py runs/mlearn_v2 runs/mlearn_v3 --every 10 --metric rmse
    python scripts/compare_runs.py runs/organic_v5 --atoms 15   # energies in meV per molecule
    python scripts/compare_runs.py runs/RUN_A runs/RUN_B --source Ge  # one validation source folder

Energies are meV/atom (meV per structure with ``--atoms N``), forces eV/Å; the numbers are the
EMA-weight validation metrics the run logged, not a new evaluation. ``--source`` compares the
metrics of one source folder of the validation set (``Ge`` for ``data/mlearn/Ge/…``), which a
run logs where its validation set comes from more than one folder. Where two runs' recorded
configs (``config.json``) hold out different structures, a warning says so above the table: their
errors are then on different sets and the ratio does not compare the models.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from atomistic.training.config import config_from_dict  # noqa: E402
from atomistic.training.loop import (  # noqa: E402
    METRICS_LOG,
    latest_epoch_records,
    read_metrics_log,
    training_hours,
)
from atomistic.training.run import held_out_key  # noqa: E402


def recorded_held_out_key(run_dir: Path) -> tuple | None:
    """:func:`~atomistic.training.run.held_out_key` of the config ``run_dir`` recorded
    (``config.json``), None without one."""
    path = run_dir / "config.json"
    return held_out_key(config_from_dict(json.loads(path.read_text()))) if path.is_file() else None


def split_warnings(run_dirs: list[Path]) -> list[str]:
    """One line per run whose held-out set differs from the first run's (both configs recorded)."""
    reference = recorded_held_out_key(run_dirs[0])
    if reference is None:
        return []
    return [
        f"warning: {run_dir} holds out a different validation set from {run_dirs[0]} (their config.json differ in "
        "the split files, fractions, seed or stratification): the errors below are on different structures"
        for run_dir in run_dirs[1:]
        if (key := recorded_held_out_key(run_dir)) is not None and key != reference
    ]


def read_metrics(run_dir: Path) -> tuple[dict[int, dict], float]:
    """Epoch → logged record of the validated epochs in ``run_dir/metrics.jsonl`` (with
    ``eval_every`` > 1 the others carry no validation metrics), and the hours of all epochs."""
    if not (run_dir / METRICS_LOG).is_file():
        raise SystemExit(f"{run_dir}: no {METRICS_LOG} (not a run directory of `atomistic train`)")
    try:
        records = read_metrics_log(run_dir)
    except ValueError as error:
        raise SystemExit(str(error)) from None
    latest = latest_epoch_records(records)
    return {epoch: record for epoch, record in latest.items() if "valid" in record}, training_hours(records)


def one_source(records: dict[int, dict], source: str, run_dir: Path) -> dict[int, dict]:
    """The records of the epochs that logged metrics for ``source``, with those as ``valid``."""
    selected = {
        epoch: record | {"valid": record["valid"]["by_source"][source]}
        for epoch, record in records.items()
        if source in record["valid"].get("by_source", {})
    }
    if not selected:
        logged = sorted({name for record in records.values() for name in record["valid"].get("by_source", {})})
        raise SystemExit(
            f"{run_dir}: logs no validation metrics for source '{source}' "
            + (f"(it logs {', '.join(logged)})" if logged else "(it logs none per source)")
        )
    return selected


def errors(record: dict, metric: str, atoms: int) -> tuple[float, float]:
    """(energy error in meV/atom or meV/structure, force error in eV/Å) of one logged epoch."""
    valid = record["valid"]
    energy = valid[f"energy_{metric}_mev_per_atom"] * atoms
    return energy, valid[f"force_{metric}_ev_per_ang"]


def table(runs: dict[str, dict[int, dict]], epochs: list[int], metric: str, atoms: int) -> str:
    """Markdown table: one row per epoch, ``E / F`` per run, and each later run's force error as
    a ratio to the first run's (``-`` where a run has not reached that epoch)."""
    names = list(runs)
    energy_unit = "meV/structure" if atoms > 1 else "meV/atom"
    header = ["epoch"] + [f"{name} E / F" for name in names] + [f"F {name} / {names[0]}" for name in names[1:]]
    lines = [
        f"validation {metric.upper()}: energy {energy_unit}, forces eV/Å",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    for epoch in epochs:
        cells, forces = [str(epoch)], []
        for name in names:
            record = runs[name].get(epoch)
            if record is None:
                cells.append("-")
                forces.append(math.nan)
                continue
            energy, force = errors(record, metric, atoms)
            cells.append(f"{energy:.2f} / {force:.4f}")
            forces.append(force)
        for force in forces[1:]:
            cells.append("-" if math.isnan(force) or math.isnan(forces[0]) else f"{force / forces[0]:.3f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def best_epochs(runs: dict[str, dict[int, dict]], hours: dict[str, float], metric: str, atoms: int) -> str:
    """One line per run: validated epochs, summed epoch time and the epoch of lowest
    validation force error."""
    lines = []
    for name, records in runs.items():
        epoch = min(records, key=lambda e: errors(records[e], metric, atoms)[1])
        energy, force = errors(records[epoch], metric, atoms)
        lines.append(
            f"{name}: {len(records)} epochs validated (last {max(records)}, {hours[name]:.2f} h summed epoch time); "
            f"lowest force {metric.upper()} at epoch {epoch}: E {energy:.2f}, F {force:.4f}"
        )
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path, help="run directories (the first is the reference)")
    parser.add_argument("--epochs", nargs="+", type=int, help="epochs to compare (default: every --every epochs)")
    parser.add_argument("--every", type=int, default=25, help="epoch stride when --epochs is not given (default 25)")
    parser.add_argument("--metric", choices=["mae", "rmse"], default="mae")
    parser.add_argument("--source", help="compare the validation metrics of this source folder only (e.g. Ge)")
    parser.add_argument("--atoms", type=int, default=1, help="multiply per-atom energies by this (meV per molecule)")
    args = parser.parse_args(argv)
    if args.every < 1 or args.atoms < 1:
        parser.error("--every and --atoms must be positive")
    runs, hours = {}, {}
    for run_dir in args.runs:
        records, run_hours = read_metrics(run_dir)
        if not records:
            parser.error(f"{run_dir}: {METRICS_LOG} holds no validated epochs yet")
        if args.source is not None:
            records = one_source(records, args.source, run_dir)
        if f"force_{args.metric}_ev_per_ang" not in next(iter(records.values()))["valid"]:
            parser.error(f"{run_dir}: logs no energy/force validation errors (a crystal-tensor run?)")
        name = run_dir.name if run_dir.name not in runs else str(run_dir)
        runs[name], hours[name] = records, run_hours
    last = max(max(records) for records in runs.values())
    epochs = args.epochs or sorted({*range(args.every, last + 1, args.every), *(max(r) for r in runs.values())})
    for line in split_warnings(args.runs):
        print(line)
    print(table(runs, epochs, args.metric, args.atoms))
    print()
    print(best_epochs(runs, hours, args.metric, args.atoms))


if __name__ == "__main__":
    main()
