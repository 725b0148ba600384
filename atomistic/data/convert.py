"""Validate and canonicalise atomic structures.

This module is the only place where input conventions are translated: every entry
point (Python API, ASE calculator, CLI, server) turns whatever it was given into
:class:`Structure` objects here.  A :class:`Structure` is plain numpy data in the
project's units (Å, eV, eV/Å, eV/Å³ with ASE's stress sign).
"""

from __future__ import annotations

import dataclasses
import io
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from ase import Atoms
from ase.data import atomic_numbers as _SYMBOL_TO_Z
from ase.data import chemical_symbols as _Z_TO_SYMBOL

from atomistic.keys import TENSOR_KEYS
from atomistic.voigt import tensor_label

MAX_ATOMIC_NUMBER = 118
MIN_INTERATOMIC_DISTANCE = 0.1  # Å; closer pairs are rejected as unphysical
DEFAULT_MAX_ATOMS = 100_000
MAX_COORDINATE = 1e8  # Å; past it float64 resolves a coordinate more coarsely than ~1.5e-8 Å
_MIN_PERIODIC_VOLUME = 1e-6  # Å³ (Å² / Å for 2D / 1D periodicity)


class StructureError(ValueError):
    """A structure failed validation.

    The message names the structure's position in its batch, the offending field and
    the reason, e.g. ``structure 3: field 'positions': contains NaN or inf``.
    """

    def __init__(self, index: int | None, field: str, reason: str):
        self.index = index
        self.field = field
        self.reason = reason
        where = f"structure {index}" if index is not None else "structure"
        super().__init__(f"{where}: field '{field}': {reason}")


class UnsupportedFormatError(ValueError):
    """A file or text whose format cannot be read."""


@dataclasses.dataclass(frozen=True, eq=False)
class Structure:
    """One validated atomic system.

    Attributes:
        numbers: ``[n_atoms]`` int64 atomic numbers.
        positions: ``[n_atoms, 3]`` float64 Cartesian positions, Å.
        cell: ``[3, 3]`` float64 lattice vectors as rows, Å (zeros when not periodic).
        pbc: ``[3]`` bool periodicity along each lattice vector.
        labels: reference values carried along with the structure (``energy`` eV,
            ``forces`` [n_atoms, 3] eV/Å, ``stress`` [3, 3] eV/Å³), if known.
        info: free-form metadata (source file, group, name).
    """

    numbers: np.ndarray
    positions: np.ndarray
    cell: np.ndarray
    pbc: np.ndarray
    labels: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    info: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.numbers.shape[0])

    @property
    def is_periodic(self) -> bool:
        return bool(self.pbc.any())

    @property
    def volume(self) -> float:
        """|det(cell)| in Å³ (0 for a non-periodic structure without a cell)."""
        return float(abs(np.linalg.det(self.cell)))

    @property
    def symbols(self) -> list[str]:
        return [_Z_TO_SYMBOL[z] for z in self.numbers]

    def to_ase(self) -> Atoms:
        """An ASE ``Atoms`` with the same atoms, cell and periodicity (no calculator)."""
        return Atoms(numbers=self.numbers, positions=self.positions, cell=self.cell, pbc=self.pbc)


# --------------------------------------------------------------------------------------
# validation
# --------------------------------------------------------------------------------------


