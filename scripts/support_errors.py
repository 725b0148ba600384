"""Errors of checkpoints on a test file, split by whether each structure lies inside the
training file's interatomic-distance support.

A structure is outside the support when, for some pair of elements (A, B), its shortest A–B
distance is shorter than the shortest A–B distance in any training structure: the model sees a
compressed bond it was never fitted on and can only extrapolate its radial functions there.
Hotter molecular-dynamics data (acetylacetone at 600 K against a 300 K training file) has a few
such structures, and they carry most of a model's force RMSE on it.

    python scripts/support_errors.py data/botnet/acac/train_300K.xyz \\
        data/botnet/acac/train_600K.xyz checkpoints/organic docs/runs/organic_v8/best

Prints, per checkpoint, energy RMSE (meV per structure) and force RMSE (meV/Å) on the whole
test file, inside and outside the support, and the element pairs that put structures outside
it; with ``--worst N``, each checkpoint's N structures of highest force RMSE (their index in the
test file and the pairs that put them outside), the share of the squared force error they carry and
the force RMSE of the other structures, and the same for its N structures of largest energy error;
with ``--also-trained-on FILE``, the support is that of the training file and FILE together (a
model trained on both). Float64.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

import numpy as np
from ase.data import chemical_symbols

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from atomistic import load_potential  # noqa: E402
from atomistic.data import read_labelled  # noqa: E402
from atomistic.data.convert import Structure  # noqa: E402


def shortest_pair_distances(structure: Structure) -> dict[tuple[int, int], float]:
    """``{(Z_a, Z_b): shortest distance, Å}`` over the structure's atom pairs, ``Z_a <= Z_b``.

    Molecules only (no periodic images): the distances are between the listed positions."""
    if structure.pbc.any():
        raise ValueError("support_errors.py measures molecules; a periodic structure needs image distances")
    positions, numbers = structure.positions, structure.numbers
    distances = np.linalg.norm(positions[:, None, :] - positions[None, :, :], axis=-1)
    shortest: dict[tuple[int, int], float] = {}
    for i, j in itertools.combinations(range(len(numbers)), 2):
        key = tuple(sorted((int(numbers[i]), int(numbers[j]))))
        shortest[key] = min(shortest.get(key, np.inf), float(distances[i, j]))
    return shortest


def training_support(structures: list[Structure]) -> dict[tuple[int, int], float]:
    """The shortest distance per element pair over all training structures, Å."""
    support: dict[tuple[int, int], float] = {}
    for structure in structures:
        for key, value in shortest_pair_distances(structure).items():
            support[key] = min(support.get(key, np.inf), value)
    return support


def outside_pairs(structure: Structure, support: dict[tuple[int, int], float]) -> list[tuple[int, int]]:
    """The element pairs whose shortest distance in ``structure`` is below the training support
    (a pair the training data never holds counts as outside)."""
    return [key for key, value in shortest_pair_distances(structure).items() if value < support.get(key, np.inf)]


def rmse(values: list[float]) -> float:
    return float(np.sqrt(np.mean(np.square(values)))) if values else float("nan")


def errors_by_support(structures, predictions, outside: list | None) -> tuple[dict[str, tuple[list, list]], list[float]]:
    """Residuals pooled by group: ``{"all" | "inside" | "outside": (energy errors, meV per
    structure; force component errors, meV/Å)}`` (``outside``: a truthy entry per structure that
    lies outside the support, or None for "all" alone), and each structure's force RMSE (meV/Å)."""
    groups: dict[str, tuple[list, list]] = {"all": ([], []), "inside": ([], []), "outside": ([], [])}
    per_structure_force_rmse = []
    for k, (structure, prediction) in enumerate(zip(structures, predictions, strict=True)):
        energy_error = 1000.0 * (float(prediction["energy"]) - float(structure.labels["energy"]))
        force_error = (1000.0 * (np.asarray(prediction["forces"]) - np.asarray(structure.labels["forces"]))).ravel().tolist()
        per_structure_force_rmse.append(rmse(force_error))
        for key in ["all"] if outside is None else ["all", "outside" if outside[k] else "inside"]:
            groups[key][0].append(energy_error)
            groups[key][1].extend(force_error)
    return groups, per_structure_force_rmse


