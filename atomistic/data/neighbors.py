"""Periodic neighbour lists (vesin), with per-direction periodicity.

vesin handles mixed boundaries (slabs, wires), skewed cells and cells smaller than the
cutoff (many periodic images of the same neighbour).  Its cell list (0.6) bins space at the
cutoff; past 10^5 bins it shrinks the bin counts in proportion, and a flat or elongated structure
(a 400 Å slab searched at 1 Å, two molecules 10^6 Å apart) then gets zero bins along one
direction, which kills the process with SIGFPE; a wire's search time grows as the fourth power
of its non-periodic extents.  So :func:`neighbor_list` searches in its own frame:

1. a slab or wire is turned so that its non-periodic directions are Cartesian axes, and atoms
   are wrapped into the cell along the periodic ones (the shifts are corrected afterwards);
2. empty gaps wider than twice the cutoff along non-periodic axes are closed to that width
   (no pair within the cutoff changes);
3. where the bins would still exceed :data:`MAX_CELLS`, the search runs at a larger radius and
   the pairs beyond the cutoff are dropped;
4. a slab or wire is searched as a crystal whose non-periodic directions repeat further apart
   than the structure plus the radius;
5. a structure whose search would visit more than :data:`MAX_CELL_VISITS` bins or test more
   than :data:`MAX_CANDIDATE_PAIRS` pairs (a periodic lattice vector 10^7 Å long beside two of
   3 Å, searched at 1 Å) is refused with :class:`NeighborSearchError`.
"""

from __future__ import annotations

import math

import numpy as np
import vesin

MAX_CELLS = 50_000
"""The most cell-list bins a search may use (half the count past which vesin rescales them)."""

MAX_CANDIDATE_PAIRS = 5e7
"""The most pairs a search may be estimated to test before the structure is refused (100 000 atoms
of a dense solid searched at 5 Å test about 10^7)."""

MAX_CELL_VISITS = 2e8
"""The most (bin, neighbouring bin) visits a search may make before the structure is refused
(3·10^7 visits took 0.4 s on a 2-core CPU; a 100 000-atom solid searched at 1 Å makes about
10^6 by this count)."""

_GAP_IN_CUTOFFS = 2.0  # empty gaps along a non-periodic direction are closed to this many cutoffs


class NeighborSearchError(ValueError):
    """The structure is too large or too elongated for the neighbour search; ``field`` names the
    input that makes it so (``cell`` or ``positions``) and ``reason`` says why."""

    def __init__(self, field: str, reason: str):
        super().__init__(f"field '{field}': {reason}")
        self.field = field
        self.reason = reason


# A box for directions without periodicity.  vesin ignores non-periodic box vectors for
# the search itself but needs a full-rank box; any vector spanning the missing direction works.
_PLACEHOLDER_LENGTH = 1.0


def _orthonormal_frame(cell: np.ndarray, pbc: np.ndarray) -> np.ndarray:
    """``[3, 3]`` orthonormal rows: at the periodic indices a basis of the periodic vectors' span
    (Gram-Schmidt in their order), at the others directions orthogonal to it (``pbc`` not all
    true)."""
    frame = np.empty((3, 3))
    basis: list[np.ndarray] = []
    for k in np.flatnonzero(pbc):
        w = cell[k] - sum(np.dot(cell[k], b) * b for b in basis)
        frame[k] = w / np.linalg.norm(w)
        basis.append(frame[k])
    candidates = list(np.eye(3))  # extend the basis to the missing directions
    for k in np.flatnonzero(~pbc):
        for c in candidates:
            w = c - sum(np.dot(c, b) * b for b in basis)
            if np.linalg.norm(w) > 1e-6:
                frame[k] = w / np.linalg.norm(w)
                basis.append(frame[k])
                break
    return frame


def _full_rank_box(cell: np.ndarray, pbc: np.ndarray) -> np.ndarray:
    """Replace the non-periodic lattice vectors by orthonormal ones spanning the rest of space."""
    if pbc.all():
        return cell
    box = np.array(cell, dtype=np.float64, copy=True)
    box[~pbc] = _orthonormal_frame(box, pbc)[~pbc] * _PLACEHOLDER_LENGTH
    return box


def _search_frame(cell: np.ndarray, pbc: np.ndarray) -> tuple[np.ndarray | None, np.ndarray]:
    """The frame the search runs in: ``axes [3, 3]`` (orthonormal rows, the new Cartesian axes;
    ``None`` when every or no direction is periodic and the input frame serves) and the box in
    that frame, whose periodic rows are the lattice vectors and whose non-periodic rows are unit
    Cartesian axes orthogonal to them (zeros when nothing is periodic).  A slab or wire is turned
    so that its non-periodic directions are Cartesian axes, which is what vesin bins them along."""
    if pbc.all():
        return None, cell
    if not pbc.any():
        return None, np.zeros((3, 3))
    axes = _orthonormal_frame(cell, pbc)
    box = cell @ axes.T
    box[~pbc] = np.eye(3)[~pbc]
    return axes, box