def validate_structure(
    structure: Structure,
    index: int | None = None,
    *,
    supported_numbers: Iterable[int] | None = None,
    max_atoms: int = DEFAULT_MAX_ATOMS,
    min_distance: float = MIN_INTERATOMIC_DISTANCE,
) -> Structure:
    """Check a :class:`Structure` and return it, or raise :class:`StructureError`."""
    numbers, positions, cell, pbc = structure.numbers, structure.positions, structure.cell, structure.pbc
    if numbers.ndim != 1:
        raise StructureError(index, "numbers", f"expected shape [n_atoms], got {list(numbers.shape)}")
    n_atoms = numbers.shape[0]
    if n_atoms == 0:
        raise StructureError(index, "numbers", "structure has no atoms")
    if n_atoms > max_atoms:
        raise StructureError(index, "numbers", f"{n_atoms} atoms exceeds the limit of {max_atoms}")
    bad = (numbers < 1) | (numbers > MAX_ATOMIC_NUMBER)
    if bad.any():
        raise StructureError(index, "numbers", f"unknown element with atomic number {int(numbers[bad][0])}")
    if supported_numbers is not None:
        supported = set(int(z) for z in supported_numbers)
        missing = sorted(set(numbers.tolist()) - supported)
        if missing:
            names = ", ".join(_Z_TO_SYMBOL[z] for z in missing)
            allowed = ", ".join(_Z_TO_SYMBOL[z] for z in sorted(supported))
            raise StructureError(index, "numbers", f"element(s) {names} not supported by this model (supports {allowed})")
    if positions.shape != (n_atoms, 3):
        raise StructureError(index, "positions", f"expected shape [{n_atoms}, 3], got {list(positions.shape)}")
    if not np.isfinite(positions).all():
        raise StructureError(index, "positions", "contains NaN or inf")
    if np.abs(positions).max() > MAX_COORDINATE:
        raise StructureError(index, "positions", f"coordinates beyond ±{MAX_COORDINATE:g} Å")
    if cell.shape != (3, 3):
        raise StructureError(index, "cell", f"expected shape [3, 3], got {list(cell.shape)}")
    if not np.isfinite(cell).all():
        raise StructureError(index, "cell", "contains NaN or inf")
    if np.abs(cell).max() > MAX_COORDINATE:
        raise StructureError(index, "cell", f"lattice vector components beyond ±{MAX_COORDINATE:g} Å")
    if pbc.shape != (3,):
        raise StructureError(index, "pbc", f"expected 3 booleans, got shape {list(pbc.shape)}")
    if pbc.any():
        periodic_vectors = cell[pbc]
        gram = periodic_vectors @ periodic_vectors.T
        measure = float(np.sqrt(max(np.linalg.det(gram), 0.0)))
        if measure < _MIN_PERIODIC_VOLUME:
            raise StructureError(
                index, "cell", "lattice vectors along the periodic directions are singular (zero volume)"
            )
    for key, value in structure.labels.items():
        arr = np.asarray(value, dtype=float)
        if not np.isfinite(arr).all():
            raise StructureError(index, key, "label contains NaN or inf")
    _check_min_distance(structure, index, min_distance)
    return structure


def _check_min_distance(structure: Structure, index: int | None, min_distance: float) -> None:
    from atomistic.data.neighbors import NeighborSearchError, neighbor_list

    # a cell list binned at a 0.1 Å cutoff has ~(L / 0.1 Å)³ bins: search at 1 Å (a handful of
    # bins) and keep the pairs below the minimum.  A structure the search takes at 1 Å it takes at
    # any larger cutoff too, so a model never meets one its neighbour search refuses.
    try:
        centre, neighbour, _, distances = neighbor_list(
            structure.positions, structure.cell, structure.pbc, cutoff=max(min_distance, 1.0), with_distances=True
        )
    except NeighborSearchError as err:
        raise StructureError(index, err.field, err.reason) from None
    close = distances < min_distance
    centre, neighbour, distances = centre[close], neighbour[close], distances[close]
    if distances.size:
        k = int(np.argmin(distances))
        i, j = int(centre[k]), int(neighbour[k])
        what = f"atoms {i} and {j}" if i != j else f"atom {i} and its periodic image"
        raise StructureError(
            index, "positions", f"{what} are {distances[k]:.4f} Å apart (minimum {min_distance} Å)"
        )


# --------------------------------------------------------------------------------------
# conversion from the accepted input types
# --------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class LabelKeys:
    """Where a labelled frame (extxyz, or ASE ``Atoms``) keeps its reference values: the energy
    (eV) and stress (eV/Å³, Voigt or 3x3) under these names in ``atoms.info`` and the forces
    ([n_atoms, 3], eV/Å) in ``atoms.arrays``, or in the attached calculator's results. The
    defaults are ASE's names; files written for MACE often use ``REF_energy``, ``REF_forces``
    and ``REF_stress``. Whatever the names in the file, the labels are ``energy``, ``forces``
    and ``stress`` on the :class:`Structure`."""

    energy: str = "energy"
    forces: str = "forces"
    stress: str = "stress"


def missing_labels_message(source: str | os.PathLike, structures: Sequence[Structure], label_keys: LabelKeys | None) -> str | None:
    """``None`` when some frame of ``source`` carries a label; else why none does: the keys they were
    looked for under, and the numeric info keys of the first frame (where a differently named
    energy usually is). An empty file is not reported."""
    if not structures or any(s.labels for s in structures):
        return None
    keys = label_keys or LabelKeys()
    numeric = sorted(
        k for k, v in structures[0].info.items() if isinstance(v, int | float) and not isinstance(v, bool) and k != "frame"
    )
    return (
        f"'{source}' holds no labels: no energy under info['{keys.energy}'], no forces under "
        f"arrays['{keys.forces}'], no stress under info['{keys.stress}']"
        + (f"; its first structure's numeric info keys are {numeric}" if numeric else "")
    )


