"""Dataset statistics that fix a model's normalisation before training."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from atomistic.data.convert import Structure
from atomistic.data.graph import structure_edges
from atomistic.data.neighbors import neighbor_list


def energy_fit_structures(structures: Sequence[Structure]) -> list[Structure]:
    """The structures whose energies may set a model's energy statistics (E0s, readout shift):
    those with an energy label and a non-zero energy loss weight (``info["loss_weight_energy"]``,
    else ``info["loss_weight"]``, else 1). A file trained on with ``energy_weight: 0`` (forces
    from another DFT setup, whose energy zero differs) must not move the E0s of the others."""
    kept = []
    for s in structures:
        weight = s.info.get("loss_weight_energy", s.info.get("loss_weight", 1.0))
        if "energy" in s.labels and float(weight) != 0.0:
            kept.append(s)
    return kept


def least_squares_e0s(structures: Sequence[Structure], atomic_numbers: Sequence[int]) -> np.ndarray:
    """Per-element reference energies (eV) minimising Σ (E - Σ_i E0[z_i])² over the data."""
    index = {z: k for k, z in enumerate(atomic_numbers)}
    counts = np.zeros((len(structures), len(atomic_numbers)))
    energies = np.zeros(len(structures))
    for s_idx, s in enumerate(structures):
        if "energy" not in s.labels:
            raise ValueError(f"structure {s_idx} has no energy label")
        for z in s.numbers:
            counts[s_idx, index[int(z)]] += 1
        energies[s_idx] = s.labels["energy"]
    e0s, *_ = np.linalg.lstsq(counts, energies, rcond=None)
    present = counts.sum(axis=0) > 0
    e0s[~present] = 0.0
    return e0s


def mean_interaction_energy(structures: Sequence[Structure], atomic_numbers: Sequence[int], e0s: np.ndarray) -> float:
    """Mean of ``(E - Σ_i E0[z_i]) / N`` (eV/atom) over the structures with energies: the
    readout's shift, so that the network fits variations about it rather than a large constant
    (with isolated-atom E0s it is minus the cohesive energy per atom, several eV)."""
    index = {z: k for k, z in enumerate(atomic_numbers)}
    per_atom = [
        (s.labels["energy"] - sum(e0s[index[int(z)]] for z in s.numbers)) / len(s) for s in structures if "energy" in s.labels
    ]
    return float(np.mean(per_atom)) if per_atom else 0.0


def average_num_neighbors(
    structures: Sequence[Structure], cutoff: float, species_cutoffs: Mapping[int, float] | None = None
) -> float:
    """Mean number of neighbours per atom within ``cutoff`` (Å); with ``species_cutoffs``
    (atomic number → Å; unlisted elements ``cutoff``), a pair counts within the mean of its two
    elements' cutoffs, as the encoder's edges do."""
    atoms = sum(len(s) for s in structures)
    if not species_cutoffs:
        return sum(structure_edges(s, cutoff)[0].shape[1] for s in structures) / atoms
    edges = 0
    for s in structures:
        centre, neighbour, _, distances = neighbor_list(s.positions, s.cell, s.pbc, cutoff, with_distances=True)
        radius = np.array([species_cutoffs.get(int(z), cutoff) for z in s.numbers])
        edges += int(np.count_nonzero(distances < (radius[centre] + radius[neighbour]) / 2))
    return edges / atoms


def force_rms(structures: Sequence[Structure]) -> float:
    """Root-mean-square force component (eV/Å): the energy scale of the readout."""
    forces = [np.asarray(s.labels["forces"]).ravel() for s in structures if "forces" in s.labels]
    if not forces:
        return 1.0
    values = np.concatenate(forces)
    return float(np.sqrt(np.mean(values**2))) or 1.0


def force_rms_per_species(structures: Sequence[Structure], species: Sequence[int]) -> np.ndarray:
    """``[n_species]`` root-mean-square force component (eV/Å) on the atoms of each element:
    per-element readout scales. An element without force labels gets :func:`force_rms` of all."""
    pooled = force_rms(structures)
    sums = np.zeros(len(species))
    counts = np.zeros(len(species))
    index = {int(z): i for i, z in enumerate(species)}
    for s in structures:
        if "forces" not in s.labels:
            continue
        rows = np.array([index[int(z)] for z in s.numbers])
        squares = (np.asarray(s.labels["forces"], dtype=np.float64) ** 2).sum(axis=1)
        np.add.at(sums, rows, squares)
        np.add.at(counts, rows, 3)
    rms = np.sqrt(sums / np.maximum(counts, 1))
    return np.where((counts > 0) & (rms > 0), rms, pooled)


def tensor_scale(structures: Sequence[Structure], key: str) -> float:
    """Root-mean-square component of a crystal-tensor label over the data (its unit: GPa,
    C/m², or unitless; the dielectric tensor's vacuum part ``δ_ij`` removed): the output
    scale of that tensor head and of its loss."""
    values = [np.asarray(s.labels[key], dtype=np.float64) for s in structures if key in s.labels]
    if not values:
        return 1.0
    stacked = np.stack(values)
    if key == "dielectric_tensor":
        stacked = stacked - np.eye(3)
    return float(np.sqrt(np.mean(stacked**2))) or 1.0