def _close_empty_gaps(positions: np.ndarray, pbc: np.ndarray, cutoff: float) -> np.ndarray:
    """``positions [n_atoms, 3]`` (Å, in the search frame) with every empty gap wider than
    ``2 * cutoff`` along each non-periodic Cartesian axis closed to that width by translating the
    atoms beyond it.

    Atoms on the same side of every gap move together, so their relative vectors are unchanged;
    atoms on opposite sides of a gap stay more than ``2 * cutoff`` apart along that axis, which is
    orthogonal to the periodic lattice vectors, so no periodic image comes closer either.  A
    structure with no such gap is returned unchanged."""
    width = _GAP_IN_CUTOFFS * cutoff
    for k in np.flatnonzero(~pbc):
        along = positions[:, k]
        order = np.argsort(along, kind="stable")
        excess = np.clip(np.diff(along[order]) - width, 0.0, None)
        if not excess.any():
            continue
        shift = np.empty_like(along)
        shift[order] = np.concatenate([[0.0], np.cumsum(excess)])
        positions = positions.copy()
        positions[:, k] -= shift
    return positions


def _widths(positions: np.ndarray, box: np.ndarray, pbc: np.ndarray) -> list[float]:
    """What the cell list divides into bins, per direction (Å, in the search frame): the distance
    between the periodic box's faces, or the atoms' extent along a non-periodic axis."""
    widths = (positions.max(axis=0) - positions.min(axis=0)).tolist()
    if pbc.any():
        normals = np.cross(box[[1, 2, 0]], box[[2, 0, 1]])
        faces = abs(np.linalg.det(box)) / np.linalg.norm(normals, axis=1)
        for k in np.flatnonzero(pbc):
            widths[k] = float(faces[k])
    return widths


def _bins(widths: list[float], radius: float) -> float:
    return math.prod(max(1.0, math.floor(w / radius)) for w in widths)


def _slab_or_wire(pbc: np.ndarray) -> bool:
    return bool(pbc.any() and not pbc.all())


def _padded(widths: list[float], pbc: np.ndarray, radius: float) -> list[float]:
    """The widths the search bins: a slab's or wire's non-periodic extents become periods longer
    by ``2 * radius + 1`` Å (no periodic image comes within the radius); others as they are."""
    if not _slab_or_wire(pbc):
        return widths
    return [w if p else w + 2.0 * radius + 1.0 for w, p in zip(widths, pbc.tolist(), strict=True)]


def _search_radius(n_atoms: int, widths: list[float], pbc: np.ndarray, cutoff: float) -> float:
    """The smallest radius ≥ ``cutoff`` (Å, in steps of 25 %) at which the cell list over boxes
    of ``widths`` has at most :data:`MAX_CELLS` bins; raises :class:`NeighborSearchError` where
    that search would cost too much."""
    radius = cutoff
    while _bins(_padded(widths, pbc, radius), radius) > MAX_CELLS:
        radius *= 1.25
    widths = _padded(widths, pbc, radius)
    visits, pairs = _search_cost(n_atoms, widths, pbc | _slab_or_wire(pbc), radius)
    if visits > MAX_CELL_VISITS or pairs > MAX_CANDIDATE_PAIRS:
        sizes = " x ".join(f"{w:.4g}" for w in widths)
        raise NeighborSearchError(
            "cell" if pbc.any() else "positions",
            f"the structure is {sizes} Å across{'' if pbc.all() else ' (empty non-periodic gaps closed)'}, too elongated "
            f"for a neighbour search at {cutoff:g} Å (about {visits:.2g} bin visits and {pairs:.2g} candidate pairs)",
        )
    return radius


def _search_cost(n_atoms: int, widths: list[float], pbc: np.ndarray, radius: float) -> tuple[float, float]:
    """Rough cost of a cell-list search at ``radius`` (Å) over a box of ``widths`` (Å): the
    (bin, neighbouring bin) visits, and the candidate pairs for atoms spread evenly over the box
    (each atom meets its own periodic images within the radius and the share of the others that
    the search window covers)."""
    visits, images, share = 1.0, 1.0, 1.0
    for width, periodic in zip(widths, pbc.tolist(), strict=True):
        width = max(width, 1e-12) if periodic else max(width, radius)  # a flat non-periodic extent is one bin
        bins = max(1.0, math.floor(width / radius))
        visits *= bins * (2.0 * math.ceil(radius * bins / width) + 1.0)
        reach = 2.0 * radius / width
        images *= max(reach, 1.0) if periodic else 1.0
        share *= min(reach, 1.0)
    return visits, n_atoms * images * max(1.0, n_atoms * share)