def _structure_from_ase(atoms: Atoms, index: int | None, label_keys: LabelKeys | None = None) -> Structure:
    keys = label_keys or LabelKeys()
    labels: dict[str, Any] = {}
    calc = atoms.calc
    results = dict(getattr(calc, "results", {}) or {})
    energy = results.get(keys.energy, atoms.info.get(keys.energy))
    if energy is not None:
        try:
            labels["energy"] = float(energy)
        except (TypeError, ValueError):
            raise StructureError(index, keys.energy, f"expected one number (eV), got {energy!r}") from None
    forces = results.get(keys.forces, atoms.arrays.get(keys.forces))
    if forces is not None:
        labels["forces"] = np.asarray(forces, dtype=np.float64)
    stress = results.get(keys.stress, atoms.info.get(keys.stress))
    if stress is not None:
        labels["stress"] = _stress_to_matrix(np.asarray(stress, dtype=np.float64), index)
    for key in TENSOR_KEYS:  # ASE's extxyz reader puts some (dielectric_tensor) into calculator results
        value = results.get(key, atoms.info.get(key))
        if value is not None:
            try:
                labels[key] = tensor_label(key, value)
            except ValueError as err:
                raise StructureError(index, key, str(err).split(": ", 1)[-1]) from None
    info = {k: v for k, v in atoms.info.items() if isinstance(v, str | int | float)}
    return Structure(
        numbers=np.asarray(atoms.numbers, dtype=np.int64).copy(),
        positions=np.asarray(atoms.positions, dtype=np.float64).copy(),
        cell=np.asarray(atoms.cell.array, dtype=np.float64).copy(),
        pbc=np.asarray(atoms.pbc, dtype=bool).copy(),
        labels=labels,
        info=info,
    )


def _stress_to_matrix(stress: np.ndarray, index: int | None) -> np.ndarray:
    """ASE Voigt order (xx, yy, zz, yz, xz, xy) or a 3x3 matrix → [3, 3]."""
    if stress.shape == (3, 3):
        return stress
    if stress.shape == (6,):
        xx, yy, zz, yz, xz, xy = stress
        return np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])
    if stress.shape == (9,):
        return stress.reshape(3, 3)
    raise StructureError(index, "stress", f"expected 6 Voigt components or 3x3, got shape {list(stress.shape)}")


def _structure_from_pymatgen(obj: Any, index: int | None) -> Structure:
    from pymatgen.core import Molecule
    from pymatgen.core import Structure as PmgStructure

    if not obj.is_ordered:
        raise StructureError(index, "sites", "disordered (partial-occupancy) sites are not supported")
    numbers = np.array([site.specie.Z for site in obj], dtype=np.int64)
    positions = np.array(obj.cart_coords, dtype=np.float64).reshape(-1, 3)
    if isinstance(obj, PmgStructure):
        cell = np.array(obj.lattice.matrix, dtype=np.float64)
        pbc = np.array(getattr(obj.lattice, "pbc", (True, True, True)), dtype=bool)
    elif isinstance(obj, Molecule):
        cell = np.zeros((3, 3))
        pbc = np.zeros(3, dtype=bool)
    else:  # pragma: no cover - guarded by the caller
        raise StructureError(index, "structure", f"unsupported pymatgen type {type(obj).__name__}")
    return Structure(numbers=numbers, positions=positions, cell=cell, pbc=pbc)


def _structure_from_dict(data: Mapping[str, Any], index: int | None) -> Structure:
    if "@class" in data and data.get("@module", "").startswith("pymatgen"):
        from monty.json import MontyDecoder

        return _structure_from_pymatgen(MontyDecoder().process_decoded(dict(data)), index)
    if "numbers" in data and data["numbers"] is not None:
        try:
            numbers = np.asarray(data["numbers"])
        except Exception as err:  # ragged lists
            raise StructureError(index, "numbers", f"not an array of integers ({err})") from None
        if numbers.dtype.kind not in "iu" and not (
            numbers.dtype.kind == "f" and np.all(np.mod(numbers, 1) == 0)
        ):
            raise StructureError(index, "numbers", "atomic numbers must be integers")
        numbers = numbers.astype(np.int64)
    elif "symbols" in data and data["symbols"] is not None:
        symbols = data["symbols"]
        if isinstance(symbols, str):
            raise StructureError(index, "symbols", "expected a list of element symbols, got a string")
        unknown = [s for s in symbols if s not in _SYMBOL_TO_Z or s == "X"]
        if unknown:
            raise StructureError(index, "symbols", f"unknown element symbol '{unknown[0]}'")
        numbers = np.array([_SYMBOL_TO_Z[s] for s in symbols], dtype=np.int64)
    else:
        raise StructureError(index, "numbers", "either 'numbers' or 'symbols' is required")
    if "positions" not in data:
        raise StructureError(index, "positions", "field is required")
    positions = _float_array(data["positions"], index, "positions")
    pbc_value = data.get("pbc", False)
    pbc = np.array(pbc_value, dtype=bool)
    if pbc.shape == ():
        pbc = np.repeat(pbc, 3)
    cell_value = data.get("cell")
    if cell_value is None:
        if pbc.any():
            raise StructureError(index, "cell", "a cell is required when pbc is set")
        cell = np.zeros((3, 3))
    else:
        cell = _float_array(cell_value, index, "cell")
        if cell.shape == (3,):
            cell = np.diag(cell)
    return Structure(numbers=numbers, positions=positions, cell=cell, pbc=pbc)


