"""Accuracy peer for the organic models: mace-torch trained on the same acetylacetone split,
at the same size and loss weights as an atomistic training config, then scored as
``scripts/support_errors.py`` scores atomistic checkpoints.

mace-torch pins an old e3nn, so it runs in its own virtualenv (``.venv-mace``, built on first
use, as ``scripts/bench_inference.py`` builds it). The config's seeded validation split is
written to ``WORK/train.xyz`` and ``WORK/valid.xyz`` (``REF_energy`` / ``REF_forces``), and
``mace_run_train`` trains on them with the config's cutoff, radial basis, ``max_ell``,
correlation, channels, hidden ``l`` (``max_L``), radial MLP, layers, batch size, peak learning
rate, EMA decay, E0s (the config's isolated-atom file) and energy / force weights, its second
stage from the same fraction of the epochs with the config's stage-two energy weight. What
mace-torch cannot match it keeps at its own defaults: AMSGrad, a ReduceLROnPlateau schedule
(not a cosine) and its stage-two learning rate (``--swa_lr``, 0.001).

    python scripts/bench_organic_peer.py scripts/configs/organic_v2.yaml --epochs 300 \\
        --work runs/mace_peer_organic_v2 [--compare checkpoints/organic ...]

Prints energy RMSE (meV per molecule) and force RMSE (meV/Å) on the validation split and on the
whole 600 K file (all / inside / outside the 300 K file's distance support), for the mace-torch
model (in its training dtype) and any ``--compare`` checkpoints (float64). Re-running with the same WORK skips
the training when ``WORK/model.model`` exists.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import ase.io
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench_inference import ensure_mace_venv, peer_environment  # noqa: E402
from support_errors import errors_by_support, outside_pairs, rmse_row, training_support  # noqa: E402

from atomistic import load_potential  # noqa: E402
from atomistic.data import read_labelled  # noqa: E402
from atomistic.training.config import load_config  # noqa: E402
from atomistic.training.run import prepare  # noqa: E402

HOT_FILE = ROOT / "data/botnet/acac/train_600K.xyz"


def write_split(structures, path: Path) -> None:
    """The structures as extxyz with ``REF_energy`` (eV) and ``REF_forces`` (eV/Å)."""
    frames = []
    for structure in structures:
        atoms = ase.Atoms(numbers=structure.numbers, positions=structure.positions)
        atoms.info["REF_energy"] = float(structure.labels["energy"])
        atoms.arrays["REF_forces"] = np.asarray(structure.labels["forces"], dtype=float)
        frames.append(atoms)
    ase.io.write(path, frames, format="extxyz")


def isolated_atom_energies(path: str) -> dict[int, float]:
    """``{Z: energy, eV}`` from an extxyz of single atoms."""
    return {int(s.numbers[0]): float(s.labels["energy"]) for s in read_labelled(path)}


def train_command(config, python: Path, work: Path, epochs: int) -> list[str]:
    """``mace_run_train`` with the config's model, batch, rate, EMA, E0s and loss weights."""
    model, loss, optimizer = config.model, config.loss, config.optimizer
    stage_two_fraction = (config.stage_two.start_epoch / config.epochs) if config.stage_two.start_epoch else None
    command = [
        str(python.parent / "mace_run_train"),
        "--name", "model", "--work_dir", str(work), "--seed", str(config.seed),
        "--train_file", str(work / "train.xyz"), "--valid_file", str(work / "valid.xyz"),
        "--energy_key", "REF_energy", "--forces_key", "REF_forces",
        "--E0s", repr(isolated_atom_energies(config.data.isolated_atoms)),
        "--model", "MACE", "--r_max", str(model.cutoff), "--num_radial_basis", str(model.num_bessel),
        "--num_cutoff_basis", str(model.envelope_exponent), "--max_ell", str(model.max_ell),
        "--correlation", str(model.correlation), "--num_interactions", str(model.num_layers),
        "--num_channels", str(model.channels), "--max_L", str(model.hidden_lmax),
        "--radial_MLP", json.dumps(list(model.radial_hidden)), "--scaling", "rms_forces_scaling",
        "--loss", "weighted", "--energy_weight", str(loss.energy), "--forces_weight", str(loss.forces),
        "--batch_size", str(config.batch_size), "--valid_batch_size", "16", "--max_num_epochs", str(epochs),
        "--lr", str(optimizer.learning_rate), "--weight_decay", str(optimizer.weight_decay),
        "--ema", "--ema_decay", str(optimizer.ema_decay), "--clip_grad", str(optimizer.grad_clip),
        "--patience", str(config.early_stopping_patience), "--eval_interval", "1",
        "--default_dtype", config.dtype, "--device", "cpu", "--error_table", "TotalRMSE", "--restart_latest",
    ]
    if stage_two_fraction is not None:
        command += [
            "--swa", "--start_swa", str(max(1, round(stage_two_fraction * epochs))),
            "--swa_energy_weight", str(config.stage_two.energy if config.stage_two.energy is not None else loss.energy),
            "--swa_forces_weight", str(config.stage_two.forces if config.stage_two.forces is not None else loss.forces),
        ]
    return command


