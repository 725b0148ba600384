"""Geometry, labelled forces and a model's per-atom force errors of chosen acetylacetone frames,
against the extremes of a training file.

Acetylacetone's enol ring holds one hydrogen between two oxygens; its hotter frames compress the
C–O bonds and push that hydrogen towards the middle (proton transfer). Per frame this prints the
shortest C–O bond, the O···O distance, the enol hydrogen's asymmetry |d(O1–H) − d(O2–H)| (0 when it
is centred), the largest labelled atomic force, and with ``--checkpoint`` the atoms of largest force
error; first, the same extremes over the training file. When the ring's hydrogen bond breaks (the
O–H turned away), O···O grows past anything at 300 K: ``--open`` counts the test frames whose O···O
is longer than the training file's longest and, with ``--checkpoint``, pools the model's energy
(meV per structure) and force (meV/Å) RMSE over them and over the rest.

    python scripts/acac_frames.py data/botnet/acac/train_300K.xyz data/botnet/acac/train_600K.xyz 1 189 \\
        --checkpoint checkpoints/organic [--open]

Distances in Å, forces in eV/Å; float64.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from ase.data import chemical_symbols

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(ROOT / "scripts"))

from support_errors import errors_by_support, rmse  # noqa: E402

from atomistic import load_potential  # noqa: E402
from atomistic.data import read_labelled  # noqa: E402
from atomistic.data.convert import Structure  # noqa: E402

CARBON, OXYGEN, HYDROGEN = 6, 8, 1


def enol_geometry(structure: Structure) -> dict[str, float]:
    """``shortest C–O``, ``O···O`` and ``enol H asymmetry`` (Å) of one acetylacetone frame; the enol
    hydrogen is the one nearest to either oxygen."""
    numbers, positions = structure.numbers, structure.positions
    oxygens = np.flatnonzero(numbers == OXYGEN)
    if len(oxygens) != 2:
        raise ValueError(f"numbers: an acetylacetone frame has 2 oxygens, this one has {len(oxygens)}")
    distances = np.linalg.norm(positions[:, None, :] - positions[None, :, :], axis=-1)
    hydrogens = np.flatnonzero(numbers == HYDROGEN)
    carbons = np.flatnonzero(numbers == CARBON)
    enol_h = hydrogens[np.argmin(distances[np.ix_(oxygens, hydrogens)].min(axis=0))]
    return {
        "shortest C–O": float(distances[np.ix_(carbons, oxygens)].min()),
        "O···O": float(distances[oxygens[0], oxygens[1]]),
        "enol H asymmetry": float(abs(distances[oxygens[0], enol_h] - distances[oxygens[1], enol_h])),
    }


def largest_force(structure: Structure) -> float:
    """The largest labelled atomic force of a frame, eV/Å."""
    return float(np.linalg.norm(np.asarray(structure.labels["forces"]), axis=1).max())


def describe(values: dict[str, float]) -> str:
    return ", ".join(f"{name} {value:.3f} Å" for name, value in values.items())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("training_file")
    parser.add_argument("test_file")
    parser.add_argument("frames", nargs="*", type=int, help="indices of frames in the test file")
    parser.add_argument("--checkpoint", help="also list this model's atoms of largest force error")
    parser.add_argument("--atoms", type=int, default=3, help="how many atoms of largest error to list")
    parser.add_argument(
        "--open", action="store_true",
        help="count the test frames with a longer O···O than any training frame (with --checkpoint: their RMSE and the rest's)",
    )
    args = parser.parse_args(argv)
    training = read_labelled(args.training_file)
    test = read_labelled(args.test_file)
    for index in args.frames:
        if not 0 <= index < len(test):
            raise SystemExit(f"frames: {index} is not a frame of {args.test_file} ({len(test)} frames)")
    geometries = [enol_geometry(s) for s in training]
    minima = {name: min(g[name] for g in geometries) for name in geometries[0]}
    forces = [largest_force(s) for s in test]
    largest_training_force = max(largest_force(s) for s in training)
    print(f"{args.training_file} ({len(training)} frames): smallest {describe(minima)}; "
          f"largest atomic force {largest_training_force:.2f} eV/Å")
    print(f"{args.test_file}: {sum(f > largest_training_force for f in forces)} of {len(test)} frames hold a larger atomic force")
    potential = load_potential(args.checkpoint, dtype="float64") if args.checkpoint else None
    everything = None  # the model's predictions for every test frame, when --open needs them
    if args.open:
        longest = max(g["O···O"] for g in geometries)
        open_frames = [i for i, s in enumerate(test) if enol_geometry(s)["O···O"] > longest]
        print(f"{args.test_file}: {len(open_frames)} of {len(test)} frames have a longer O···O than the training file's "
              f"longest, {longest:.3f} Å: {' '.join(map(str, open_frames)) or 'none'}")
        if potential is not None:
            everything = potential.predict(test, properties=["energy", "forces"])
            open_set = set(open_frames)
            is_open = [i in open_set for i in range(len(test))]
            # errors_by_support's "outside" group holds the open frames here, "inside" the rest
            groups, _ = errors_by_support(test, everything, is_open)
            total = float(np.square(groups["all"][1]).sum())
            for name, key in (("open", "outside"), ("the rest", "inside")):
                energy, force = groups[key]
                if energy:
                    print(f"{args.checkpoint}: {name}: energy RMSE {rmse(energy):.1f} meV, force RMSE {rmse(force):.1f} meV/Å, "
                          f"{100 * float(np.square(force).sum()) / total:.1f} % of the squared force error")
    chosen = [test[i] for i in args.frames]
    predictions = None
    if everything is not None:
        predictions = [everything[i] for i in args.frames]
    elif potential is not None:
        predictions = potential.predict(chosen, properties=["forces"])
    for k, (index, structure) in enumerate(zip(args.frames, chosen, strict=True)):
        line = f"frame {index}: {describe(enol_geometry(structure))}; largest atomic force {forces[index]:.2f} eV/Å"
        if predictions is not None:
            error = np.linalg.norm(np.asarray(predictions[k]["forces"]) - np.asarray(structure.labels["forces"]), axis=1)
            worst = np.argsort(-error)[: args.atoms]
            line += "; largest errors " + ", ".join(f"{chemical_symbols[structure.numbers[a]]}{a} {error[a]:.2f} eV/Å" for a in worst)
        print(line)


if __name__ == "__main__":
    main()