def _float_array(value: Any, index: int | None, field: str) -> np.ndarray:
    try:
        return np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise StructureError(index, field, f"not an array of numbers ({err})") from None


def as_structure(obj: Any, index: int | None = None) -> Structure:
    """Convert one supported object into an (unvalidated) :class:`Structure`."""
    if isinstance(obj, Structure):
        return obj
    if isinstance(obj, Atoms):
        return _structure_from_ase(obj, index)
    module = type(obj).__module__
    if module.startswith("pymatgen"):
        return _structure_from_pymatgen(obj, index)
    if isinstance(obj, Mapping):
        return _structure_from_dict(obj, index)
    raise StructureError(
        index,
        "structure",
        f"unsupported input type {type(obj).__name__}; expected ase.Atoms, pymatgen Structure/Molecule, "
        "a dict with numbers|symbols/positions/cell/pbc, or a file path",
    )


def _expand_inputs(inputs: Any) -> list[Any]:
    """One item per structure: files are read (each may hold many), other items kept."""
    items: list[Any] = []
    for item in _as_list(inputs):
        if isinstance(item, str | os.PathLike):
            items.extend(read_structures(item))
        else:
            items.append(item)
    return items


def to_structures(
    inputs: Any,
    *,
    supported_numbers: Iterable[int] | None = None,
    max_atoms: int = DEFAULT_MAX_ATOMS,
) -> list[Structure]:
    """Convert and validate one input or a sequence of inputs.

    Accepts ``ase.Atoms``, pymatgen ``Structure``/``Molecule``, dicts with
    ``numbers|symbols``, ``positions``, ``cell``, ``pbc``, :class:`Structure`, and paths to
    files (extxyz, xyz, CIF, POSCAR, mlearn JSON); a file may hold many structures.
    Raises :class:`StructureError` naming the index of the first bad structure.
    """
    supported = None if supported_numbers is None else tuple(supported_numbers)
    return [
        validate_structure(as_structure(item, i), i, supported_numbers=supported, max_atoms=max_atoms)
        for i, item in enumerate(_expand_inputs(inputs))
    ]


def to_structures_or_errors(
    inputs: Any,
    *,
    supported_numbers: Iterable[int] | None = None,
    max_atoms: int = DEFAULT_MAX_ATOMS,
) -> list[Structure | StructureError]:
    """Like :func:`to_structures`, but a bad structure yields its :class:`StructureError` in
    its slot instead of failing the whole batch (files that cannot be read still raise)."""
    supported = None if supported_numbers is None else tuple(supported_numbers)
    out: list[Structure | StructureError] = []
    for i, item in enumerate(_expand_inputs(inputs)):
        try:
            out.append(validate_structure(as_structure(item, i), i, supported_numbers=supported, max_atoms=max_atoms))
        except StructureError as err:
            out.append(err)
    return out


def _as_list(inputs: Any) -> list[Any]:
    if isinstance(inputs, Atoms | Structure | Mapping | str | os.PathLike):
        return [inputs]
    if type(inputs).__module__.startswith("pymatgen"):
        return [inputs]
    if isinstance(inputs, Sequence | Iterable):
        return list(inputs)
    return [inputs]


# --------------------------------------------------------------------------------------
# files and text
# --------------------------------------------------------------------------------------

_ASE_FORMATS = {"extxyz": "extxyz", "xyz": "extxyz", "cif": "cif", "poscar": "vasp", "vasp": "vasp"}


