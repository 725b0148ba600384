"""Reusable physical checks that every model must pass.

Each ``check_*`` function measures a discrepancy and returns it (a dict of floats), and each
``assert_*`` wrapper compares it with the tolerance for the model's dtype from
:data:`TOLERANCES`.  The tests run them on every model configuration; users can run them on
their own checkpoints.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from ase import Atoms
from ase.neighborlist import neighbor_list

from atomistic import keys

# absolute tolerances (eV, eV/Å, eV/Å³) per dtype
TOLERANCES = {
    torch.float64: {
        "energy": 1e-9, "forces": 1e-9, "stress": 1e-10, "fd": 1e-6, "fd_step": 1e-5,
        "extensive": 1e-8, "smooth": 1e-6,
    },
    # float32: energies carry ~1e-7 relative rounding, so finite differences need larger steps
    torch.float32: {
        "energy": 1e-5, "forces": 1e-4, "stress": 1e-5, "fd": 2e-2, "fd_step": 1e-2,
        "extensive": 1e-5, "smooth": 1e-4,
    },
}


def tolerances(potential) -> dict[str, float]:
    return TOLERANCES[potential.dtype]


def random_rotation(rng: np.random.Generator, reflection: bool = False) -> np.ndarray:
    """A uniformly random 3x3 rotation (times -1 when ``reflection``)."""
    q, r = np.linalg.qr(rng.normal(size=(3, 3)))
    q = q * np.sign(np.diag(r))
    if np.linalg.det(q) < 0:
        q[:, 0] = -q[:, 0]
    return -q if reflection else q


def random_periodic_structure(
    numbers: Sequence[int], n_atoms: int = 8, seed: int = 0, density: float = 0.05, skew: float = 0.3
) -> Atoms:
    """Random atoms (no pair closer than 1.8 Å) in a random skewed periodic cell.

    ``density`` is in atoms/Å³; ``skew`` the size of the random off-diagonal cell components.
    """
    rng = np.random.default_rng(seed)
    length = (n_atoms / density) ** (1 / 3)
    cell = length * (np.eye(3) + skew * rng.uniform(-1, 1, size=(3, 3)))
    if np.linalg.det(cell) < 0:
        cell[0] = -cell[0]
    atoms = Atoms(numbers=rng.choice(list(numbers), size=n_atoms), cell=cell, pbc=True)
    positions: list[np.ndarray] = []
    while len(positions) < n_atoms:
        candidate = rng.uniform(0, 1, size=3) @ cell
        trial = Atoms(positions=[*positions, candidate], cell=cell, pbc=True)
        if len(positions) == 0 or trial.get_distances(len(positions), list(range(len(positions))), mic=True).min() > 1.8:
            positions.append(candidate)
    atoms.positions = np.array(positions)
    return atoms


def _predict(potential, atoms, properties=(keys.ENERGY, keys.FORCES, keys.STRESS)):
    return potential.predict(atoms, properties=properties)


def check_rotation(potential, atoms: Atoms, rotation: np.ndarray) -> dict[str, float]:
    """Energy invariant, forces and stress rotate: max deviations (eV, eV/Å, eV/Å³)."""
    rotated = atoms.copy()
    rotated.positions = atoms.positions @ rotation.T
    rotated.cell = atoms.cell.array @ rotation.T
    a, b = _predict(potential, [atoms, rotated])
    out = {
        "energy": abs(b[keys.ENERGY] - a[keys.ENERGY]),
        "forces": float(np.abs(b[keys.FORCES] - a[keys.FORCES] @ rotation.T).max()),
    }
    if keys.STRESS in a:
        out["stress"] = float(np.abs(b[keys.STRESS] - rotation @ a[keys.STRESS] @ rotation.T).max())
    return out


def check_translation(potential, atoms: Atoms, shift: np.ndarray) -> dict[str, float]:
    moved = atoms.copy()
    moved.positions = atoms.positions + shift
    a, b = _predict(potential, [atoms, moved])
    return {
        "energy": abs(b[keys.ENERGY] - a[keys.ENERGY]),
        "forces": float(np.abs(b[keys.FORCES] - a[keys.FORCES]).max()),
    }


def check_permutation(potential, atoms: Atoms, seed: int = 0) -> dict[str, float]:
    perm = np.random.default_rng(seed).permutation(len(atoms))
    permuted = atoms[perm]
    a, b = _predict(potential, [atoms, permuted])
    return {
        "energy": abs(b[keys.ENERGY] - a[keys.ENERGY]),
        "forces": float(np.abs(b[keys.FORCES] - a[keys.FORCES][perm]).max()),
    }


def check_batch_consistency(potential, structures: Sequence[Atoms]) -> dict[str, float]:
    """Batched prediction equals one-at-a-time prediction."""
    batched = _predict(potential, list(structures))
    worst = {"energy": 0.0, "forces": 0.0, "stress": 0.0}
    for atoms, b in zip(structures, batched, strict=True):
        (single,) = _predict(potential, atoms)
        worst["energy"] = max(worst["energy"], abs(b[keys.ENERGY] - single[keys.ENERGY]))
        worst["forces"] = max(worst["forces"], float(np.abs(b[keys.FORCES] - single[keys.FORCES]).max()))
        if keys.STRESS in single:
            worst["stress"] = max(worst["stress"], float(np.abs(b[keys.STRESS] - single[keys.STRESS]).max()))
    return worst


def check_forces_finite_difference(potential, atoms: Atoms, step: float = 1e-4, n_components: int = 6, seed: int = 0) -> dict[str, float]:
    """Central finite differences of the energy against the analytic forces (eV/Å)."""
    rng = np.random.default_rng(seed)
    (ref,) = _predict(potential, atoms, (keys.ENERGY, keys.FORCES))
    worst = 0.0
    for _ in range(n_components):
        i, k = int(rng.integers(len(atoms))), int(rng.integers(3))
        plus, minus = atoms.copy(), atoms.copy()
        plus.positions[i, k] += step
        minus.positions[i, k] -= step
        e_plus, e_minus = (r[keys.ENERGY] for r in _predict(potential, [plus, minus], (keys.ENERGY,)))
        numeric = -(e_plus - e_minus) / (2 * step)
        worst = max(worst, abs(numeric - ref[keys.FORCES][i, k]))
    return {"forces": worst}


def check_stress_finite_difference(potential, atoms: Atoms, step: float = 1e-5) -> dict[str, float]:
    """``(1/V) dE/dε`` by central differences of symmetric strains against the analytic stress."""
    (ref,) = _predict(potential, atoms)
    volume = atoms.cell.volume
    worst = 0.0
    for a in range(3):
        for b in range(a, 3):
            energies = []
            for sign in (1, -1):
                strain = np.zeros((3, 3))
                strain[a, b] += 0.5 * sign * step
                strain[b, a] += 0.5 * sign * step
                deformed = atoms.copy()
                deformed.set_cell(atoms.cell.array @ (np.eye(3) + strain), scale_atoms=True)
                energies.append(_predict(potential, deformed, (keys.ENERGY,))[0][keys.ENERGY])
            numeric = (energies[0] - energies[1]) / (2 * step) / volume
            worst = max(worst, abs(numeric - ref[keys.STRESS][a, b]))
    return {"stress": worst}


def check_supercell_extensivity(potential, atoms: Atoms, repeat=(2, 2, 2)) -> dict[str, float]:
    """Relative deviation of E(supercell) from n_cells · E(cell)."""
    n = int(np.prod(repeat))
    a, b = _predict(potential, [atoms, atoms.repeat(repeat)], (keys.ENERGY,))
    return {"extensive": abs(b[keys.ENERGY] - n * a[keys.ENERGY]) / max(abs(n * a[keys.ENERGY]), 1e-12)}


def species_pair_cutoffs(potential) -> dict[tuple[int, int], float]:
    """The cutoff (Å) of each unordered pair of the potential's elements where the encoder
    sets one per pair (``species_cutoffs``); else the first element's self-pair at the
    potential's cutoff."""
    pairs = potential.pair_cutoffs()
    if len(set(pairs.values())) == 1 and max(pairs.values()) == potential.cutoff:
        first = potential.atomic_numbers[0]
        return {(first, first): potential.cutoff}
    return pairs