def worst_share(per_structure_rmse: list[float], n_components: list[int], worst: list[int]) -> tuple[float, float]:
    """The share of the pooled squared error that the structures ``worst`` carry, and the RMSE
    pooled over the others (in the unit of ``per_structure_rmse``); ``per_structure_rmse`` and
    ``n_components`` per structure: its force RMSE (meV/Å) and number of force components
    (3 × atoms), or its absolute energy error (meV) and 1."""
    squared = np.square(per_structure_rmse) * np.asarray(n_components)
    rest = np.ones(len(squared), bool)
    rest[list(worst)] = False
    share = float(squared[~rest].sum() / squared.sum()) if squared.sum() > 0 else 0.0
    rest_rmse = float(np.sqrt(squared[rest].sum() / np.asarray(n_components)[rest].sum())) if rest.any() else float("nan")
    return share, rest_rmse


def worst_report(
    checkpoint: str, errors: list[float], n_components: list[int], count: int, outside: list, label: str, value_format: str
) -> list[str]:
    """Lines naming the ``count`` structures of largest ``abs(errors)`` (with the element pairs that put
    each outside the support) and the share of the squared error they carry, with the RMSE of the
    others. ``errors`` per structure: its force RMSE (``label`` "force RMSE", meV/Å) or its signed
    energy error ("energy error", meV); ``n_components`` as :func:`worst_share` takes it;
    ``value_format`` formats one error with its unit, e.g. ``"{:.1f} meV/Å"``."""
    worst = sorted(range(len(errors)), key=lambda i: -abs(errors[i]))[:count]
    if not worst:
        return []
    lines = []
    for index in worst:
        pairs = ", ".join(f"{chemical_symbols[a]}–{chemical_symbols[b]}" for a, b in outside[index]) or "inside"
        lines.append(f"{checkpoint}: structure {index}: {label} {value_format.format(errors[index])} ({pairs})")
    share, rest_rmse = worst_share(np.abs(errors).tolist(), n_components, worst)
    quantity, unit = label.split()[0], value_format.split()[-1]
    lines.append(
        f"{checkpoint}: these {len(worst)} carry {100 * share:.1f} % of the squared {quantity} error; "
        f"{quantity} RMSE of the other {len(errors) - len(worst)}: {rest_rmse:.1f} {unit}"
    )
    return lines


def rmse_row(name: str, groups: dict[str, tuple[list, list]], keys=("all", "inside", "outside")) -> str:
    """``| name | E RMSE / ... | F RMSE / ... |`` over ``keys`` of :func:`errors_by_support`'s groups."""
    energy = " / ".join(f"{rmse(groups[k][0]):.1f}" for k in keys)
    force = " / ".join(f"{rmse(groups[k][1]):.1f}" for k in keys)
    return f"| {name} | {energy} | {force} |"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("training_file")
    parser.add_argument("test_file")
    parser.add_argument("checkpoints", nargs="+")
    parser.add_argument("--worst", type=int, default=0, help="list each checkpoint's N structures of highest force RMSE and of largest energy error")
    parser.add_argument(
        "--also-trained-on", action="append", default=[], metavar="FILE",
        help="a further training file (e.g. an auxiliary molecule) whose distances join the support; repeatable",
    )
    args = parser.parse_args(argv)
    support = training_support([s for path in [args.training_file, *args.also_trained_on] for s in read_labelled(path)])
    test = read_labelled(args.test_file)
    outside = [outside_pairs(s, support) for s in test]
    n_components = [3 * len(s.numbers) for s in test]
    n_out = sum(bool(o) for o in outside)
    counts: dict[str, int] = {}
    for pairs in outside:
        for a, b in pairs:
            bound = f"< {support[(a, b)]:.3f} Å" if (a, b) in support else "not in the training file"
            name = f"{chemical_symbols[a]}–{chemical_symbols[b]} {bound}"
            counts[name] = counts.get(name, 0) + 1
    print(f"{len(test)} test structures, {n_out} outside the training support ({', '.join(f'{k}: {v}' for k, v in sorted(counts.items())) or 'none'})")
    print("| checkpoint | E RMSE all / inside / outside (meV per structure) | F RMSE all / inside / outside (meV/Å) |")
    print("|---|---|---|")
    worst_lines = []
    for checkpoint in args.checkpoints:
        potential = load_potential(checkpoint, dtype="float64")
        groups, force_rmse = errors_by_support(test, potential.predict(test, properties=["energy", "forces"]), outside)
        worst_lines += worst_report(checkpoint, force_rmse, n_components, args.worst, outside, "force RMSE", "{:.1f} meV/Å")
        worst_lines += worst_report(checkpoint, groups["all"][0], [1] * len(test), args.worst, outside, "energy error", "{:+.1f} meV")
        print(rmse_row(checkpoint, groups))
    if worst_lines:
        print("\n".join(worst_lines))


if __name__ == "__main__":
    main()