def guess_format(path: str | os.PathLike) -> str:
    """File format from the name: extxyz, xyz, cif, poscar or mlearn-json."""
    name = Path(path).name.lower()
    if name.endswith((".extxyz", ".xyz")):
        return "extxyz"
    if name.endswith(".cif"):
        return "cif"
    if name.endswith(".json"):
        return "mlearn-json"
    if name.startswith(("poscar", "contcar")) or name.endswith((".vasp", ".poscar")):
        return "poscar"
    raise UnsupportedFormatError(
        f"cannot tell the format of '{path}' from its name; use .extxyz/.xyz, .cif, .json (mlearn), "
        "POSCAR/CONTCAR/.vasp, or pass format="
    )


def read_structures(
    path: str | os.PathLike, format: str | None = None, label_keys: LabelKeys | None = None
) -> list[Structure]:
    """Read every structure of a file, with any labels it holds (unvalidated); ``label_keys``
    names the info / arrays keys of the labels in files that ASE reads (default: ASE's names).
    mlearn JSON files keep theirs under ``outputs`` and ignore ``label_keys``."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no such structure file: '{path}'")
    fmt = (format or guess_format(path)).lower()
    if fmt in ("mlearn-json", "mlearn", "json"):
        from atomistic.data.datasets import read_mlearn_json

        return read_mlearn_json(path)
    return parse_structures(path.read_text(), fmt, source=str(path), label_keys=label_keys)


def _check_xyz_atom_counts(text: str, source: str, fmt: str) -> None:
    """Refuse an (ext)xyz text whose frame header declares more atoms than lines follow, before
    ASE reads it: a 30-byte text declaring 10^9 atoms kept ASE busy for 38 s."""
    lines = text.splitlines()
    start, frame = 0, 0
    while start < len(lines) and lines[start].strip():
        try:
            count = int(lines[start].split()[0])
        except ValueError:
            return  # not a count: ASE's own error names the problem
        available = len(lines) - start - 2
        if count < 0 or count > available:
            raise UnsupportedFormatError(
                f"could not parse {source} as {fmt}: frame {frame} declares {count} atoms but the text holds {max(available, 0)} more lines"
            )
        start, frame = start + count + 2, frame + 1


def _check_poscar_atom_count(text: str, source: str, fmt: str) -> None:
    """Refuse a POSCAR whose atom counts (line 6, or 7 after the element symbols) add up to more
    than the lines that follow, before ASE reads it: a count of 10^9 made ASE allocate 16 GB."""
    lines = text.splitlines()
    for k in (5, 6):
        tokens = lines[k].split() if k < len(lines) else []
        if tokens and all(t.lstrip("-").isdigit() for t in tokens):
            counts = [int(t) for t in tokens]
            available = len(lines) - k - 2  # after the counts: the coordinate-mode line, then one line per atom
            if min(counts) < 0 or sum(counts) > available:
                raise UnsupportedFormatError(
                    f"could not parse {source} as {fmt}: the atom counts {counts} add up to {sum(counts)} but the text "
                    f"holds {max(available, 0)} more lines"
                )
            return


def parse_structures(
    text: str, format: str, source: str = "<text>", label_keys: LabelKeys | None = None
) -> list[Structure]:
    """Parse structures from the text of a file in ``format`` (extxyz, xyz, cif, poscar,
    mlearn-json); ``label_keys`` as in :func:`read_structures`."""
    import ase.io

    fmt = format.lower()
    if fmt in ("mlearn-json", "mlearn", "json"):
        import json

        from atomistic.data.datasets import structures_from_mlearn_records

        return structures_from_mlearn_records(json.loads(text), source=source)
    if fmt not in _ASE_FORMATS:
        raise UnsupportedFormatError(f"unsupported structure format '{format}'; expected one of {sorted(_ASE_FORMATS)} or mlearn-json")
    if _ASE_FORMATS[fmt] == "extxyz":
        _check_xyz_atom_counts(text, source, fmt)
    if _ASE_FORMATS[fmt] == "vasp":
        _check_poscar_atom_count(text, source, fmt)
    try:
        frames = ase.io.read(io.StringIO(text), index=":", format=_ASE_FORMATS[fmt])
    except Exception as err:
        raise UnsupportedFormatError(f"could not parse {source} as {fmt}: {err}") from None
    if isinstance(frames, Atoms):
        frames = [frames]
    structures = []
    for i, atoms in enumerate(frames):
        if fmt == "cif" and not (atoms.pbc.all() and atoms.cell.rank == 3):  # ASE drops the cell of a degenerate one
            lengths = ", ".join(f"{x:g}" for x in atoms.cell.lengths())
            raise UnsupportedFormatError(f"could not parse {source} as cif: block {i} has a degenerate cell (lengths {lengths} Å)")
        s = _structure_from_ase(atoms, i, label_keys)
        structures.append(dataclasses.replace(s, info={**s.info, "source": source, "frame": i}))
    return structures