def check_cutoff_smoothness(
    potential, numbers=(14, 14), delta: float = 1e-4, cutoff: float | None = None
) -> dict[str, float]:
    """A dimer just inside and just outside the cutoff (the potential's, or ``cutoff`` Å: a
    species pair's own): energy and force jumps (eV, eV/Å) at a separation ``2 delta`` and
    at ``2 delta / 10``.

    A continuous force shrinks its jump with ``delta`` (linearly for a C¹ cutoff such as
    XPLOR, quadratically for the polynomial envelope); a discontinuous one does not.
    """
    cutoff = potential.cutoff if cutoff is None else cutoff
    jumps = {}
    for label, d in (("", delta), ("_small", delta / 10)):
        inside = Atoms(numbers=list(numbers), positions=[[0, 0, 0], [cutoff - d, 0, 0]])
        outside = Atoms(numbers=list(numbers), positions=[[0, 0, 0], [cutoff + d, 0, 0]])
        a, b = _predict(potential, [inside, outside], (keys.ENERGY, keys.FORCES))
        jumps[f"energy_jump{label}"] = abs(a[keys.ENERGY] - b[keys.ENERGY])
        jumps[f"force_jump{label}"] = float(np.abs(a[keys.FORCES] - b[keys.FORCES]).max())
    return jumps


def check_isolated_atoms(potential) -> dict[str, float]:
    """Each supported element alone: |E - (E0 + shift)| (eV), max over elements."""
    worst = 0.0
    for z in potential.atomic_numbers:
        (r,) = _predict(potential, Atoms(numbers=[z], positions=[[0.0, 0.0, 0.0]]), (keys.ENERGY, keys.FORCES))
        worst = max(worst, abs(r[keys.ENERGY] - potential.reference_energy(z)))
    return {"energy": worst}


