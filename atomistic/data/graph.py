"""Batches of structures as one graph: ``AtomicGraph = dict[str, Tensor]``.

Atoms of all systems are concatenated; ``system_idx`` says which system each atom belongs
to and edge indices are offset accordingly.  Every field has a scope (per atom, per edge,
per system, see :mod:`atomistic.keys`), which is all that :func:`split_results` needs.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import torch

from atomistic import keys
from atomistic.data.convert import Structure
from atomistic.data.neighbors import neighbor_list, wrapped_neighbor_list

AtomicGraph = dict[str, torch.Tensor]


class SpeciesMap:
    """Maps atomic numbers onto a model's species indices ``0 .. n_species - 1``."""

    def __init__(self, atomic_numbers: Sequence[int]):
        self.atomic_numbers = tuple(int(z) for z in atomic_numbers)
        if len(set(self.atomic_numbers)) != len(self.atomic_numbers):
            raise ValueError(f"duplicate species in {self.atomic_numbers}")
        self._lookup = np.full(119, -1, dtype=np.int64)
        self._lookup[list(self.atomic_numbers)] = np.arange(len(self.atomic_numbers))

    def __len__(self) -> int:
        return len(self.atomic_numbers)

    @property
    def lookup(self) -> np.ndarray:
        """``[119]`` int64: the species index of each atomic number, -1 where unsupported."""
        return self._lookup

    def index(self, numbers: np.ndarray) -> np.ndarray:
        idx = self._lookup[numbers]
        if (idx < 0).any():
            raise ValueError(f"atomic numbers {sorted(set(numbers[idx < 0].tolist()))} are not in the species list")
        return idx


def structure_edges(structure: Structure, cutoff: float) -> tuple[np.ndarray, np.ndarray]:
    """``edge_index [2, n_edges]`` and ``edge_shift [n_edges, 3]`` for one structure, at its
    positions as given."""
    i, j, shifts = neighbor_list(structure.positions, structure.cell, structure.pbc, cutoff)
    return np.stack([i, j]), shifts


