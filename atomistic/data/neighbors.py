"""Periodic neighbour lists (vesin), with per-direction periodicity.

vesin handles mixed boundaries (slabs, wires), skewed cells and cells smaller than the
cutoff (many periodic images of the same neighbour).
"""

from __future__ import annotations

import numpy as np
import vesin

# A box for directions without periodicity.  vesin ignores non-periodic box vectors for
# the search itself but needs a full-rank box; any vector spanning the missing direction works.
_PLACEHOLDER_LENGTH = 1.0


def _full_rank_box(cell: np.ndarray, pbc: np.ndarray) -> np.ndarray:
    """Replace the non-periodic lattice vectors by orthonormal ones spanning the rest of space."""
    if pbc.all():
        return cell
    box = np.array(cell, dtype=np.float64, copy=True)
    periodic = [box[k] for k in range(3) if pbc[k]]
    basis = []
    for v in periodic:
        basis.append(v / np.linalg.norm(v))
    # Gram-Schmidt against the periodic vectors to find the missing directions
    candidates = list(np.eye(3))
    for k in range(3):
        if pbc[k]:
            continue
        for c in candidates:
            w = c - sum(np.dot(c, b) * b for b in basis)
            if np.linalg.norm(w) > 1e-6:
                w = w / np.linalg.norm(w)
                basis.append(w)
                box[k] = w * _PLACEHOLDER_LENGTH
                break
    return box


def neighbor_list(
    positions: np.ndarray,
    cell: np.ndarray,
    pbc: np.ndarray,
    cutoff: float,
    *,
    with_distances: bool = False,
):
    """Full neighbour list within ``cutoff`` (Å), both directions of every pair.

    Args:
        positions: ``[n_atoms, 3]`` Å.
        cell: ``[3, 3]`` Å, rows are lattice vectors.
        pbc: ``[3]`` bool.
        cutoff: Å.

    Returns:
        ``centre [n_edges]``, ``neighbour [n_edges]``, ``shift [n_edges, 3]`` (integer lattice
        translations such that ``r_neighbour - r_centre + shift @ cell`` is the edge vector), and
        with ``with_distances`` also ``distances [n_edges]`` Å.  Self-pairs at zero shift never
        appear; an atom's own periodic images do when they are within the cutoff.
    """
    positions = np.ascontiguousarray(positions, dtype=np.float64)
    pbc = np.asarray(pbc, dtype=bool)
    if pbc.any():
        box = _full_rank_box(np.asarray(cell, dtype=np.float64), pbc)
    else:
        box = np.zeros((3, 3))
    calculator = vesin.NeighborList(cutoff=float(cutoff), full_list=True)
    periodic = [bool(p) for p in pbc]
    if with_distances:
        i, j, shifts, d = calculator.compute(positions, box, periodic, quantities="ijSd")
    else:
        i, j, shifts = calculator.compute(positions, box, periodic, quantities="ijS")
    order = np.lexsort((j, i))  # deterministic order: by centre, then neighbour
    i, j, shifts = i[order].astype(np.int64), j[order].astype(np.int64), shifts[order].astype(np.int64)
    if with_distances:
        return i, j, shifts, d[order]
    return i, j, shifts