def _assert_within(measured: dict[str, float], limits: dict[str, float], what: str) -> None:
    failed = {k: (v, limits[k]) for k, v in measured.items() if not v <= limits[k]}
    if failed:
        details = ", ".join(f"{k}: {v:.3e} > {lim:.1e}" for k, (v, lim) in failed.items())
        raise AssertionError(f"{what} failed: {details}")


def assert_potential_physics(potential, atoms: Atoms, seed: int = 0, reflection: bool | None = None) -> None:
    """Run every check on one periodic structure and raise with a summary on failure.

    Reflections are checked for models whose irreps carry parity (``reflection=None`` asks the
    encoder); a model with parity off is only invariant under proper rotations.
    """
    if reflection is None:
        reflection = potential.has_parity
    tol = tolerances(potential)
    rng = np.random.default_rng(seed)
    scale = max(1.0, abs(_predict(potential, atoms, (keys.ENERGY,))[0][keys.ENERGY]))
    e_tol = tol["energy"] * scale
    limits = {"energy": e_tol, "forces": tol["forces"], "stress": tol["stress"]}
    _assert_within(check_rotation(potential, atoms, random_rotation(rng)), limits, "rotation equivariance")
    if reflection:
        _assert_within(check_rotation(potential, atoms, random_rotation(rng, reflection=True)), limits, "reflection equivariance")
    _assert_within(check_translation(potential, atoms, rng.normal(size=3) * 3), limits, "translation invariance")
    _assert_within(check_permutation(potential, atoms, seed), limits, "permutation invariance")
    _assert_within(
        check_forces_finite_difference(potential, atoms, step=tol["fd_step"]), {"forces": tol["fd"]}, "forces = -dE/dr"
    )
    _assert_within(
        check_stress_finite_difference(potential, atoms, step=tol["fd_step"] / 10),
        {"stress": tol["fd"] / 10},
        "stress = (1/V) dE/dstrain",
    )
    _assert_within(check_supercell_extensivity(potential, atoms), {"extensive": tol["extensive"]}, "supercell extensivity")
    for pair, cutoff in species_pair_cutoffs(potential).items():
        jumps = check_cutoff_smoothness(potential, pair, cutoff=cutoff)
        _assert_within(
            {"energy_jump": jumps["energy_jump"], "force_jump_small": jumps["force_jump_small"]},
            {"energy_jump": tol["smooth"], "force_jump_small": 0.2 * jumps["force_jump"] + tol["smooth"]},
            f"smoothness at the {pair} cutoff ({cutoff} Å)",
        )
    if potential.isolated_atom_is_reference:
        _assert_within(check_isolated_atoms(potential), {"energy": tol["energy"] * 10}, "isolated atom == E0")


# --- a known order-3 target: the learnability check of the piezoelectric head ---------------

PIEZO_CHARGE = {13: 1.0, 29: -0.7, 79: 0.4}  # centre factor
PIEZO_WEIGHT = {13: 1.0, 29: 2.0, 79: 0.5}  # neighbour factor


def analytic_piezo(atoms: Atoms, cutoff: float = 4.0) -> np.ndarray:
    """A polar order-3 tensor, symmetric in its last two indices, that depends on species and
    geometry: mean over atoms a of q(Z_a) Σ_b w(Z_b) φ(r_ab) [u_i u_j u_k + ½ u_i δ_jk]."""
    i, j, d, r = neighbor_list("ijdD", atoms, cutoff)
    u = r / d[:, None]
    phi = np.exp(-((d / 2.0) ** 2)) * (1 - d / cutoff) ** 2
    z = atoms.numbers
    weight = np.array([PIEZO_CHARGE[z[a]] * PIEZO_WEIGHT[z[b]] for a, b in zip(i, j, strict=True)]) * phi
    tensor = np.einsum("e,ei,ej,ek->ijk", weight, u, u, u) + 0.5 * np.einsum("e,ei,jk->ijk", weight, u, np.eye(3))
    return tensor / len(atoms)


def analytic_piezo_frames(n: int, seed: int) -> list[Atoms]:
    """``n`` random Al/Cu/Au cells labelled with :func:`analytic_piezo` in ``info``: fcc
    conventional cells (4 atoms) or their 2×1×1 supercells, random species on every site,
    a random ±4 % strain and 0.25 Å rattle, so inversion symmetry is broken."""
    from ase.build import bulk

    rng = np.random.default_rng(seed)
    frames = []
    for _ in range(n):
        atoms = bulk("Cu", "fcc", a=float(rng.uniform(3.8, 4.3)), cubic=True).repeat((1 + int(rng.integers(2)), 1, 1))
        atoms.numbers = rng.choice([13, 29, 79], size=len(atoms))
        strain = np.eye(3) + rng.normal(scale=0.04, size=(3, 3))
        atoms.set_cell(atoms.cell.array @ strain.T, scale_atoms=True)
        atoms.positions += rng.normal(scale=0.25, size=atoms.positions.shape)
        atoms.info["piezoelectric_tensor"] = analytic_piezo(atoms).reshape(-1)
        frames.append(atoms)
    return frames