def wrap_positions(positions: np.ndarray, cell: np.ndarray, pbc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``positions [n_atoms, 3]`` (Å) moved into the cell along its periodic directions, and the
    lattice translations taken off them: ``image [n_atoms, 3]`` int64 with
    ``wrapped = positions - image @ cell`` (zero along non-periodic directions)."""
    positions = np.asarray(positions, dtype=np.float64)
    pbc = np.asarray(pbc, dtype=bool)
    image = np.zeros(positions.shape, dtype=np.int64)
    if not pbc.any():
        return positions, image
    cell = np.asarray(cell, dtype=np.float64)
    fractional = positions @ np.linalg.inv(_full_rank_box(cell, pbc))
    image[:, pbc] = np.floor(fractional[:, pbc]).astype(np.int64)
    return (positions - image @ cell if image.any() else positions), image


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

    Raises:
        NeighborSearchError: the search would exceed ``MAX_CELL_VISITS`` or
            ``MAX_CANDIDATE_PAIRS`` (see the module's docstring).
    """
    _, image, i, j, shifts, distances = _search(positions, cell, pbc, cutoff, with_distances)
    if image.any():  # shifts for the positions as given
        shifts = shifts - image[j] + image[i]
    if with_distances:
        return i, j, shifts, distances
    return i, j, shifts


def wrapped_neighbor_list(
    positions: np.ndarray, cell: np.ndarray, pbc: np.ndarray, cutoff: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The atoms wrapped into the cell (:func:`wrap_positions`) and their full neighbour list.

    Returns:
        ``wrapped [n_atoms, 3]`` Å, ``centre [n_edges]``, ``neighbour [n_edges]`` and
        ``shift [n_edges, 3]`` such that ``wrapped[neighbour] - wrapped[centre] + shift @ cell``
        is the edge vector; the same edges, in the same order, as :func:`neighbor_list`.

    Raises:
        NeighborSearchError: as :func:`neighbor_list`.
    """
    wrapped, _, i, j, shifts, _ = _search(positions, cell, pbc, cutoff, False)
    return wrapped, i, j, shifts


def _search(positions: np.ndarray, cell: np.ndarray, pbc: np.ndarray, cutoff: float, with_distances: bool):
    """The search behind both lists: ``wrapped [n_atoms, 3]``, ``image [n_atoms, 3]`` (as from
    :func:`wrap_positions`), ``centre``, ``neighbour``, ``shift`` for the wrapped positions, sorted
    by centre then neighbour, and ``distances`` (``None`` unless asked for)."""
    positions = np.ascontiguousarray(positions, dtype=np.float64)
    cell = np.asarray(cell, dtype=np.float64)
    pbc = np.asarray(pbc, dtype=bool)
    axes, box = _search_frame(cell, pbc)
    wrapped, image = wrap_positions(positions, cell, pbc)  # image: translations taken off the atoms
    searched = wrapped if axes is None else wrapped @ axes.T
    widths = _widths(searched, box, pbc)
    if _bins(widths, cutoff) > MAX_CELLS and not pbc.all():
        searched = _close_empty_gaps(searched, pbc, cutoff)
        widths = _widths(searched, box, pbc)
    radius = _search_radius(len(positions), widths, pbc, cutoff)
    calculator = vesin.NeighborList(cutoff=float(radius), full_list=True)
    periodic = [bool(p) for p in pbc]
    if _slab_or_wire(pbc):
        # vesin's search time grows as the fourth power of a wire's non-periodic extents
        # (48 atoms 160 Å across: 40 s), so slabs and wires are searched as crystals whose
        # non-periodic directions repeat further apart than the structure plus the radius
        padded = _padded(widths, pbc, radius)
        searched = searched.copy()
        box = box.copy()
        for k in np.flatnonzero(~pbc):
            searched[:, k] -= searched[:, k].min()
            box[k] = np.eye(3)[k] * padded[k]
        periodic = [True, True, True]
    searched = np.ascontiguousarray(searched)
    distances = None
    if with_distances or radius > cutoff:
        i, j, shifts, distances = calculator.compute(searched, box, periodic, quantities="ijSd")
        if radius > cutoff:  # only the pairs within the cutoff
            within = distances < cutoff
            i, j, shifts, distances = i[within], j[within], shifts[within], distances[within]
    else:
        i, j, shifts = calculator.compute(searched, box, periodic, quantities="ijS")
    order = np.lexsort((j, i))  # deterministic order: by centre, then neighbour
    i, j, shifts = i[order].astype(np.int64), j[order].astype(np.int64), shifts[order].astype(np.int64)
    if with_distances:
        distances = distances[order]
    return wrapped, image, i, j, shifts, distances