def mace_predictions(python: Path, model: Path, structures_path: Path, output: Path, dtype: str) -> list[dict]:
    """Energies (eV) and forces (eV/Å) of the mace-torch model in its training dtype (a saved
    mace-torch model does not evaluate in another), one dict per frame."""
    subprocess.run(
        [str(python.parent / "mace_eval_configs"), "--configs", str(structures_path), "--model", str(model),
         "--output", str(output), "--default_dtype", dtype, "--device", "cpu"],
        check=True, capture_output=True, env=peer_environment(),
    )
    return [{"energy": a.info["MACE_energy"], "forces": a.arrays["MACE_forces"]} for a in ase.io.read(output, ":")]


def error_row(name: str, structures, predictions, outside: list[bool] | None) -> str:
    """``| name | E RMSE | F RMSE |`` (meV per structure, meV/Å), split by support when given."""
    groups, _ = errors_by_support(structures, predictions, outside)
    return rmse_row(name, groups, ("all",) if outside is None else ("all", "inside", "outside"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("config", help="atomistic training config (organic, with isolated_atoms)")
    parser.add_argument("--epochs", type=int, default=None, help="default: the config's")
    parser.add_argument("--work", required=True, help="mace-torch work directory")
    parser.add_argument("--compare", nargs="*", default=[], help="atomistic checkpoints trained on the same split")
    parser.add_argument("--mace-python", default=None, help="python of an existing mace-torch environment")
    args = parser.parse_args()
    config = load_config(args.config)
    if not config.data.isolated_atoms:
        raise SystemExit(f"{args.config}: data.isolated_atoms is needed for mace-torch's E0s")
    python = Path(args.mace_python) if args.mace_python else ensure_mace_venv(ROOT / ".venv-mace", False)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    train, valid, _ = prepare(config)
    write_split(train, work / "train.xyz")
    write_split(valid, work / "valid.xyz")
    model = work / "model.model"
    if not model.exists():
        command = train_command(config, python, work, args.epochs or config.epochs)
        print("#", " ".join(command), flush=True)
        with open(work / "train.log", "a") as log:
            subprocess.run(command, check=True, stdout=log, stderr=subprocess.STDOUT, env=peer_environment())
    # mace-torch saves the best first-stage model as model.model and, with a second stage, the
    # best of that stage as model_stagetwo.model: the run's end, which atomistic's best-EMA
    # checkpoint of the whole run corresponds to
    if (work / "model_stagetwo.model").exists():
        model = work / "model_stagetwo.model"
    hot = read_labelled(HOT_FILE)
    support = training_support(train + valid)
    outside = [bool(outside_pairs(s, support)) for s in hot]
    hot_path = work / "hot.xyz"
    write_split(hot, hot_path)
    rows_valid = [error_row("mace-torch", valid, mace_predictions(python, model, work / "valid.xyz", work / "valid_pred.xyz", config.dtype), None)]
    rows_hot = [error_row("mace-torch", hot, mace_predictions(python, model, hot_path, work / "hot_pred.xyz", config.dtype), outside)]
    for checkpoint in args.compare:
        potential = load_potential(checkpoint, dtype="float64")
        rows_valid.append(error_row(checkpoint, valid, potential.predict(valid, properties=["energy", "forces"]), None))
        rows_hot.append(error_row(checkpoint, hot, potential.predict(hot, properties=["energy", "forces"]), outside))
    print(f"validation split ({len(valid)} structures): | model | E RMSE (meV/molecule) | F RMSE (meV/Å) |")
    print("\n".join(rows_valid))
    print(f"600 K file ({len(hot)} structures, {sum(outside)} outside the 300 K file's distance support): "
          "| model | E RMSE all / inside / outside | F RMSE all / inside / outside |")
    print("\n".join(rows_hot))


if __name__ == "__main__":
    main()