def model_frame(structure: Structure, cutoff: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The structure's positions as the model sees them, and its edges within ``cutoff`` (Å).

    In float64, atoms are wrapped into the cell along its periodic directions (the neighbour
    search wraps them anyway, and its shifts are for the wrapped atoms) and the structure is
    centred on the origin.  Energies, forces and stress are unchanged by both, but a model in
    float32 would otherwise lose digits to large coordinates: a molecule 10^4 Å from the origin
    got forces wrong by ~40 meV/Å.

    Returns:
        ``positions [n_atoms, 3]`` Å, ``edge_index [2, n_edges]`` and ``edge_shift [n_edges, 3]``:
        the edges of :func:`structure_edges`, in the same order, with the same edge vectors
        ``positions[j] - positions[i] + shift @ cell``.
    """
    wrapped, i, j, shifts = wrapped_neighbor_list(structure.positions, structure.cell, structure.pbc, cutoff)
    return wrapped - wrapped.mean(axis=0), np.stack([i, j]), shifts


def build_graph(
    structures: Sequence[Structure],
    cutoff: float,
    species: SpeciesMap,
    *,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str = "cpu",
    with_labels: bool = False,
) -> AtomicGraph:
    """One :data:`AtomicGraph` for a batch of (validated) structures.

    With ``with_labels``, the reference ``energy`` [n_systems], ``forces`` [n_atoms, 3] and
    ``stress`` [n_systems, 3, 3] are added under ``ref_<key>`` with masks ``has_<key>``.
    """
    positions, numbers, system_idx, cells, pbcs, n_atoms = [], [], [], [], [], []
    edge_index, edge_shift = [], []
    offset = 0
    for s_idx, s in enumerate(structures):
        local_positions, edges, shifts = model_frame(s, cutoff)
        edge_index.append(edges + offset)
        edge_shift.append(shifts)
        positions.append(local_positions)
        numbers.append(s.numbers)
        system_idx.append(np.full(len(s), s_idx, dtype=np.int64))
        cells.append(s.cell)
        pbcs.append(s.pbc)
        n_atoms.append(len(s))
        offset += len(s)
    numbers_np = np.concatenate(numbers)
    graph: AtomicGraph = {
        keys.POSITIONS: torch.as_tensor(np.concatenate(positions), dtype=dtype),
        keys.ATOMIC_NUMBERS: torch.as_tensor(numbers_np, dtype=torch.long),
        keys.SPECIES_INDEX: torch.as_tensor(species.index(numbers_np), dtype=torch.long),
        keys.SYSTEM_IDX: torch.as_tensor(np.concatenate(system_idx), dtype=torch.long),
        keys.CELL: torch.as_tensor(np.stack(cells), dtype=dtype),
        keys.PBC: torch.as_tensor(np.stack(pbcs), dtype=torch.bool),
        keys.N_ATOMS: torch.as_tensor(n_atoms, dtype=torch.long),
        keys.EDGE_INDEX: torch.as_tensor(np.concatenate(edge_index, axis=1), dtype=torch.long),
        keys.EDGE_SHIFT: torch.as_tensor(np.concatenate(edge_shift), dtype=dtype),
    }
    if with_labels:
        graph.update(_labels(structures, dtype))
    return {k: v.to(device) for k, v in graph.items()}


def _labels(structures: Sequence[Structure], dtype: torch.dtype) -> AtomicGraph:
    energy = [s.labels.get("energy", np.nan) for s in structures]
    forces = [np.asarray(s.labels.get("forces", np.full((len(s), 3), np.nan))) for s in structures]
    stress = [np.asarray(s.labels.get("stress", np.full((3, 3), np.nan))) for s in structures]
    out = {
        # float64 whatever the model's dtype: total energies of thousands of eV lose ~1 meV in
        # float32, and the model's energies are float64 too (heads.energy.reference_plus_network)
        "ref_energy": torch.as_tensor(np.asarray(energy, dtype=np.float64), dtype=torch.float64),
        "ref_forces": torch.as_tensor(np.concatenate(forces), dtype=dtype),
        "ref_stress": torch.as_tensor(np.stack(stress), dtype=dtype),
    }
    for key in ("energy", "forces", "stress"):
        has = torch.as_tensor([key in s.labels for s in structures], dtype=torch.bool)
        out[f"has_{key}"] = has
        out[f"ref_{key}"] = torch.nan_to_num(out[f"ref_{key}"], nan=0.0)
    for key, shape in keys.TENSOR_SHAPES.items():
        if any(key in s.labels for s in structures):  # crystal tensors: only where a file has them
            values = [np.asarray(s.labels[key]) if key in s.labels else np.zeros(shape) for s in structures]
            out[f"ref_{key}"] = torch.as_tensor(np.stack(values), dtype=dtype)
            out[f"has_{key}"] = torch.as_tensor([key in s.labels for s in structures], dtype=torch.bool)
    return out


def split_results(results: dict[str, torch.Tensor], graph: AtomicGraph) -> list[dict[str, np.ndarray]]:
    """Split batched outputs into one dict of numpy arrays per system."""
    n_atoms = graph[keys.N_ATOMS].tolist()
    per_system: list[dict[str, np.ndarray]] = [{} for _ in n_atoms]
    for key, value in results.items():
        value = value.detach().cpu().numpy()
        if key in keys.PER_ATOM_KEYS:
            chunks = np.split(value, np.cumsum(n_atoms)[:-1])
        elif key in keys.PER_SYSTEM_KEYS:
            chunks = list(value)
        else:
            continue
        for out, chunk in zip(per_system, chunks, strict=True):
            out[key] = chunk
    return per_system


def batches_by_atoms(structures: Sequence[Structure], max_atoms: int) -> Iterator[list[int]]:
    """Indices of consecutive structures grouped so each group holds at most ``max_atoms`` atoms
    (a single larger structure forms a group of its own)."""
    group: list[int] = []
    count = 0
    for i, s in enumerate(structures):
        if group and count + len(s) > max_atoms:
            yield group
            group, count = [], 0
        group.append(i)
        count += len(s)
    if group:
        yield group
